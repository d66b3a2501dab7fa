package exams

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

	"github.com/sealrun/sealrun/digest"
)

// Exam is a built exam, read back and verified.
type Exam struct {
	Header    Header
	SHA256    digest.Hex // of the file's bytes
	Questions []Question
}

// HashMismatchError: the file is not the exam the caller asked for.
type HashMismatchError struct {
	Path      string
	Want, Got digest.Hex
}

func (e *HashMismatchError) Error() string {
	return fmt.Sprintf("exam %s has sha256 %s, but %s was expected; this is not the exam the track pins (rebuild it or fix the track's [exam].sha256)", e.Path, e.Got, e.Want)
}

// InvalidExamError: the file is not a well-formed canonical built exam.
type InvalidExamError struct {
	Path string
	Line int
	Msg  string
}

func (e *InvalidExamError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: not a valid %s file: %s", e.Path, Format, e.Msg)
	}
	return fmt.Sprintf("%s:%d: not a valid %s file: %s", e.Path, e.Line, Format, e.Msg)
}

// Open reads the built exam at path in one streaming pass, checking that every line is in
// canonical form and that the file's SHA-256 equals wantSHA256 (lowercase hex; "" skips the
// comparison, for tools that only inspect). It returns *HashMismatchError showing both hashes,
// or *InvalidExamError naming the line. The daemon refuses a run whose exam does not verify.
func Open(path string, wantSHA256 digest.Hex) (*Exam, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, &InvalidExamError{Path: path, Msg: "not a regular file"}
	}
	return Decode(path, f, wantSHA256)
}

// Decode is Open for an already opened reader; name is used in errors. It is long because it checks
// the header and every question line in one pass, as the format (exams/FORMAT.md) lists them.
func Decode(name string, in io.Reader, wantSHA256 digest.Hex) (*Exam, error) {
	h := sha256.New()
	br := bufio.NewReaderSize(io.TeeReader(in, h), 256<<10)
	bad := func(line int, format string, args ...any) error {
		return &InvalidExamError{Path: name, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	maxLine := 64 << 10 // until the header says how long prefixes may be
	var buf []byte
	next := func() ([]byte, error) {
		line, tooLong, err := readLine(br, &buf)
		if tooLong || len(line) > maxLine {
			return nil, errLineTooLong
		}
		return line, err
	}
	line, err := next()
	switch {
	case errors.Is(err, errLineTooLong):
		return nil, bad(1, "the header line is too long")
	case err == io.EOF && len(line) == 0:
		return nil, bad(0, "the file is empty")
	case err != nil && err != io.EOF:
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	var hdr Header
	if e := strictJSON(line, &hdr); e != nil {
		return nil, bad(1, "header: %v", e)
	}
	if hdr.Format != Format {
		return nil, bad(1, "format is %q; this sealrun reads %q", hdr.Format, Format)
	}
	if hdr.ContextBytes < 1 || hdr.ContextBytes > MaxContextBytes || hdr.Questions < 1 || hdr.Questions > DefaultMaxQuestions*100 {
		return nil, bad(1, "header values out of range (context_bytes %d, questions %d)", hdr.ContextBytes, hdr.Questions)
	}
	if !bytes.Equal(line, appendHeader(nil, hdr)) {
		return nil, bad(1, "the header is not in canonical form (RFC 8785 JSON followed by \\n)")
	}
	// A question line holds base64 of at most context_bytes of prefix and a bounded answer.
	maxLine = 2*base64.StdEncoding.EncodedLen(hdr.ContextBytes) + 2*MaxLineBytes/1024 + 6*MaxIDBytes + 64
	ex := &Exam{Header: hdr, Questions: make([]Question, 0, min(hdr.Questions, 1<<16))}
	ids := make(map[string]int, min(hdr.Questions, 1<<16))
	var canon []byte
	for n := 2; ; n++ {
		line, err := next()
		if errors.Is(err, errLineTooLong) {
			return nil, bad(n, "line is longer than a question line can be")
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		if len(line) > 0 {
			if len(ex.Questions) == hdr.Questions {
				return nil, bad(n, "more question lines than the header's %d", hdr.Questions)
			}
			var ql struct{ Answer, ID, Prefix string }
			if e := strictJSON(line, &ql); e != nil {
				return nil, bad(n, "%v", e)
			}
			q := Question{ID: ql.ID}
			var e1, e2 error
			q.Prefix, e1 = base64.StdEncoding.Strict().DecodeString(ql.Prefix)
			q.Answer, e2 = base64.StdEncoding.Strict().DecodeString(ql.Answer)
			switch {
			case e1 != nil || e2 != nil:
				return nil, bad(n, "prefix or answer is not standard base64")
			case checkID(q.ID) != "":
				return nil, bad(n, "id %q %s", truncateForMsg(q.ID), checkID(q.ID))
			case len(q.Prefix) == 0 || len(q.Prefix) > hdr.ContextBytes:
				return nil, bad(n, "prefix is %d bytes; expected 1 to context_bytes (%d)", len(q.Prefix), hdr.ContextBytes)
			case len(q.Answer) == 0:
				return nil, bad(n, "answer is empty")
			}
			if prev, dup := ids[q.ID]; dup {
				return nil, bad(n, "duplicate id %q (also on line %d)", truncateForMsg(q.ID), prev)
			}
			if canon = appendQuestion(canon[:0], &q); !bytes.Equal(line, canon) {
				return nil, bad(n, "line is not in canonical form (RFC 8785 JSON, keys answer, id, prefix, followed by \\n)")
			}
			ids[q.ID] = n
			ex.Questions = append(ex.Questions, q)
		}
		if err == io.EOF {
			break
		}
	}
	if len(ex.Questions) != hdr.Questions {
		return nil, bad(0, "the header says %d questions but the file has %d (truncated?)", hdr.Questions, len(ex.Questions))
	}
	ex.SHA256 = digest.HexOf(h.Sum(nil))
	if wantSHA256 != "" && ex.SHA256 != wantSHA256 {
		return nil, &HashMismatchError{Path: name, Want: wantSHA256, Got: ex.SHA256}
	}
	return ex, nil
}

var errLineTooLong = errors.New("line too long")

// strictJSON decodes one JSON object into v, refusing unknown keys and trailing data.
func strictJSON(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed line: %v", err)
	}
	if dec.More() {
		return errors.New("malformed line: data after the JSON object")
	}
	return nil
}
