package rest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
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

// TokenExpiry reads when the JWT expires: its exp claim, which
// slurmrestd checks (scontrol token's lifespan). It does not verify the
// token, which only slurmctld can; zero with no error means the token has
// no exp claim.
func (c *Client) TokenExpiry() (time.Time, error) {
	token, err := c.token.get()
	if err != nil {
		return time.Time{}, err
	}
	return jwtExpiry(token)
}

// jwtExpiry reads the exp claim of a JWT (header.payload.signature, each
// base64url without padding).
func jwtExpiry(token string) (time.Time, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, fmt.Errorf("the JWT has %d parts, not 3", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, fmt.Errorf("the JWT's payload is not base64url: %w", err)
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&claims); err != nil {
		return time.Time{}, fmt.Errorf("the JWT's payload is not a JSON object: %w", err)
	}
	if claims.Exp == nil {
		return time.Time{}, nil
	}
	exp, err := claims.Exp.Float64()
	if err != nil || exp <= 0 || exp > float64(latestTime.Unix()) {
		return time.Time{}, fmt.Errorf("the JWT's exp claim %q is not a time", claims.Exp.String())
	}
	return time.Unix(int64(exp), 0), nil
}
