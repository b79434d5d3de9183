package store

import (
	"fmt"
	bolt "go.etcd.io/bbolt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

const truncEnv = "GAVEL_STORE_DAMAGED_DIR"

// Child: open the store in dir and read everything, exiting 0 on success
// or a clean error, 1 on a recovered panic (a fatal signal kills it).
func TestDamagedStateChild(t *testing.T) {
	dir := os.Getenv(truncEnv)
	if dir == "" {
		t.Skip("child only")
	}
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "PANIC: %v\n", r)
			os.Exit(1)
		}
	}()
	s, err := Open(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "open error: %v\n", err)
		os.Exit(0)
	}
	_, _, err1 := s.Jobs()
	_, _, err2 := s.Recent(0)
	fmt.Fprintf(os.Stderr, "read errors: %v %v\n", err1, err2)
	s.Close()
	os.Exit(0)
}

// A state file cut short (a disk that filled, a copy interrupted) or with
// damaged bytes gives an error at Open, not a crash: each variant is
// opened in a child process, which a fault would kill.
func TestDamagedStateFileDoesNotCrash(t *testing.T) {
	src := t.TempDir()
	s := openTemp(t, src)
	var recs []testRecord
	for i := range 3000 {
		recs = append(recs, testRecord{JobID: strconv.Itoa(i), FirstSeen: t0, LastDecision: "some reason text that takes room", Received: map[string]float64{"v100": float64(i)}})
	}
	if err := s.SaveRound(jobsOf(recs...), nil, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		if _, err := s.Intent(1, strconv.Itoa(i), "hold", map[string]int{"x": i}, t0); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	data, err := os.ReadFile(filepath.Join(src, FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("state file %d bytes", len(data))
	type variant struct {
		name string
		data []byte
	}
	var vs []variant
	for _, n := range []int{100, 4096, 8192, 16384, 3 * 4096, len(data) / 2, len(data) - 4096} {
		vs = append(vs, variant{fmt.Sprintf("truncated to %d", n), data[:n]})
	}
	for _, off := range []int{2 * 4096, 3 * 4096, len(data) / 2, len(data) - 8192} {
		d := append([]byte(nil), data...)
		for i := off + 16; i < off+4096 && i < len(d); i++ {
			d[i] = 0xff
		}
		vs = append(vs, variant{fmt.Sprintf("page at %d overwritten", off), d})
		d2 := append([]byte(nil), data...)
		for i := off; i < off+16 && i < len(d2); i++ { // page header
			d2[i] = 0xff
		}
		vs = append(vs, variant{fmt.Sprintf("page header at %d overwritten", off), d2})
	}
	for _, v := range vs {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, FileName), v.data, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestDamagedStateChild$")
		cmd.Env = append(os.Environ(), truncEnv+"="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			tail := string(out)
			if len(tail) > 600 {
				tail = tail[:600]
			}
			t.Errorf("%s: opening the store killed the process (%v):\n%s", v.name, err, tail)
		} else {
			t.Logf("%s: %s", v.name, firstLine(out))
		}
	}
}

func firstLine(b []byte) string {
	for i, c := range b {
		if c == '\n' {
			return string(b[:i])
		}
	}
	return string(b)
}

// One damaged job record (a torn value, a record written by a build with
// another layout) is skipped and reported, as the journal's are; the
// other jobs' records are read.
func TestOneDamagedJobRecordDoesNotHideTheOthers(t *testing.T) {
	s := openTemp(t, t.TempDir())
	defer s.Close()
	if err := s.SaveRound(jobsOf(testRecord{JobID: "17", FirstSeen: t0}, testRecord{JobID: "18", FirstSeen: t0}), nil, nil); err != nil {
		t.Fatal(err)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketJobs).Put([]byte("19"), []byte(`{"job_id":"19","first_seen":"2025-03-`))
	})
	if err != nil {
		t.Fatal(err)
	}
	got, corrupt, err := s.Jobs()
	if err != nil {
		t.Fatalf("Jobs with one damaged record of three: %v", err)
	}
	if _, ok := got["17"]; !ok || len(got) != 2 || len(corrupt) != 1 || corrupt[0].JobID != "19" {
		t.Errorf("Jobs = %v, corrupt %v; want 17 and 18, and 19 reported", got, corrupt)
	}
}
