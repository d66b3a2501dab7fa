package witness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/ledger"
)

// Target is a witness a log shows its heads to.
type Target struct {
	Name     string // how the operator calls it (sealrun.toml's [[witnesses]] name)
	URL      string // its submission prefix
	Verifier *Verifier
}

// Source is the log whose heads a Follower sends: ledger.Log meets it.
type Source interface {
	Head() (string, ledger.Checkpoint)
	ConsistencyProof(size1, size2 uint64) ([][]byte, error)
	Changed() <-chan struct{}
}

// CosignaturesFile is where a host keeps the cosignatures its heads received, in its state
// directory.
const CosignaturesFile = "ledger-cosignatures.jsonl"

// cosigRecord is one line of the cosignatures file: a witness's cosignature line over a signed
// head of the log.
type cosigRecord struct {
	Witness     string `json:"witness"`     // the witness's key name
	Checkpoint  string `json:"checkpoint"`  // the host's signed head
	Cosignature string `json:"cosignature"` // the witness's signature line
}

// Cosignatures keeps every cosignature a log's heads received: appended and fsynced as they
// come, read back whole at start. A line cut by a crash is dropped.
type Cosignatures struct {
	mu     sync.Mutex
	path   string
	f      *os.File
	bySize map[uint64][]*cosignedHead // more than one head of a size: two trees were shown (kept, as evidence)
	latest map[string]uint64          // witness key name -> largest size it cosigned
}

type cosignedHead struct {
	signed string
	lines  map[string]string // witness key name -> its line
}

// OpenCosignatures opens (creating) the cosignatures file at path, for sealrund.
func OpenCosignatures(path string) (*Cosignatures, error) { return loadCosignatures(path, true) }

// ReadCosignatures reads the cosignatures file at path as it is (for an export while sealrund
// writes it): a cut last line is skipped, not removed, and Add fails. A missing file is empty.
func ReadCosignatures(path string) (*Cosignatures, error) { return loadCosignatures(path, false) }

func loadCosignatures(path string, write bool) (*Cosignatures, error) {
	c := &Cosignatures{path: path, bySize: map[uint64][]*cosignedHead{}, latest: map[string]uint64{}}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cosignatures %s: %w", path, err)
	}
	good := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if good+len(line) == len(data) {
			break // cut by a crash
		}
		var r cosigRecord
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("cosignatures %s, line %d: %v; the file was edited (restore it, or move it aside: the witnesses still hold their sizes, and the next heads are cosigned again)", path, n, err)
		}
		if err := c.add(r); err != nil {
			return nil, fmt.Errorf("cosignatures %s, line %d: %v", path, n, err)
		}
		good += len(line) + 1
	}
	if !write {
		return c, nil
	}
	if good != len(data) {
		if err := os.Truncate(path, int64(good)); err != nil {
			return nil, fmt.Errorf("cosignatures %s: drop the cut last line: %w", path, err)
		}
	}
	if c.f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err != nil {
		return nil, fmt.Errorf("cosignatures %s: %w", path, err)
	}
	return c, nil
}

func (c *Cosignatures) add(r cosigRecord) error {
	body, _, ok := strings.Cut(r.Checkpoint, "\n\n")
	if !ok {
		return errors.New("not a signed checkpoint")
	}
	cp, err := ledger.ParseCheckpoint(body + "\n")
	if err != nil {
		return err
	}
	if !strings.HasPrefix(r.Cosignature, "— "+r.Witness+" ") || !strings.HasSuffix(r.Cosignature, "\n") || strings.Count(r.Cosignature, "\n") != 1 {
		return fmt.Errorf("cosignature %q is not one signature line of %s", trim(r.Cosignature), r.Witness)
	}
	var h *cosignedHead
	for _, o := range c.bySize[cp.Size] {
		if ob, _, _ := strings.Cut(o.signed, "\n\n"); ob == body {
			h = o
		}
	}
	if h == nil {
		h = &cosignedHead{signed: r.Checkpoint, lines: map[string]string{}}
		c.bySize[cp.Size] = append(c.bySize[cp.Size], h)
	}
	h.lines[r.Witness] = r.Cosignature
	c.latest[r.Witness] = max(c.latest[r.Witness], cp.Size)
	return nil
}

// Add records witness's cosignature line over the signed head, on disk before it returns.
func (c *Cosignatures) Add(witness, signed, line string) error {
	r := cosigRecord{Witness: witness, Checkpoint: signed, Cosignature: line}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return fmt.Errorf("cosignatures %s: read only", c.path)
	}
	if err := c.add(r); err != nil {
		return err
	}
	if _, err := c.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("cosignatures %s: %w", c.path, err)
	}
	return fileio.Cause(c.f.Sync())
}

// Latest is the largest size witness (its key name) cosigned.
func (c *Cosignatures) Latest(witness string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.latest[witness]
}

// Best is the largest head cosigned by at least quorum of the witnesses (their key names) that
// accept takes (nil: any; an export takes only heads of the ledger it writes, so that a file
// kept from another ledger of the same origin counts for nothing): the host's signed head with
// those witnesses' signature lines after its own, and who signed it. ok is false when no head
// qualifies.
func (c *Cosignatures) Best(witnesses []string, quorum int, accept func(signed string) bool) (signed string, size uint64, by []string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sizes := make([]uint64, 0, len(c.bySize))
	for s := range c.bySize {
		sizes = append(sizes, s)
	}
	slices.Sort(sizes)
	for i := len(sizes) - 1; i >= 0; i-- {
		for _, h := range c.bySize[sizes[i]] {
			if accept != nil && !accept(h.signed) {
				continue
			}
			var names []string
			out := h.signed
			for _, w := range witnesses {
				if l, ok := h.lines[w]; ok {
					names = append(names, w)
					out += l
				}
			}
			if len(names) >= max(quorum, 1) {
				return out, sizes[i], names, true
			}
		}
	}
	return "", 0, nil, false
}

