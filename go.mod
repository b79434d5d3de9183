module github.com/gavel-slurm/gavel-slurm

go 1.26

require github.com/lanl/clp v1.2.0
