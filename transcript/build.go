package transcript

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/policy"
)

// Options change what a build reads.
type Options struct {
	// Withheld are the bodies (paths relative to the run directory, as Body.Path) the operator
	// does not publish: they are not read, and their state is withheld.
	Withheld map[string]bool
	// FS, when set, is where the run directory's files are read from (the directory then only
	// names the run in messages): a reader holding a publication's files in memory (verify reads
	// each once) builds from exactly the bytes it hashed.
	FS fs.FS
}

// Builder reassembles a run from its audit log, one entry at a time (Add), reading the bodies
// each entry hashes from the run directory. A daemon keeps one per running run and feeds it the
// entries as they are written; Build does the whole log at once.
type Builder struct {
	dir  string
	opts Options
	t    Transcript
	head string
	// prefixes maps a conversation prefix (the chained keys of its messages) to the newest
	// exchange whose request, or request then output, began with it, and its length.
	prefixes map[[32]byte]prefixRef
	tools    map[int][]string   // each exchange's tools, for saying when they change
	contexts map[int][][32]byte // the latest exchanges' message keys (request, then output)
	lastN    int                // the last exchange read
	// lastKeys and lastChain: the last exchange's message keys and their prefix chain (each
	// prefix's hash), read-only; the next request, mostly the same messages, reuses the chain.
	lastKeys, lastChain [][32]byte
	reqBuf              []byte // the request bodies' buffer (readBodyInto)
	// zr is reset onto each compressed body: a new reader for each would allocate its 32 KiB
	// window and tables again (about 130 MB over the 4,000 bodies of a 2,000-turn hour).
	zr *gzip.Reader
	rd *reader
	// stash: gateway entries wait for flush (Build), to be read in their requests' order.
	stash   bool
	stashed []stashed
	best    *float64 // the best validation score so far
	cast    int64    // the recording's bytes inlined so far (MaxInlineCast)
}

type prefixRef struct{ n, k int }

// NewBuilder starts a transcript of the run in dir, with what is known of the run.
func NewBuilder(dir string, run Run, opts Options) *Builder {
	return &Builder{dir: dir, opts: opts, head: audit.ZeroHead, prefixes: map[[32]byte]prefixRef{}, tools: map[int][]string{}, contexts: map[int][][32]byte{}, rd: newReader(),
		t: Transcript{Format: Format, Run: run, Events: []Event{}}}
}

// open opens a file of the run directory by its slash-separated path: from Options.FS where it
// is given, else from dir on disk.
func (b *Builder) open(name string) (fs.File, error) {
	if b.opts.FS != nil {
		return b.opts.FS.Open(name)
	}
	return os.Open(filepath.Join(b.dir, filepath.FromSlash(name)))
}

// Build reads the run directory dir whole: its audit log (audit.jsonl) and every body it
// hashes. The audit log must chain from its first entry to its last; a log cut mid-line (a
// crash) is read to its last whole entry.
func Build(dir string, run Run, opts Options) (*Transcript, error) {
	b := NewBuilder(dir, run, opts)
	f, err := b.open("audit.jsonl")
	if err != nil {
		return nil, fmt.Errorf("transcript of %s: %w", dir, err)
	}
	defer f.Close()
	b.stash = true
	if _, err := b.ReadFrom(f); err != nil {
		return nil, err
	}
	if err := b.flush(); err != nil {
		return nil, err
	}
	t := b.Transcript()
	t.Amendments = b.amendments()
	return t, nil
}

// AmendmentsDir holds a run's signed amendments, <sha256 of its statement>.att.json each.
const AmendmentsDir = "amendments"

