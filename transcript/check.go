package transcript

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/internal/fileio"
)

// BodyRef is one body an audit log hashes: its path in the run directory, and the name the
// admin API serves it by (daemon/API.md, files).
type BodyRef struct {
	Path, APIName string
}

// BodyRefs lists the bodies an audit log hashes, in its order: each gateway request's request
// and response, each compute call's log.
func BodyRefs(r io.Reader) ([]BodyRef, error) {
	var out []BodyRef
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(line) > audit.MaxLineBytes+1 {
			return nil, fmt.Errorf("audit log line %d is longer than %d bytes", n, audit.MaxLineBytes)
		}
		var env audit.Entry
		if err := json.Unmarshal(line, &env); err != nil {
			return nil, fmt.Errorf("audit log line %d is not a JSON entry", n)
		}
		switch env.Kind {
		case audit.KindGateway:
			var e audit.Gateway
			if err := json.Unmarshal(line, &e); err != nil {
				return nil, fmt.Errorf("audit log line %d is not a gateway entry: %v", n, err)
			}
			if e.Request > 0 && e.RequestSHA256 != "" {
				out = append(out, BodyRef{audit.GatewayBodyPath(e.Request, audit.BodyRequest), fmt.Sprintf("gateway-%d-%s", e.Request, audit.BodyRequest)})
			}
			if e.Request > 0 && e.ResponseSHA256 != "" {
				out = append(out, BodyRef{audit.GatewayBodyPath(e.Request, audit.BodyResponse), fmt.Sprintf("gateway-%d-%s", e.Request, audit.BodyResponse)})
			}
		case audit.KindTerminal:
			var e audit.Terminal
			if err := json.Unmarshal(line, &e); err != nil {
				return nil, fmt.Errorf("audit log line %d is not a terminal entry: %v", n, err)
			}
			if e.Segment > 0 && e.SHA256 != "" && e.BodyError == "" {
				out = append(out, BodyRef{audit.TerminalSegmentPath(e.Segment), fmt.Sprintf("terminal-%d", e.Segment)})
			}
		case audit.KindCall:
			var e audit.Call
			if err := json.Unmarshal(line, &e); err != nil {
				return nil, fmt.Errorf("audit log line %d is not a call entry: %v", n, err)
			}
			if e.Call > 0 && e.OutputSHA256 != "" && e.Status != audit.CallInfra {
				out = append(out, BodyRef{audit.CallLogPath(e.Call), fmt.Sprintf("call-%d", e.Call)})
			}
		}
	}
}

// Report is what Check found of one run's transcript.
type Report struct {
	Exchanges, Calls int
	Bodies           Counts
	// Transcript says whether the run has a transcript.json (and Page, a transcript.html) that is
	// exactly what its audit log and bodies give.
	Transcript, Page bool
	// Notes are what a reader should know that is no fault (a page made by another version).
	Notes []string
	// Problems each name a file and what is wrong with it.
	Problems []string
	// JSON and Parsed are transcript.json as read and decoded, when it is exactly what the log
	// and bodies give (Transcript): what an export of the run is made from (export.Load's pair).
	JSON   []byte
	Parsed *Transcript
	// Intact are the bodies (paths in the run directory) found to be exactly what the log hashes.
	Intact []string
}

// MaxFileBytes bounds transcript.json and transcript.html as Check reads them whole (the
// 2,000-turn hour's transcript.json is 8 MB): a hostile run directory's file of gigabytes is
// refused by its size, never read into memory.
const MaxFileBytes = 1 << 30

// ReadBounded reads a file of at most MaxFileBytes whole (transcript.json, transcript.html), and
// refuses a larger one by its size, unread; a missing one is os.ErrNotExist.
func ReadBounded(path string) ([]byte, error) {
	b, err := fileio.ReadBounded(path, "file", MaxFileBytes)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, err
}

// readIn is ReadBounded of the run directory's file name, from fsys where it is given.
func readIn(fsys fs.FS, dir, name string) ([]byte, error) {
	if fsys == nil {
		return ReadBounded(filepath.Join(dir, name))
	}
	fi, err := fs.Stat(fsys, name)
	if err == nil && fi.Size() > MaxFileBytes {
		err = fmt.Errorf("%d bytes, more than the %d a run's transcript file may have", fi.Size(), int64(MaxFileBytes))
	}
	var b []byte
	if err == nil {
		b, err = fs.ReadFile(fsys, name)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
	}
	return b, err
}

var pageVersionRE = regexp.MustCompile(`<meta name="generator" content="([^"]*)">`)

// Check checks a run directory (an ended run, a gathered run, a published one) whose audit log
// has been verified against its attestation (attest.Verify with the log): every body the log
// hashes is there and intact (or withheld, when its transcript.json says the operator withheld
// it), and transcript.json and transcript.html are exactly what the log and the bodies give. A
// directory without transcript.json is checked for its bodies alone.
func Check(dir string, pred *attest.Predicate) (*Report, error) {
	return CheckFS(nil, dir, pred)
}

// DigestFS is a run directory that knows the SHA-256 of each of its files (a reader that hashed
// them all as it read them): CheckFS compares a page it makes again with the digest, and reads
// the page only when they differ.
type DigestFS interface {
	fs.FS
	SHA256(name string) (sum string, ok bool)
}

