// Package etc ships the files gavel-slurm needs at run time: the reference
// throughput tables (measured by the Gavel authors, MIT license, see
// GAVEL-DATA-LICENSE.txt) and the documented example configuration.
// They are embedded so the binary works wherever it is installed.
package etc

import _ "embed"

// SimulationThroughputs is the throughput table the Gavel paper's simulations
// use: steps/s of 26 job types on k80/p100/v100, alone and co-located.
//
//go:embed gavel-simulation-throughputs.json
var SimulationThroughputs []byte

// PhysicalClusterThroughputs is the same table with values re-measured on a
// physical cluster.
//
//go:embed gavel-physical-cluster-throughputs.json
var PhysicalClusterThroughputs []byte

// DataLicense is the notice that must accompany the throughput tables.
//
//go:embed GAVEL-DATA-LICENSE.txt
var DataLicense string