// amendments reads the run's amendments (unverified: what they say, to show; their signatures
// and ledger entries are a reader's checks), oldest first. One that does not read as an
// amendment, or is not named by its statement's SHA-256, is left out.
func (b *Builder) amendments() []Amendment {
	fsys := b.opts.FS
	if fsys == nil {
		fsys = os.DirFS(b.dir)
	}
	entries, err := fs.ReadDir(fsys, AmendmentsDir)
	if err != nil {
		return nil
	}
	var out []Amendment
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".att.json") {
			continue
		}
		data, err := fs.ReadFile(fsys, AmendmentsDir+"/"+e.Name())
		if err != nil {
			continue
		}
		st, sum, err := attest.ReadAmendmentUnverified(data)
		if err != nil || e.Name() != string(sum)+".att.json" {
			continue
		}
		p := st.Predicate
		out = append(out, Amendment{Time: p.Time.UTC(), Action: p.Action, Reason: p.Reason, Link: p.Link, Amendment: string(sum)})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Time.Equal(out[j].Time) {
			return out[i].Time.Before(out[j].Time)
		}
		return out[i].Amendment < out[j].Amendment
	})
	return out
}

// stashed is a gateway entry Build reads once the whole log has been read.
type stashed struct {
	seq  int
	line []byte
	// gw is the entry read once, when stashed (err: why it could not be).
	gw  audit.Gateway
	err error
}

// flush reads the stashed gateway entries in the order of their request numbers: the order a
// scaffold sent them, which is what a conversation's prefixes follow. The audit log's order is
// the order they ended in, and a request's entry is written after its answer is out: a scaffold
// that asks again at once can be logged before it.
func (b *Builder) flush() error {
	sort.SliceStable(b.stashed, func(i, j int) bool { return b.stashed[i].gw.Request < b.stashed[j].gw.Request })
	for i := range b.stashed {
		st := &b.stashed[i]
		if err := b.processRead(st.seq, audit.KindGateway, time.Time{}, st.line, &st.gw, st.err); err != nil {
			return err
		}
	}
	b.stashed = nil
	return nil
}

// ReadFrom adds every whole line r holds (each ended by "\n"), and returns the bytes of those
// lines: a reader that follows a growing log reads again from there.
func (b *Builder) ReadFrom(r io.Reader) (int64, error) {
	br := bufio.NewReaderSize(r, readSize(r))
	var n int64
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: gather it whole (an entry is at most audit.MaxLineBytes).
			buf := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) && len(buf) <= audit.MaxLineBytes {
				line, err = br.ReadSlice('\n')
				buf = append(buf, line...)
			}
			if len(buf) > audit.MaxLineBytes+1 {
				return n, fmt.Errorf("audit log line %d is longer than %d bytes", b.t.Through+1, audit.MaxLineBytes)
			}
			line = buf
		}
		if err == io.EOF {
			return n, nil // nothing, or a line still being written
		}
		if err != nil {
			return n, fmt.Errorf("read audit log: %w", err)
		}
		if err := b.Add(line[:len(line)-1]); err != nil {
			return n, err
		}
		n += int64(len(line))
	}
}

// Add reads one audit entry (its line without the newline).
func (b *Builder) Add(line []byte) error {
	var env struct {
		Seq  int       `json:"seq"`
		Prev string    `json:"prev"`
		Kind string    `json:"kind"`
		Time time.Time `json:"time"`
	}
	if err := json.Unmarshal(line, &env); err != nil {
		return fmt.Errorf("audit log line %d is not a JSON entry: %v", b.t.Through+1, err)
	}
	if env.Seq != b.t.Through+1 || env.Prev != b.head {
		return fmt.Errorf("audit log line %d (seq %d) does not chain to the line before it: the log was edited or reordered", b.t.Through+1, env.Seq)
	}
	b.head = audit.ChainNext(b.head, line)
	b.t.Through = env.Seq
	b.t.Run.AuditHead = b.head
	if b.stash && env.Kind == audit.KindGateway {
		st := stashed{seq: env.Seq, line: append([]byte(nil), line...)}
		st.err = json.Unmarshal(line, &st.gw) // read once: flush orders by it and reads it
		b.stashed = append(b.stashed, st)
		return nil
	}
	return b.process(env.Seq, env.Kind, env.Time, line)
}

