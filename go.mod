module github.com/gavel-slurm/gavel-slurm

go 1.26

require github.com/lanl/clp v1.2.0

require (
	github.com/BurntSushi/toml v1.4.0 // indirect
	github.com/SlinkyProject/slurm-client v1.0.0 // indirect
	go.etcd.io/bbolt v1.3.11 // indirect
	golang.org/x/sys v0.37.0 // indirect
)
