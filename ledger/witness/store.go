package witness

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

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
// appended and fsynced per cosigned head, the last line of an origin its head. One process holds
// a state at a time (a lock the kernel lets go when it ends); the state must be on a local file
// system. A record is written only after the one before it was fsynced, so what a crash or a
// full disk cuts is the file's tail: a record never answered (the answer waits for the fsync),
// dropped at open. At open the file is also rewritten (atomically) when most of its lines are
// superseded.
type Store struct {
	mu    sync.Mutex
	path  string
	f     *os.File
	lock  *os.File
	end   int64 // the file's size: just past its last whole record (fileio.AppendSync)
	torn  error // an append whose part written could not be taken back: no more records
	heads map[string]Head
	lines int
}

// StateFile is the store's file in a witness's state directory; LockFile is the lock one process
// holds on the state, and says which.
const (
	StateFile = "witness-heads.jsonl"
	LockFile  = "witness.lock"
)

// ErrInUse: another process holds the state.
var ErrInUse = errors.New("in use by another witness")

// OpenStore opens (or creates) the store in dir, taking its lock: a second store on the same
// directory, in this process or another, fails with ErrInUse naming the holder.
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("witness state directory %s: %w", dir, err)
	}
	if fs, err := sharedFS(dir); err != nil {
		return nil, fmt.Errorf("witness state directory %s: %w", dir, err)
	} else if fs != "" {
		return nil, fmt.Errorf("witness state directory %s is on %s, a file system other machines can mount too: a witness's one-process lock and its fsync before each answer hold only on a local disk, so two witnesses could share the state and cosign two trees of one log; give a directory on a local file system (ext4, xfs, btrfs)", dir, fs)
	}
	s := &Store{path: filepath.Join(dir, StateFile), heads: map[string]Head{}}
	var err error
	if s.lock, err = takeLock(filepath.Join(dir, LockFile)); err != nil {
		return nil, fmt.Errorf("witness state directory %s: %w", dir, err)
	}
	if err := s.load(); err != nil {
		s.lock.Close()
		return nil, err
	}
	if s.f, err = os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
		s.end, err = s.f.Seek(0, io.SeekEnd)
		if err != nil {
			s.f.Close()
		}
	}
	if err == nil {
		err = fileio.SyncDir(dir)
	}
	if err != nil {
		s.lock.Close()
		return nil, fmt.Errorf("witness state %s: %w", s.path, err)
	}
	return s, nil
}

// takeLock takes the state's lock and writes who holds it into the lock file, or fails naming
// who does.
func takeLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	held, err := tryLock(f)
	if err != nil || held {
		defer f.Close()
		if err != nil {
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		// The holder writes who it is just after it takes the lock: give it a moment.
		b := make([]byte, 512)
		n := 0
		for range 100 {
			if n, _ = f.ReadAt(b, 0); n > 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		who := strings.TrimSpace(string(b[:n]))
		if who == "" || !utf8.ValidString(who) || strings.ContainsFunc(who, unicode.IsControl) {
			who = "a process that has not said which"
		}
		return nil, fmt.Errorf("%w: %s (%s). One witness process per state: two would each keep their own heads and could cosign two trees of one log at one size. Stop that one, or give this one its own key and state", ErrInUse, who, path)
	}
	host, _ := os.Hostname()
	who := fmt.Sprintf("pid %d (%s) on %s since %s", os.Getpid(), filepath.Base(os.Args[0]), host, time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(who+"\n"), 0)
	}
	return f, nil
}

// damaged is the advice for a file whose damage is not a cut tail: what the witness answered for
// may be gone, and an older copy is the rollback the file exists to prevent.
const damaged = "the file was changed after it was written (a witness writes nothing after a record it did not finish, and never lowers a size): an edit, or a failing disk. The sizes it answered for cannot be known, and an older copy would be a rollback too: do not restore one, and do not delete this file. Retire this witness's key: make a new one (sealrun witness keygen) with a new state directory, and give the logs' operators its public key"

// load reads the file: each origin's last record is its head. A damaged tail (a record a crash
// or a full disk cut, never answered) is cut off; damage anywhere else is refused.
func (s *Store) load() error {
	data, err := os.ReadFile(s.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("witness state %s: %w", s.path, err)
	}
	good, firstBad := 0, 0 // bytes of whole records; the line of the first damaged one
	var badWhy error
	pos := 0
	for n := 1; pos < len(data); n++ {
		end := bytes.IndexByte(data[pos:], '\n')
		if end < 0 { // no newline: a write cut short
			if firstBad == 0 {
				firstBad, badWhy = n, errors.New("a record without its end")
			}
			break
		}
		line := data[pos : pos+end]
		pos += end + 1
		r, err := parseRecord(line)
		if err == nil {
			if old, ok := s.heads[r.Origin]; ok && r.Size < old.Size {
				return fmt.Errorf("witness state %s, line %d: %s goes back from size %d to %d; %s", s.path, n, r.Origin, old.Size, r.Size, damaged)
			}
		}
		switch {
		case err != nil && firstBad == 0:
			firstBad, badWhy = n, err
		case err != nil:
		case firstBad != 0:
			return fmt.Errorf("witness state %s, line %d: not a head record (%v), and whole records follow it; %s", s.path, firstBad, badWhy, damaged)
		default:
			s.heads[r.Origin] = Head{Size: r.Size, Root: r.root}
			good = pos
			s.lines++
		}
	}
	if good != len(data) {
		// The tail a crash or a full disk cut: never answered. Cutting it takes no room.
		if err := os.Truncate(s.path, int64(good)); err != nil {
			return fmt.Errorf("witness state %s: dropping the record cut at line %d (%v): %w", s.path, firstBad, badWhy, err)
		}
	}
	if s.lines > 2*len(s.heads)+1024 {
		// Most lines superseded: one line per log, written atomically. On a full disk it waits
		// for the next start.
		s.rewrite()
	}
	return nil
}

type parsedRecord struct {
	record
	root ledger.Hash
}

func parseRecord(line []byte) (parsedRecord, error) {
	if len(line) > maxRecordBytes {
		return parsedRecord{}, fmt.Errorf("a line of over %d bytes", maxRecordBytes)
	}
	var r parsedRecord
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r.record); err != nil {
		return r, err
	}
	if dec.More() {
		return r, errors.New("more after the record")
	}
	root, err := base64.StdEncoding.DecodeString(r.Root)
	if err != nil || len(root) != sha256.Size {
		return r, fmt.Errorf("root %q is not a base64 SHA-256 hash", trim(r.Root))
	}
	r.root = ledger.Hash(root)
	return r, checkName("origin", r.Origin)
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
			s.torn = fmt.Errorf("%w: the witness cosigns nothing more; restart it once the disk has room (the cut record, never answered, is dropped at start)", err)
		}
		return err
	}
	s.end = end
	s.heads[origin] = next
	s.lines++
	return nil
}

// Close closes the file and lets the state go.
func (s *Store) Close() error {
	err := s.f.Close()
	s.lock.Close()
	return err
}
