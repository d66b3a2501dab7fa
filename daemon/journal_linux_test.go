package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/internal/testenv"
)

// A full disk takes part of a journal line: the journal cuts it back, so that the next event
// (once there is room) does not follow half a line, and the journal replays whole at the next
// start. Before, the torn line stayed mid-file and the next sealrund refused the journal as
// evidence that is not repaired (found by make test-stress, TestFaultStateDiskFull).
func TestJournalFullDisk(t *testing.T) {
	dir := testenv.SmallDisk(t, 64<<10)
	// Room to free later: another file on the same disk.
	spare := filepath.Join(dir, "spare")
	if err := os.WriteFile(spare, make([]byte, 16<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "journal.jsonl")
	j, err := OpenJournal(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	// Events of about 1.5 KiB, which do not divide a page: the disk fills part way through one.
	reason := strings.Repeat("r", 1500)
	acked := 0
	var full error
	for i := 0; i < 1000 && full == nil; i++ {
		if full = j.Append(api.Event{Run: "r-1", Kind: "event", Reason: fmt.Sprintf("%d %s", i, reason)}); full == nil {
			acked++
		}
	}
	if !errors.Is(full, unix.ENOSPC) {
		t.Fatalf("after %d events: %v; want the full disk", acked, full)
	}
	whole := func(when string, want int) {
		t.Helper()
		b := mustRead(t, p)
		if len(b) > 0 && b[len(b)-1] != '\n' {
			t.Errorf("%s: the journal ends in part of a line (%d bytes)", when, len(b))
		}
		if n := bytes.Count(b, []byte{'\n'}); n != want {
			t.Errorf("%s: %d lines; want %d, the acknowledged events", when, n, want)
		}
	}
	whole("after the failed append", acked)
	// The operator makes room: the next event is appended whole, after the last whole line.
	if err := os.Remove(spare); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(api.Event{Run: "r-1", Kind: "state", State: api.StateInvalid, Reason: "disk full"}); err != nil {
		t.Fatalf("an append once there is room: %v", err)
	}
	whole("after room was made", acked+1)
	j.Close()
	n, last := 0, ""
	j2, err := OpenJournal(p, func(e api.Event) error { n, last = n+1, e.State; return nil })
	if err != nil {
		t.Fatalf("the journal does not replay after the full disk: %v", err)
	}
	j2.Close()
	if n != acked+1 || last != api.StateInvalid {
		t.Errorf("replayed %d events, the last in state %q; want %d, the last invalid", n, last, acked+1)
	}
}
