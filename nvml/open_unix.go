//go:build unix

package nvml

import (
	"fmt"
	"os"
	"syscall"
)

// openRegular opens a file that a job's owner may control (progress files)
// or that sits in a directory others could write to. O_NOFOLLOW keeps a
// symbolic link from pointing the collector, which runs as root, at
// another file; O_NONBLOCK keeps a FIFO from hanging it; and anything but
// a regular file is refused.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s is not a regular file", path)
	}
	return f, fi, nil
}

// fileID identifies the file behind fi, so that a file replaced by
// another of the same name (a requeued job's) is noticed.
func fileID(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
