package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/internal/fileio"
)

// Journal is the daemon's durable record: JSON Lines, append + fsync per event. Why not bbolt:
// the journal is only ever appended to and replayed whole at start (the daemon keeps the runs'
// states in memory), which append-only fsynced lines do with no dependency, in a format an
// operator can read with jq; the per-run files (run.json, audit.jsonl, history.jsonl) carry the
// rest. A line cut by a crash was never acknowledged (the fsync comes before any answer), so
// replay drops it and truncates the file there.
type Journal struct {
	mu   sync.Mutex
	f    *os.File
	path string
	// end is the offset just past the last whole, fsynced line: a write that fails part way (a
	// full disk takes only part of a line) is cut back to it (fileio.AppendSync), so that the
	// next event does not follow half a line; broken is set where even that failed, and refuses
	// every later append.
	end    int64
	broken error
	// killAfter is a test failpoint (SEALRUND_TEST_KILL_AFTER): the process kills itself with
	// SIGKILL right after the matching event is appended and fsynced (see KillAfter).
	killAfter string
	killN     int
}

// KillAfter arms the crash failpoint of the fault tests: after the n-th appended event (from
// now) that matches point — "KIND" or "KIND:STATE", e.g. "sealed" or "state:grading" — is
// fsynced, the process sends itself SIGKILL before anything else happens. Never in production:
// sealrund arms it from SEALRUND_TEST_KILL_AFTER ("POINT" or "POINT#N") with a warning.
func (j *Journal) KillAfter(point string, n int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.killAfter, j.killN = point, n
}

// OpenJournal opens (creating) the journal and replays it through fn, in order.
func OpenJournal(path string, fn func(api.Event) error) (*Journal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	var good int64
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			if len(line) > 0 { // a torn last line: never acknowledged
				if terr := f.Truncate(good); terr != nil {
					f.Close()
					return nil, fmt.Errorf("journal %s: truncate the torn last line: %w", path, terr)
				}
			}
			break
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("read journal %s: %w", path, err)
		}
		var e api.Event
		if err := json.Unmarshal(bytes.TrimSuffix(line, []byte{'\n'}), &e); err != nil {
			f.Close()
			return nil, fmt.Errorf("journal %s:%d: %v; the journal is evidence and is not repaired automatically: move it aside and restart", path, n, err)
		}
		if fn != nil {
			if err := fn(e); err != nil {
				f.Close()
				return nil, fmt.Errorf("journal %s:%d: %w", path, n, err)
			}
		}
		good += int64(len(line))
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return &Journal{f: f, path: path, end: good}, nil
}

// Append writes e and fsyncs.
func (j *Journal) Append(e api.Event) error {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if len(b) > api.MaxEventBytes {
		return fmt.Errorf("journal event of %d bytes; at most %d", len(b), api.MaxEventBytes)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return errors.New("journal is closed")
	}
	if j.broken != nil {
		return j.broken
	}
	end, err := fileio.AppendSync(j.f, j.end, append(b, '\n'))
	if err != nil {
		err = fmt.Errorf("append to journal %s: %w", j.path, err)
		if errors.Is(err, fileio.ErrTorn) {
			j.broken = fmt.Errorf("%w: the journal takes no more events; restart sealrund once the disk is fixed (replay drops the torn line)", err)
		}
		return err
	}
	j.end = end
	if j.killAfter != "" && (j.killAfter == string(e.Kind) || j.killAfter == string(e.Kind)+":"+e.State) {
		if j.killN--; j.killN <= 0 {
			if self, err := os.FindProcess(os.Getpid()); err == nil {
				self.Kill() // SIGKILL on Linux
			}
			select {} // never returns: the kill cannot be caught
		}
	}
	return nil
}

// Close closes the journal.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}
