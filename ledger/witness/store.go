package witness

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/ledger"
)

// Head is the latest checkpoint a witness cosigned for one log: its size and root hash.
type Head struct {
	Size uint64
	Root ledger.Hash
}

// record is one line of the state file.
type record struct {
	Origin string `json:"origin"`
	Size   uint64 `json:"size"`
	Root   string `json:"root"` // base64
}

func (h Head) record(origin string) []byte {
	b, _ := json.Marshal(record{Origin: origin, Size: h.Size, Root: base64.StdEncoding.EncodeToString(h.Root[:])})
	return append(b, '\n')
}

// maxRecordBytes bounds one line of the state file (an origin is at most 200 bytes).
const maxRecordBytes = 1 << 10

// Store keeps, per log, the latest head the witness cosigned, in one JSON Lines file: a line
// appended and fsynced per cosigned head, the last line of an origin its head. A line cut by
// a crash was never answered (the answer waits for the fsync) and is dropped at open; at open
// the file is also rewritten (atomically) when most of its lines are superseded.
type Store struct {
	mu    sync.Mutex
	path  string
	f     *os.File
	end   int64 // the file's size: just past its last whole record (fileio.AppendSync)
	torn  error // an append whose part written could not be taken back: no more records
	heads map[string]Head
	lines int
}

// StateFile is the store's file in a witness's state directory.
const StateFile = "witness-heads.jsonl"

// OpenStore opens (or creates) the store in dir.
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("witness state directory %s: %w", dir, err)
	}
	s := &Store{path: filepath.Join(dir, StateFile), heads: map[string]Head{}}
	data, err := os.ReadFile(s.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("witness state %s: %w", s.path, err)
	}
	good := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, maxRecordBytes+1), maxRecordBytes+1)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if good+len(line) == len(data) { // no newline: a write cut by a crash, never answered
			break
		}
		var r record
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		err := dec.Decode(&r)
		root, rerr := base64.StdEncoding.DecodeString(r.Root)
		if err == nil && (rerr != nil || len(root) != sha256.Size) {
			err = fmt.Errorf("root %q is not a base64 SHA-256 hash", r.Root)
		}
		if err == nil {
			err = checkName("origin", r.Origin)
		}
		if err != nil {
			return nil, fmt.Errorf("witness state %s, line %d: not a head record (%v); the file was edited: restore it from a backup, never delete it (a witness that forgets a size can be made to cosign a rolled-back log)", s.path, n, err)
		}
		if old, ok := s.heads[r.Origin]; ok && r.Size < old.Size {
			return nil, fmt.Errorf("witness state %s, line %d: %s goes back from size %d to %d; the file was edited: restore it from a backup", s.path, n, r.Origin, old.Size, r.Size)
		}
		s.heads[r.Origin] = Head{Size: r.Size, Root: ledger.Hash(root)}
		good += len(line) + 1
		s.lines++
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("witness state %s: %v", s.path, err)
	}
	if good != len(data) || s.lines > 2*len(s.heads)+1024 {
		// Drop the cut line, or the superseded ones: one line per log, written atomically.
		if err := s.rewrite(); err != nil {
			return nil, err
		}
	}
	if s.f, err = os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err != nil {
		return nil, fmt.Errorf("witness state %s: %w", s.path, err)
	}
	if s.end, err = s.f.Seek(0, io.SeekEnd); err != nil {
		s.f.Close()
		return nil, fmt.Errorf("witness state %s: %w", s.path, err)
	}
	return s, fileio.SyncDir(dir)
}

func (s *Store) rewrite() error {
	err := fileio.WriteAtomic(s.path, 0o600, func(w io.Writer) error {
		for origin, h := range s.heads {
			if _, err := w.Write(h.record(origin)); err != nil {
				return err
			}
		}
		return nil
	})
	s.lines = len(s.heads)
	return err
}

// Head is the latest head cosigned for origin (size 0 when none).
func (s *Store) Head(origin string) Head {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heads[origin]
}

// Update runs check with origin's head under the store's lock and, when it passes, makes next
// origin's head on disk (append and fsync) before it returns: a check and its update are one
// step, so that two requests never roll a size back.
func (s *Store) Update(origin string, check func(cur Head) (next Head, err error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.heads[origin]
	next, err := check(cur)
	if err != nil {
		return err
	}
	if next.Size < cur.Size {
		return fmt.Errorf("witness: %s would go back from size %d to %d", origin, cur.Size, next.Size)
	}
	if _, ok := s.heads[origin]; ok && next == cur {
		return nil // already on disk
	}
	if s.torn != nil {
		return s.torn
	}
	// A full disk that takes part of the record leaves nothing of it: a record written after
	// part of one would read, at the next start, as a file someone edited.
	end, err := fileio.AppendSync(s.f, s.end, next.record(origin))
	if err != nil {
		err = fmt.Errorf("witness state %s: %w", s.path, err)
		if errors.Is(err, fileio.ErrTorn) {
			s.torn = fmt.Errorf("%w: the witness cosigns nothing more; restart it once the disk is fixed (the cut record is dropped at start)", err)
		}
		return err
	}
	s.end = end
	s.heads[origin] = next
	s.lines++
	return nil
}

// Close closes the file.
func (s *Store) Close() error { return s.f.Close() }