// process reads one audit entry of the chain into its event.
func (b *Builder) process(seq int, kind string, t time.Time, line []byte) error {
	return b.processRead(seq, kind, t, line, nil, nil)
}

// processRead is process with a gateway entry already read (gw, or why it could not be: gwErr).
func (b *Builder) processRead(seq int, kind string, t time.Time, line []byte, gw *audit.Gateway, gwErr error) error {
	env := struct {
		Seq  int
		Kind string
		Time time.Time
	}{seq, kind, t}
	var ev Event
	var err error
	switch env.Kind {
	case audit.KindGateway:
		if gw == nil {
			gw = new(audit.Gateway)
			gwErr = json.Unmarshal(line, gw)
		}
		if err = gwErr; err == nil {
			ev, err = b.exchange(gw)
		}
	case audit.KindCall:
		ev, err = b.call(line)
	default:
		ev, err = b.other(env.Kind, line)
	}
	if err != nil {
		return fmt.Errorf("audit log line %d (%s): %w", env.Seq, env.Kind, err)
	}
	ev.Seq, ev.Kind = env.Seq, env.Kind
	if env.Kind == audit.KindGateway {
		ev.Kind = KindModel
	}
	if ev.Time.IsZero() {
		ev.Time = env.Time
	}
	ev.At = b.at(ev.Time)
	b.t.Events = append(b.t.Events, ev)
	return nil
}

// Transcript is the transcript so far, its events in time order (ties in audit order).
func (b *Builder) Transcript() *Transcript {
	t := b.t
	t.Events = slices.Clone(b.t.Events)
	sortEvents(t.Events)
	b.price(&t)
	return &t
}

// price sets the cost of t's exchanges and of the run from the run's price (and clears them
// without one).
func (b *Builder) price(t *Transcript) {
	p := t.Run.Price
	t.Totals.Cost = 0
	if p != nil {
		t.Totals.Cost = p.Cost(policy.Tokens{Input: t.Totals.PromptTokens, CachedInput: t.Totals.CachedTokens, CacheWrite: t.Totals.CacheWriteTokens,
			Output: t.Totals.CompletionTokens, Reasoning: t.Totals.ReasoningTokens})
	}
	for _, e := range t.Events {
		if x := e.Model; x != nil {
			x.Cost = 0
			if p != nil {
				x.Cost = p.Cost(x.Usage.Tokens())
			}
		}
	}
}

// After is the transcript so far with only the events of audit entries after seq, in time
// order: what a live reader that has read through seq lacks.
func (b *Builder) After(seq int) *Transcript {
	t := b.t
	t.Events = []Event{}
	for i := len(b.t.Events) - 1; i >= 0 && b.t.Events[i].Seq > seq; i-- {
		t.Events = append(t.Events, b.t.Events[i])
	}
	slices.Reverse(t.Events)
	sortEvents(t.Events)
	b.price(&t)
	return &t
}

func sortEvents(es []Event) {
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].At != es[j].At {
			return es[i].At < es[j].At
		}
		return es[i].Seq < es[j].Seq
	})
}

// SetRun replaces what is known of the run (a live run's state), keeping the audit head read.
func (b *Builder) SetRun(r Run) {
	r.AuditHead = b.head
	b.t.Run = r
}

func (b *Builder) at(t time.Time) int64 {
	if b.t.Run.Started.IsZero() || t.IsZero() {
		return 0
	}
	return t.Sub(b.t.Run.Started).Milliseconds()
}

// readBody reads a kept body and checks it against what its audit entry says: the body's
// state, and its bytes when intact. A body kept gzip-compressed (gateway bodies) is
// uncompressed first.
func (b *Builder) readBody(body *Body, gz bool) []byte { return b.readBodyInto(body, gz, nil) }

