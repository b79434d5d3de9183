package rest

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// tokenFile serves the JWT from a file and re-reads it when the file
// changes, so that a rotated token is picked up without a restart. The token
// never appears in errors or logs.
type tokenFile struct {
	path string

	mu      sync.Mutex
	token   string
	modTime time.Time
	size    int64
}

func (t *tokenFile) get() (string, error) {
	info, err := os.Stat(t.path)
	if err != nil {
		return "", fmt.Errorf("JWT file: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && info.ModTime().Equal(t.modTime) && info.Size() == t.size {
		return t.token, nil
	}
	data, err := os.ReadFile(t.path)
	if err != nil {
		return "", fmt.Errorf("JWT file: %w", err)
	}
	token := strings.TrimSpace(string(data))
	// scontrol token prints "SLURM_JWT=..."; accept the file as it writes it.
	token = strings.TrimPrefix(token, "SLURM_JWT=")
	if token == "" {
		return "", errors.New("JWT file " + t.path + " is empty")
	}
	if strings.ContainsAny(token, " \t\r\n") {
		return "", errors.New("JWT file " + t.path + " holds more than one word")
	}
	t.token, t.modTime, t.size = token, info.ModTime(), info.Size()
	return token, nil
}
