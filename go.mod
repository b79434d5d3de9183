module github.com/gavel-slurm/gavel-slurm

go 1.26

require github.com/lanl/clp v1.2.0

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/klauspost/compress v1.18.0 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.65.0 // indirect
	github.com/prometheus/procfs v0.16.1 // indirect
	google.golang.org/protobuf v1.36.6 // indirect
)

require (
	github.com/BurntSushi/toml v1.4.0 // indirect
	github.com/SlinkyProject/slurm-client v1.0.0 // indirect
	github.com/prometheus/client_golang v1.22.0
	go.etcd.io/bbolt v1.3.11 // indirect
	golang.org/x/sys v0.37.0 // indirect
)