// readBodyInto is readBody into *buf where buf is given (grown there as needed): the bytes are
// the caller's until its next read into buf. A request is read only into the messages it holds
// (strings of their own), so its bytes need not outlive its exchange: one buffer serves them all.
func (b *Builder) readBodyInto(body *Body, gz bool, buf *[]byte) []byte {
	wantBytes, wantSum := body.Bytes, body.SHA256
	if body.KeptSHA256 != "" {
		wantBytes, wantSum = body.Kept, body.KeptSHA256
	}
	if b.opts.Withheld[body.Path] {
		body.State = BodyWithheld
		return nil
	}
	f, err := b.open(body.Path)
	if err != nil {
		body.State = BodyMissing
		return nil
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		body.State = BodyAltered
		return nil
	}
	var r io.Reader = f
	if gz {
		var err error
		if b.zr == nil {
			b.zr, err = gzip.NewReader(f)
		} else {
			err = b.zr.Reset(f)
		}
		if err != nil {
			body.State = BodyAltered
			return nil
		}
		r = b.zr
	}
	var into []byte
	if buf != nil {
		into = *buf
	}
	data, err := readSized(r, wantBytes, into)
	if buf != nil {
		*buf = data[:0]
	}
	sum := sha256.Sum256(data)
	if err != nil || int64(len(data)) != wantBytes || hex.EncodeToString(sum[:]) != wantSum {
		body.State = BodyAltered
		return nil
	}
	body.State = BodyIntact
	return data
}

