package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sealrun/sealrun/internal/testenv"
)

// A full disk takes part of an audit entry: the log is cut back to its last whole entry, the
// head stays the chain of what is on disk, and once there is room the next entry follows it;
// the log reopens with the same head. Before, the part stayed, the next entry followed it, and
// the run's audit log no longer matched the head its attestation binds.
func TestAppendOnAFullDisk(t *testing.T) {
	dir := testenv.SmallDisk(t, 64<<10)
	spare := filepath.Join(dir, "spare")
	if err := os.WriteFile(spare, make([]byte, 16<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "audit.jsonl")
	l, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	body := map[string]string{"out": strings.Repeat("o", 1500)} // does not divide a page
	var full error
	for i := 0; i < 1000 && full == nil; i++ {
		_, _, full = l.Append("call", body)
	}
	if !errors.Is(full, unix.ENOSPC) || !strings.Contains(full.Error(), p) {
		t.Fatalf("%v; want the full disk, naming the log", full)
	}
	head, n := l.Head()
	check := func(when string, wantHead string, wantN int) {
		t.Helper()
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		h, m, err := Head(f)
		if err != nil || h != wantHead || m != wantN {
			t.Errorf("%s: the log on disk has head %s, %d entries (%v); the log says %s, %d", when, h, m, err, wantHead, wantN)
		}
	}
	check("after the failed append", head, n)
	os.Remove(spare)
	if _, _, err := l.Append("call", map[string]string{"out": "room again"}); err != nil {
		t.Fatalf("an append once there is room: %v", err)
	}
	head, n = l.Head()
	check("after room was made", head, n)
	l.Close()
	l2, err := Open(p)
	if err != nil {
		t.Fatalf("the log does not reopen after the full disk: %v", err)
	}
	defer l2.Close()
	if h, m := l2.Head(); h != head || m != n {
		t.Errorf("reopened: head %s, %d entries; want %s, %d", h, m, head, n)
	}
}