// CheckFS is Check of the run directory whose files fsys holds (nil: dir on disk); dir names it
// in messages. A reader that read a publication's files once (verify) checks exactly those bytes.
func CheckFS(fsys fs.FS, dir string, pred *attest.Predicate) (*Report, error) {
	opts := Options{Withheld: map[string]bool{}, FS: fsys}
	published, err := readIn(fsys, dir, "transcript.json")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	hasJSON := err == nil
	otherFormat := ""
	var parsed Transcript
	// This sealrun's own format with no body withheld (the common case): nothing of it need be
	// parsed before the transcript is made again, and the one made again, equal to it byte for
	// byte, is what it parses to.
	lean := hasJSON && bytes.HasPrefix(published, []byte(`{"format":"`+Format+`",`)) && !bytes.Contains(published, []byte(`"state":"`+BodyWithheld+`"`))
	if hasJSON && !lean {
		t := &parsed
		if err := json.Unmarshal(published, t); err != nil || !strings.HasPrefix(t.Format, "sealrun-transcript/") {
			return nil, fmt.Errorf("%s: not a sealrun transcript: %v", filepath.Join(dir, "transcript.json"), err)
		}
		if t.Format != Format {
			otherFormat = t.Format
		}
		for _, e := range t.Events {
			for _, b := range eventBodies(e) {
				if b != nil && b.State == BodyWithheld {
					opts.Withheld[b.Path] = true
				}
			}
		}
	}
	t, err := Build(dir, RunFromPredicate(pred), opts)
	if err != nil {
		return nil, err
	}
	rep := &Report{Exchanges: t.Totals.Exchanges, Calls: t.Totals.Calls, Bodies: t.Bodies}
	for _, e := range t.Events {
		for _, b := range eventBodies(e) {
			switch {
			case b == nil:
			case b.State == BodyIntact:
				rep.Intact = append(rep.Intact, b.Path)
			case b.State == BodyMissing:
				rep.Problems = append(rep.Problems, fmt.Sprintf("%s: missing: audit entry %d hashes it (sha256 %s) and it is not here, nor marked withheld", b.Path, e.Seq, b.SHA256))
			case b.State == BodyAltered:
				rep.Problems = append(rep.Problems, fmt.Sprintf("%s: altered: not the %d bytes with sha256 %s that audit entry %d hashes", b.Path, wantBytes(b), wantSum(b), e.Seq))
			}
		}
	}
	if !hasJSON {
		rep.Notes = append(rep.Notes, "no transcript.json: the bodies alone were checked")
		return rep, nil
	}
	if otherFormat != "" {
		rep.Notes = append(rep.Notes, fmt.Sprintf("transcript.json is %s; this sealrun writes %s, so it and the page were not compared (the bodies were checked; sealrun transcript makes them again)", otherFormat, Format))
		return rep, nil
	}
	mine, err := Marshal(t)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(mine, published) {
		rep.Transcript = true
		rep.JSON, rep.Parsed = published, &parsed
		if lean {
			rep.Parsed = t
		}
	} else {
		rep.Problems = append(rep.Problems, "transcript.json: not what the audit log and the bodies give (sealrun transcript DIR makes it again)")
	}
	// A reader that hashed every file compares the page by its digest, made as it renders,
	// without reading it; the page is read only when it differs, to say how.
	if d, ok := fsys.(DigestFS); ok {
		if sum, ok := d.SHA256("transcript.html"); ok {
			h := sha256.New()
			if err := renderMarshaled(h, t, PageOptions{}, mine); err == nil && hex.EncodeToString(h.Sum(nil)) == sum {
				rep.Page = true
				return rep, nil
			}
		}
	}
	page, err := readIn(fsys, dir, "transcript.html")
	switch {
	case errors.Is(err, os.ErrNotExist):
		rep.Notes = append(rep.Notes, "no transcript.html")
	case err != nil:
		return nil, err
	default:
		m := pageVersionRE.FindSubmatch(page)
		if m == nil {
			// No generator mark: no page sealrun ever made.
			rep.Problems = append(rep.Problems, "transcript.html: not the page transcript.json gives, nor a page of any sealrun (it carries no generator mark)")
			break
		}
		if string(m[1]) != PageVersion {
			rep.Notes = append(rep.Notes, fmt.Sprintf("transcript.html was made by %s; this sealrun makes %s, so it was not compared (transcript.json was)", m[1], PageVersion))
			break
		}
		var want bytes.Buffer
		renderMarshaled(&want, t, PageOptions{}, mine)
		if bytes.Equal(want.Bytes(), page) {
			rep.Page = true
		} else {
			rep.Problems = append(rep.Problems, "transcript.html: not the page transcript.json gives")
		}
	}
	return rep, nil
}

func wantBytes(b *Body) int64 {
	if b.KeptSHA256 != "" {
		return b.Kept
	}
	return b.Bytes
}

func wantSum(b *Body) string {
	if b.KeptSHA256 != "" {
		return b.KeptSHA256
	}
	return b.SHA256
}

// eventBodies are the bodies an event hashes: a model exchange's request and response, a
// call's output, a terminal segment.
func eventBodies(e Event) []*Body {
	var out []*Body
	for _, b := range []*Body{modelBody(e, true), modelBody(e, false), callBody(e)} {
		if b != nil {
			out = append(out, b)
		}
	}
	if e.Terminal != nil && e.Terminal.Body.Path != "" {
		out = append(out, &e.Terminal.Body)
	}
	return out
}

func modelBody(e Event, request bool) *Body {
	if e.Model == nil {
		return nil
	}
	b := &e.Model.Response
	if request {
		b = &e.Model.Request
	}
	if b.Path == "" {
		return nil
	}
	return b
}

func callBody(e Event) *Body {
	if e.Call == nil || e.Call.Output.Path == "" {
		return nil
	}
	return &e.Call.Output
}