// readSized reads r whole up to want+1 bytes (one more tells a longer body) into buf, or a new
// buffer of that size as the record gives it (up to 64 MiB at first: a record's size is not
// trusted) where buf is smaller.
func readSized(r io.Reader, want int64, buf []byte) ([]byte, error) {
	if size := min(max(want, 0), 64<<20) + 1; int64(cap(buf)) < size {
		buf = make([]byte, 0, size)
	}
	buf = buf[:0]
	lr := io.LimitReader(r, want+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

func (b *Builder) count(body *Body) {
	switch body.State {
	case BodyIntact:
		b.t.Bodies.Intact++
	case BodyWithheld:
		b.t.Bodies.Withheld++
	case BodyMissing:
		b.t.Bodies.Missing++
	case BodyAltered:
		b.t.Bodies.Altered++
	}
}

// exchange reads one gateway entry, its bodies and what they say, into its event.
func (b *Builder) exchange(e *audit.Gateway) (Event, error) {
	x := &Exchange{N: e.Request, Method: e.Method, Path: e.Path, API: apiOf(e.Path), Model: e.Model, Status: e.Status, Refused: e.Refused,
		Error: e.Error, Streamed: e.Streamed, LatencyMS: e.LatencyMS, ProviderLostMS: e.ProviderLostMS, Tries: e.Tries, Usage: e.Usage,
		Added: []Message{}, Output: []Message{}}
	tt := &b.t.Totals
	tt.Exchanges++
	if e.Refused != "" {
		tt.Refused++
	}
	tt.Retries += max(0, len(e.Tries)-1)
	tt.ProviderLostMS += e.ProviderLostMS
	tt.PromptTokens += e.Usage.Prompt
	tt.CompletionTokens += e.Usage.Completion
	tt.ReasoningTokens += e.Usage.Reasoning
	tt.CachedTokens += e.Usage.CachedPrompt
	tt.CacheWriteTokens += e.Usage.CacheWrite
	tt.BodyBytes += e.RequestBytes + e.ResponseBytes
	var notes []string
	if e.BodyError != "" {
		notes = append(notes, "the gateway could not keep a body: "+e.BodyError)
	}
	var req, resp []byte
	if e.RequestSHA256 != "" {
		x.Request = Body{Path: audit.GatewayBodyPath(e.Request, audit.BodyRequest), Bytes: e.RequestBytes, SHA256: string(e.RequestSHA256)}
		req = b.readBodyInto(&x.Request, true, &b.reqBuf)
		b.count(&x.Request)
	}
	if e.ResponseSHA256 != "" {
		x.Response = Body{Path: audit.GatewayBodyPath(e.Request, audit.BodyResponse), Bytes: e.ResponseBytes, SHA256: string(e.ResponseSHA256)}
		resp = b.readBody(&x.Response, true)
		b.count(&x.Response)
	}
	for _, body := range []*Body{&x.Request, &x.Response} {
		if body.Path != "" && body.State != BodyIntact {
			notes = append(notes, fmt.Sprintf("%s is %s", path.Base(body.Path), body.State))
		}
	}
	var conv *conversation
	if req != nil && x.API != "" {
		var err error
		if conv, err = b.rd.readRequest(x.API, req); err != nil {
			notes = append(notes, "the request could not be read: "+err.Error())
		}
	} else if req != nil {
		notes = append(notes, "this version does not read "+e.Path)
	}
	var out []msg
	if resp != nil && x.API != "" {
		if e.Status >= 200 && e.Status < 300 {
			var err error
			if out, x.Stop, err = b.rd.readResponse(x.API, resp, e.Streamed); err != nil {
				notes = append(notes, "the response could not be read: "+err.Error())
			}
		} else {
			notes = append(notes, fmt.Sprintf("the provider answered %d: %s", e.Status, errorMessage(resp)))
		}
	}
	if conv != nil {
		b.conversation(x, conv, out)
	}
	for _, m := range out {
		x.Output = append(x.Output, m.show())
	}
	x.Note = strings.Join(notes, "; ")
	b.lastN = e.Request
	ev := Event{Time: e.Time, Model: x}
	ev.Failed = e.Status >= 400 || e.Refused != "" || e.Error != "" || len(e.Tries) > 1 || e.BodyError != ""
	ev.Text = exchangeText(x)
	return ev, nil
}

// conversation finds what the request repeats of an earlier exchange — the longest prefix of
// its messages that began an earlier request, or an earlier request followed by its output —
// then whether the messages after that prefix go on with the last ones of that exchange (a
// scaffold that drops the middle of its history: the first messages kept, a window of the
// latest), and keeps the rest as added; then records this exchange's prefixes and messages.
func (b *Builder) conversation(x *Exchange, c *conversation, out []msg) {
	all := append(slices.Clip(c.msgs), out...)
	keys := make([][32]byte, len(all))
	chain := make([][32]byte, len(all)+1)
	same := true // so far, the messages of the previous exchange: its chain holds
	for i := range all {
		keys[i] = all[i].key()
		if same = same && i < len(b.lastKeys) && keys[i] == b.lastKeys[i]; same {
			chain[i+1] = b.lastChain[i+1]
			continue
		}
		h := sha256.New()
		h.Write(chain[i][:])
		h.Write(keys[i][:])
		h.Sum(chain[i+1][:0])
	}
	b.lastKeys, b.lastChain = keys, chain
	x.Messages = len(c.msgs)
	// The longest prefix found, by bisection: an exchange records every prefix of its messages,
	// and chain[k] holds chain[k-1], so the prefixes of this request that an earlier one began
	// are exactly its first K for some K (a scaffold that keeps a window of its history shares
	// only a few; looking from the longest down cost one lookup a message).
	lo, hi := 0, len(c.msgs)+1 // chain[lo] found (its ref: at, or lo 0), chain[hi] not (or past the end)
	var at prefixRef
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if r, ok := b.prefixes[chain[mid]]; ok {
			lo, at = mid, r
		} else {
			hi = mid
		}
	}
	if lo > 0 {
		x.Extends, x.Shared = at.n, lo
	}
	from := x.Shared
	ext := x.Extends
	if ext == 0 {
		ext = b.lastN
	}
	if prev, ok := b.contexts[ext]; ok && from < len(c.msgs) {
		if j, n := windowOf(prev, keys[:len(c.msgs)], from); n > 0 {
			x.Extends, x.Dropped, x.Kept = ext, j-from, n
			from += n
		}
	}
	for _, m := range c.msgs[from:] {
		x.Added = append(x.Added, m.show())
	}
	prev, ok := b.tools[x.Extends]
	if x.Extends == 0 {
		prev, ok = b.tools[b.lastN]
	}
	if !ok || !slices.Equal(prev, c.tools) {
		x.Tools = c.tools
	}
	b.tools[x.N] = c.tools
	for k := 1; k <= len(all); k++ {
		b.prefixes[chain[k]] = prefixRef{n: x.N, k: k}
	}
	b.contexts[x.N] = keys
	delete(b.contexts, x.N-keepContexts)
}

// keepContexts is how many of the latest exchanges' messages are kept for windowOf.
const keepContexts = 8

// windowOf finds whether req, after its first k messages, goes on with the last messages of
// prev (from prev's index j to its end, j > k): the messages between k and j dropped. It returns
// j and how many go on (0: none).
func windowOf(prev, req [][32]byte, k int) (j, n int) {
	tried := 0
	for j = k + 1; j < len(prev) && tried < 64; j++ {
		if prev[j] != req[k] {
			continue
		}
		tried++
		n = len(prev) - j
		if k+n <= len(req) && slices.Equal(prev[j:], req[k:k+n]) {
			return j, n
		}
	}
	return 0, 0
}

func exchangeText(x *Exchange) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s → %d", x.Method, x.Path, x.Status)
	if x.Refused != "" {
		fmt.Fprintf(&b, " refused: %s", x.Refused)
	}
	fmt.Fprintf(&b, ", %s", (time.Duration(x.LatencyMS) * time.Millisecond).String())
	if x.Usage.Prompt+x.Usage.Completion > 0 {
		fmt.Fprintf(&b, ", %d→%d tokens", x.Usage.Prompt, x.Usage.Completion)
	}
	if len(x.Tries) > 1 {
		fmt.Fprintf(&b, ", %d tries (%s lost to the provider)", len(x.Tries), (time.Duration(x.ProviderLostMS) * time.Millisecond).String())
	}
	return b.String()
}

