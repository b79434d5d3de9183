//go:build !unix

package nvml

import (
	"fmt"
	"os"
)

// openRegular opens path and refuses anything but a regular file. Only
// unix systems have Slurm nodes; this keeps the package building elsewhere.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	return f, fi, err
}

func fileID(os.FileInfo) uint64 { return 0 }
