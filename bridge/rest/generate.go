package rest

// The adapters of the other slurmrestd API versions are copies of
// adapter_v0042.go with the version renamed. Edit adapter_v0042.go, then
// run `go generate ./bridge/rest`; TestGeneratedAdaptersAreCurrent fails
// while a generated file lags behind.

//go:generate sh gen_adapters.sh