func (b *Builder) call(line []byte) (Event, error) {
	var e audit.Call
	if err := json.Unmarshal(line, &e); err != nil {
		return Event{}, err
	}
	c := &Call{N: e.Call, Argv: e.Argv, Cwd: e.Cwd, Status: e.Status, Exit: e.Exit, Limit: e.Limit, LimitHit: e.LimitHit, OOMKilled: e.OOMKilled,
		PidsLimitEnded: e.PidsLimitEnded, Start: e.Start, End: e.End, DurationMS: e.End.Sub(e.Start).Milliseconds(), CPUSeconds: e.CPUSeconds,
		MemoryPeak: e.MemoryPeak, Error: e.Error}
	if c.Argv == nil {
		c.Argv = []string{}
	}
	if e.OutputSHA256 != "" && e.Status != "infra_error" {
		c.Output = Body{Path: audit.CallLogPath(e.Call), Bytes: e.OutputBytes, SHA256: string(e.OutputSHA256)}
		if e.LogTruncated {
			c.Output.Kept, c.Output.KeptSHA256 = e.LogBytes, string(e.LogSHA256)
			if e.LogSHA256 == "" {
				// A log cut before the audit entry said what it keeps (an older sealrun): it
				// cannot be checked.
				c.Output.State = BodyAltered
			}
		}
		var data []byte
		if c.Output.State == "" {
			data = b.readBody(&c.Output, false)
		}
		b.count(&c.Output)
		if data != nil {
			c.Text, c.Tail, c.Cut = cutText(string(data))
		}
	}
	tt := &b.t.Totals
	tt.Calls++
	failed := e.Exit != 0 || e.Status != "exited" || e.LimitHit || e.OOMKilled || e.PidsLimitEnded
	if failed {
		tt.FailedCalls++
	}
	t := callText(&e, strings.Join(e.Argv, " "), time.Duration(c.DurationMS)*time.Millisecond)
	return Event{Time: e.Start, Call: c, Failed: failed, Text: strings.ToValidUTF8(t, "\uFFFD")}, nil
}

