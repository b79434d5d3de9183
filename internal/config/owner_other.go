//go:build !unix

package config

import "os"

// fileOwner is unknown where files have no unix owner.
func fileOwner(os.FileInfo) (int, bool) { return 0, false }