// Witnesses lists the witnesses (key names) that cosigned anything, with the largest size each
// cosigned.
func (c *Cosignatures) Witnesses() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.latest)
}

// Close closes the file.
func (c *Cosignatures) Close() error {
	if c.f == nil {
		return nil
	}
	return c.f.Close()
}

// TargetStatus is where a Follower stands with one witness.
type TargetStatus struct {
	Name      string    `json:"name"`
	Held      uint64    `json:"held"` // the size it is known to hold
	LastOK    time.Time `json:"last_ok,omitzero"`
	LastError string    `json:"last_error,omitempty"`
}

// Follower shows each new head of a log to its witnesses, one goroutine per witness, and keeps
// their cosignatures. A witness that is down, slow or answers garbage delays only its own
// cosignatures: nothing waits for it, and it is sent the then latest head later, with a proof from
// the size it holds (a 409 tells it).
type Follower struct {
	src     Source
	targets []Target
	store   *Cosignatures
	// HTTP is the client heads are sent with: NewClient's unless set before Run (a test's, with
	// its own TLS roots).
	HTTP   *http.Client
	log    *slog.Logger
	mu     sync.Mutex
	status map[string]*TargetStatus
	// MaxBackoff bounds the wait before a failed witness is tried again.
	MaxBackoff time.Duration
}

// NewFollower returns a follower; Run starts it.
func NewFollower(src Source, targets []Target, store *Cosignatures, log *slog.Logger) *Follower {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Follower{src: src, targets: targets, store: store, log: log, status: map[string]*TargetStatus{}, MaxBackoff: time.Minute,
		HTTP: NewClient()}
	for _, t := range targets {
		f.status[t.Name] = &TargetStatus{Name: t.Name, Held: store.Latest(t.Verifier.Name())}
	}
	return f
}

// Status is where the follower stands with each witness.
func (f *Follower) Status() []TargetStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []TargetStatus
	for _, t := range f.targets {
		out = append(out, *f.status[t.Name])
	}
	return out
}

// Run sends heads until ctx ends.
func (f *Follower) Run(ctx context.Context) {
	wake := make([]chan struct{}, len(f.targets))
	var wg sync.WaitGroup
	for i, t := range f.targets {
		wake[i] = make(chan struct{}, 1)
		wake[i] <- struct{}{} // the head there is at start
		wg.Add(1)
		go func() { defer wg.Done(); f.follow(ctx, t, wake[i]) }()
	}
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-f.src.Changed():
			for _, w := range wake {
				select {
				case w <- struct{}{}:
				default:
				}
			}
		}
	}
}

func (f *Follower) follow(ctx context.Context, t Target, wake <-chan struct{}) {
	st := func(fn func(s *TargetStatus)) {
		f.mu.Lock()
		fn(f.status[t.Name])
		f.mu.Unlock()
	}
	var held uint64
	st(func(s *TargetStatus) { held = s.Held })
	backoff := time.Duration(0)
	conflicts := 0
	for {
		switch {
		case backoff > 0: // a failed witness is tried again after its backoff, not per head
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
		case conflicts == 0:
			select {
			case <-ctx.Done():
				return
			case <-wake:
			}
		}
		signed, cp := f.src.Head()
		if cp.Size <= held {
			backoff, conflicts = 0, 0
			continue
		}
		proof, err := f.src.ConsistencyProof(held, cp.Size)
		if err == nil {
			var line string
			line, err = Submit(ctx, f.HTTP, t.URL, t.Verifier, held, proof, signed)
			if err == nil {
				if aerr := f.store.Add(t.Verifier.Name(), signed, line); aerr != nil {
					f.log.Error("keeping a cosignature failed", "witness", t.Name, "err", aerr)
				}
				held, backoff, conflicts = cp.Size, 0, 0
				st(func(s *TargetStatus) { s.Held, s.LastOK, s.LastError = held, time.Now(), "" })
				f.log.Info("head cosigned", "witness", t.Name, "size", cp.Size)
				continue
			}
		}
		var ce *ConflictError
		if errors.As(err, &ce) && ce.Size <= cp.Size && conflicts < 2 {
			// It holds another size: resend at once with a proof from there.
			held = ce.Size
			conflicts++
			st(func(s *TargetStatus) { s.Held = held })
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if errors.As(err, &ce) && ce.Size > cp.Size {
			err = fmt.Errorf("the witness holds size %d of this log, which has %d entries: it was shown another ledger under this origin (a second machine with this key?) or this ledger was rolled back", ce.Size, cp.Size)
		}
		conflicts = 0
		var se *StatusError
		if errors.As(err, &se) && se.Status == http.StatusTooManyRequests {
			backoff = min(max(se.RetryAfter, time.Second), f.MaxBackoff) // its budget, not a failure
		} else {
			backoff = min(max(2*backoff, time.Second), f.MaxBackoff)
		}
		st(func(s *TargetStatus) { s.LastError = err.Error() })
		f.log.Warn("witness did not cosign", "witness", t.Name, "size", cp.Size, "retry_in", backoff, "err", err)
	}
}