// other reads the grader's entries (submissions, validation, promotion, the end of grading) and
// the task's preparation; any other kind is shown by name.
func (b *Builder) other(kind string, line []byte) (Event, error) {
	s := &Submission{}
	ev := Event{Submission: s}
	rec, err := audit.Decode(kind, line)
	if err != nil {
		return Event{}, err
	}
	switch e := rec.(type) {
	case *audit.Submit:
		ev.Time, s.Candidate, s.Dir, s.Size, s.Files = e.Time, e.Candidate, e.Dir, e.Size, e.Files
		b.t.Totals.Submissions++
		ev.Text = submitText(e) + fmt.Sprintf(" (%d bytes gz, %d files)", e.Size, e.Files)
	case *audit.SubmitRefused:
		ev.Time, s.Dir, s.Reason = e.Time, e.Dir, e.Reason
		ev.Failed = true
		ev.Text = refusedText(e)
	case *audit.Validation:
		ev.Time, s.Candidate, s.Passed, s.Questions = e.Time, e.Candidate, e.Passed, e.Questions
		score := 0.0
		if e.Questions > 0 && e.Passed != nil {
			score = 100 * float64(*e.Passed) / float64(e.Questions)
		}
		s.Score = &score
		if b.best != nil {
			best := *b.best
			s.Best = &best
			ev.Failed = score < best
		}
		if b.best == nil || score > *b.best {
			b.best = &score
		}
		ev.Text = validationText(e) + fmt.Sprintf(" (%.1f%%)", score)
	case *audit.Evaluated:
		ev.Time, s.Candidate, s.Score, s.Reason = e.Time, e.Candidate, e.Value, e.Invalid
		if e.Value != nil {
			ev.Text = fmt.Sprintf("evaluated %s: %s %.6g", e.Candidate.Short(), e.Metric, *e.Value)
		} else {
			ev.Failed = true
			ev.Text = fmt.Sprintf("evaluated %s: %s: invalid submission %s", e.Candidate.Short(), e.Metric, e.Invalid)
		}
	case *audit.Promote:
		ev.Time, s.Candidate = e.Time, e.Candidate
		ev.Text = promoteText(e.Candidate)
	case *audit.Finalize:
		ev.Time, s.Candidate = e.Time, e.Candidate
		ev.Text = finalizeText(e)
	case *audit.Sealed:
		ev.Time, s.Candidate, s.Passed, s.Questions = e.Time, e.Candidate, &e.Passed, e.Questions
		ev.Text = fmt.Sprintf("the hidden exam's pass vector sealed: %d/%d", e.Passed, e.Questions)
	case *audit.Terminal:
		tm := &Terminal{Segment: e.Segment, From: e.From, To: e.To, Events: e.Events, InputBytes: e.InputBytes, OutputBytes: e.OutputBytes, NotRecorded: e.NotRecorded, NotRecordedInput: e.NotRecordedInput}
		ev.Submission, ev.Terminal = nil, tm
		if !b.t.Run.Started.IsZero() {
			ev.Time = b.t.Run.Started.Add(time.Duration(e.To * float64(time.Second)))
		}
		switch {
		case e.BodyError != "":
			ev.Failed = true
			ev.Text = fmt.Sprintf("terminal segment %d could not be kept: %s", e.Segment, e.BodyError)
		case e.Segment < 1:
			return Event{}, fmt.Errorf("terminal segment %d: segments count from 1", e.Segment)
		default:
			tm.Body = Body{Path: audit.TerminalSegmentPath(e.Segment), Bytes: e.Bytes, SHA256: string(e.SHA256)}
			data := b.readBody(&tm.Body, true)
			switch {
			case data == nil:
			case b.cast+int64(len(data)) > MaxInlineCast:
				tm.CastCut = true
			default:
				b.cast += int64(len(data))
				tm.Cast = strings.ToValidUTF8(string(data), "\uFFFD")
			}
			b.count(&tm.Body)
			ev.Text = fmt.Sprintf("terminal %.0f–%.0f s: %d bytes typed, %d shown", e.From, e.To, e.InputBytes, e.OutputBytes)
		}
	case *audit.Attach:
		ev.Time, ev.Submission = e.Time, nil
		ev.Text = e.Event + " " + e.User
		if e.Reason != "" {
			ev.Text += ": " + e.Reason
		}
	case *audit.Pause:
		ev.Time, ev.Submission = e.Time, nil
		switch e.Event {
		case audit.PauseStart:
			ev.Text = fmt.Sprintf("paused by %s for at most %s: %s", e.By, e.For, e.Reason)
		default:
			ev.Text = fmt.Sprintf("resumed after %s (%s: %s); the deadline is now %s", e.Length, e.By, e.Reason, e.Deadline.UTC().Format(time.TimeOnly))
		}
	case *audit.TaskPrepare:
		ev.Submission = nil
		ev.Failed = e.Exit != 0 || e.TimedOut || e.OOM
		ev.Text = fmt.Sprintf("the task's %s: exit %d, %.1f s", e.Script, e.Exit, e.Seconds)
	default:
		var other struct {
			Time time.Time `json:"time"`
		}
		if err := json.Unmarshal(line, &other); err != nil {
			return Event{}, err
		}
		ev.Time, ev.Submission = other.Time, nil
		ev.Text = kind
	}
	ev.Text = strings.ToValidUTF8(ev.Text, "\uFFFD")
	return ev, nil
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// Write writes t as transcript.json (compact, one line and a newline) and transcript.html
// into dir, each atomically.
func Write(dir string, t *Transcript) error {
	j, err := Marshal(t)
	if err != nil {
		return err
	}
	if err := fileio.WriteFile(filepath.Join(dir, "transcript.json"), j, 0o644); err != nil {
		return err
	}
	var page bytes.Buffer
	if err := Render(&page, t, PageOptions{}); err != nil {
		return err
	}
	return fileio.WriteFile(filepath.Join(dir, "transcript.html"), page.Bytes(), 0o644)
}

// Marshal is transcript.json's bytes: the same transcript always gives the same bytes. They are
// HTML escaped (the encoder's default), as the page embeds them (renderMarshaled).
func Marshal(t *Transcript) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	if err := enc.Encode(t); err != nil {
		return nil, fmt.Errorf("encode transcript: %w", err)
	}
	return b.Bytes(), nil
}

// Read reads a transcript.json.
func Read(path string) (*Transcript, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var t Transcript
	if err := json.NewDecoder(io.LimitReader(f, 1<<30)).Decode(&t); err != nil {
		return nil, fmt.Errorf("%s: not a transcript: %v", path, err)
	}
	if t.Format != Format {
		return nil, fmt.Errorf("%s: format %q; this sealrun reads %s", path, t.Format, Format)
	}
	return &t, nil
}

// readSize is the read buffer for r: 64 KiB, or a file's length when it is less (a thousand
// runs' logs of a few KiB each need not take 64 MiB of fresh memory between them).
func readSize(r io.Reader) int {
	if f, ok := r.(interface{ Stat() (fs.FileInfo, error) }); ok {
		if fi, err := f.Stat(); err == nil && fi.Size() < 64<<10 {
			return max(int(fi.Size())+1, 512)
		}
	}
	return 64 << 10
}
