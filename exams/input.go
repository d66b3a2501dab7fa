package exams

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sealrun/sealrun/internal/fileio"
)

// MaxProblems is how many problems an *InvalidInputError lists before it only counts them.
const MaxProblems = 50

// Problem is one thing wrong with an input file, at one line (0: the whole file).
type Problem struct {
	File string
	Line int
	Msg  string
}

func (p Problem) String() string {
	if p.Line == 0 {
		return p.File + ": " + p.Msg
	}
	return p.File + ":" + strconv.Itoa(p.Line) + ": " + p.Msg
}

// InvalidInputError lists the problems of a questions or documents file: the first MaxProblems,
// and how many more there were.
type InvalidInputError struct {
	File     string
	Problems []Problem
	More     int
}

func (e *InvalidInputError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.String())
	}
	if e.More > 0 {
		fmt.Fprintf(&b, "\n%s: ... and %d more problems", e.File, e.More)
	}
	return b.String()
}

// Option configures reading and building.
type Option func(*options)

type options struct {
	contextBytes   int
	maxAnswerBytes int
	maxQuestions   int
}

func newOptions(opts []Option) options {
	o := options{contextBytes: DefaultContextBytes, maxAnswerBytes: DefaultMaxAnswerBytes, maxQuestions: DefaultMaxQuestions}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// WithContextBytes sets how many trailing prefix bytes are kept (the model's context window).
func WithContextBytes(n int) Option { return func(o *options) { o.contextBytes = n } }

// WithMaxAnswerBytes sets the longest answer accepted.
func WithMaxAnswerBytes(n int) Option { return func(o *options) { o.maxAnswerBytes = n } }

// WithMaxQuestions sets the most questions accepted.
func WithMaxQuestions(n int) Option { return func(o *options) { o.maxQuestions = n } }

func (o options) check() error {
	switch {
	case o.contextBytes < 1 || o.contextBytes > MaxContextBytes:
		return fmt.Errorf("context bytes %d out of range; expected 1 to %d", o.contextBytes, MaxContextBytes)
	case o.maxAnswerBytes < 1:
		return fmt.Errorf("max answer bytes %d out of range; expected at least 1", o.maxAnswerBytes)
	case o.maxQuestions < 1:
		return fmt.Errorf("max questions %d out of range; expected at least 1", o.maxQuestions)
	}
	return nil
}

// reader collects problems and questions over the lines of one input file.
type reader struct {
	file     string
	opts     options
	problems []Problem
	more     int
	ids      map[string]int // question id -> line
	out      []Question
	full     bool // stopped: too many questions
}

func (r *reader) add(line int, format string, args ...any) {
	if len(r.problems) >= MaxProblems {
		r.more++
		return
	}
	r.problems = append(r.problems, Problem{File: r.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (r *reader) result() ([]Question, error) {
	if len(r.problems) == 0 && len(r.out) == 0 {
		r.add(0, "no questions: the input has no JSON lines; give one JSON object per line")
	}
	if len(r.problems) > 0 {
		return nil, &InvalidInputError{File: r.file, Problems: r.problems, More: r.more}
	}
	return r.out, nil
}

// emit records one question after the checks shared by both input kinds. prefix is the whole
// (masked) prefix; only its last contextBytes are kept.
func (r *reader) emit(line int, q Question) {
	if prev, dup := r.ids[q.ID]; dup {
		r.add(line, "duplicate question id %q (first on line %d); ids must be unique", q.ID, prev)
		return
	}
	if len(r.out) >= r.opts.maxQuestions {
		r.add(line, "more than %d questions; raise the limit (--max-questions) or split the exam", r.opts.maxQuestions)
		r.full = true
		return
	}
	r.ids[q.ID] = line
	r.out = append(r.out, q)
}

// eachLine calls fn for every non-blank line with its 1-based number. Lines over MaxLineBytes
// are reported and skipped; reading stops early once the question limit is hit.
func (r *reader) eachLine(in io.Reader, fn func(n int, line []byte)) error {
	br := bufio.NewReaderSize(in, 64<<10)
	var buf []byte
	for n := 1; !r.full; n++ {
		line, tooLong, err := readLine(br, &buf)
		if err != nil && err != io.EOF {
			return fmt.Errorf("read %s: line %d: %w", r.file, n, err)
		}
		if tooLong {
			r.add(n, "line is longer than %d bytes; split the document or shorten it", MaxLineBytes)
		} else if len(bytes.TrimSpace(line)) > 0 {
			fn(n, line)
		}
		if err == io.EOF {
			return nil
		}
	}
	return nil
}

// readLine reads up to and including the next '\n' into *buf. A line longer than MaxLineBytes
// is consumed but not kept (tooLong).
func readLine(br *bufio.Reader, buf *[]byte) (line []byte, tooLong bool, err error) {
	*buf = (*buf)[:0]
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(*buf)+len(chunk) > MaxLineBytes {
				tooLong, *buf = true, (*buf)[:0]
			} else {
				*buf = append(*buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return *buf, tooLong, err
	}
}

// object parses one line as a JSON object with only the allowed keys, each at most once.
func (r *reader) object(n int, line []byte, allowed []string) (map[string]json.RawMessage, bool) {
	if !utf8.Valid(line) {
		r.add(n, "line is not valid UTF-8 at byte %d; JSON text must be UTF-8 (use prefix_b64/answer_b64 for arbitrary bytes)", fileio.InvalidUTF8(line))
		return nil, false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			r.add(n, "malformed JSON at column %d: %s; each line must be one JSON object", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
		case errors.As(err, &te) || bytes.Equal(bytes.TrimSpace(line), []byte("null")):
			r.add(n, "line is a JSON %s, not an object; each line must be one JSON object", jsonKind(line))
		default:
			r.add(n, "malformed JSON: %v; each line must be one JSON object", err)
		}
		return nil, false
	}
	if m == nil {
		r.add(n, "line is JSON null, not an object; each line must be one JSON object")
		return nil, false
	}
	ok := true
	if members := countMembers(line); members != len(m) {
		r.add(n, "an object key appears more than once; each key may appear once")
		ok = false
	}
	for k := range m {
		if !slices.Contains(allowed, k) {
			r.add(n, "unknown key %q; expected keys %s", k, strings.Join(allowed, ", "))
			ok = false
		}
	}
	return m, ok
}

// str reads an optional string member; present reports whether it was there at all.
func (r *reader) str(n int, m map[string]json.RawMessage, key string) (s string, present, ok bool) {
	raw, present := m[key]
	if !present {
		return "", false, true
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		r.add(n, "%q is a JSON %s; expected a string", key, jsonKind(raw))
		return "", true, false
	}
	// encoding/json turns lone surrogate escapes (\ud800) into U+FFFD: refuse rather than alter.
	if strings.ContainsRune(s, utf8.RuneError) && !bytes.Contains(raw, []byte("\uFFFD")) && !bytes.Contains(bytes.ToLower(raw), []byte(`\ufffd`)) {
		r.add(n, "%q contains an invalid \\u escape (a lone surrogate); use %s_b64 for arbitrary bytes", key, key)
		return "", true, false
	}
	return s, true, true
}

// bytesField reads a field given either as text (key) or base64 (key_b64), exactly one of them.
func (r *reader) bytesField(n int, m map[string]json.RawMessage, key string) ([]byte, bool) {
	text, hasText, ok1 := r.str(n, m, key)
	b64, hasB64, ok2 := r.str(n, m, key+"_b64")
	if !ok1 || !ok2 {
		return nil, false
	}
	switch {
	case hasText && hasB64:
		r.add(n, "both %q and %q given; give one (%s for UTF-8 text, %s_b64 for bytes)", key, key+"_b64", key, key)
		return nil, false
	case hasText:
		return []byte(text), true
	case hasB64:
		b, err := base64.StdEncoding.Strict().DecodeString(b64)
		if err != nil {
			r.add(n, "%q is not valid standard base64 with padding (%v)", key+"_b64", err)
			return nil, false
		}
		return b, true
	}
	r.add(n, "missing %q (or %q)", key, key+"_b64")
	return nil, false
}

func (r *reader) checkAnswerLen(n int, what string, length int) bool {
	switch {
	case length == 0:
		r.add(n, "%s is empty; every question needs an answer of at least 1 byte", what)
		return false
	case length > r.opts.maxAnswerBytes:
		r.add(n, "%s is %d bytes; answers are at most %d bytes (--max-answer-bytes)", what, length, r.opts.maxAnswerBytes)
		return false
	}
	return true
}

func (r *reader) id(n int, m map[string]json.RawMessage, what string) (string, bool) {
	id, present, ok := r.str(n, m, "id")
	if !ok {
		return "", false
	}
	if !present {
		r.add(n, "missing %q; every %s needs a unique id", "id", what)
		return "", false
	}
	if msg := checkID(id); msg != "" {
		r.add(n, "id %q %s", truncateForMsg(id), msg)
		return "", false
	}
	return id, true
}

var questionKeys = []string{"id", "prefix", "prefix_b64", "answer", "answer_b64", "family"}

// ReadQuestions reads a questions file (JSONL, one {"id","prefix"|"prefix_b64","answer"|
// "answer_b64"[,"family"]} per line) and returns its questions with prefixes cut to the context
// window. On bad input it returns an *InvalidInputError listing every problem (up to MaxProblems).
func ReadQuestions(file string, in io.Reader, opts ...Option) ([]Question, error) {
	o := newOptions(opts)
	if err := o.check(); err != nil {
		return nil, err
	}
	r := &reader{file: file, opts: o, ids: map[string]int{}}
	err := r.eachLine(in, func(n int, line []byte) {
		m, ok := r.object(n, line, questionKeys)
		if m == nil {
			return
		}
		id, okID := r.id(n, m, "question")
		prefix, okP := r.bytesField(n, m, "prefix")
		answer, okA := r.bytesField(n, m, "answer")
		family, _, okF := r.str(n, m, "family")
		if okP && len(prefix) == 0 {
			r.add(n, "prefix is empty; a question needs at least 1 byte of prefix")
			okP = false
		}
		if okA {
			okA = r.checkAnswerLen(n, "answer", len(answer))
		}
		if ok && okID && okP && okA && okF {
			r.emit(n, Question{ID: id, Prefix: tail(prefix, o.contextBytes), Answer: answer, Family: family})
		}
	})
	if err != nil {
		return nil, err
	}
	return r.result()
}

var documentKeys = []string{"id", "text", "answers", "family"}

// MaxSpansPerDocument bounds the answers of one document.
const MaxSpansPerDocument = 10000

// ReadDocuments reads a documents file (JSONL, one {"id","text","answers":[[start,end],...]
// [,"family"]} per line). Span k (1-based) of document D becomes question "D/k": its answer is
// text[start:end] and its prefix is text[:start] with every earlier span of D replaced by '_'
// bytes of the same length, cut to the context window.
func ReadDocuments(file string, in io.Reader, opts ...Option) ([]Question, error) {
	o := newOptions(opts)
	if err := o.check(); err != nil {
		return nil, err
	}
	r := &reader{file: file, opts: o, ids: map[string]int{}}
	docs := map[string]int{}
	err := r.eachLine(in, func(n int, line []byte) {
		m, ok := r.object(n, line, documentKeys)
		if m == nil {
			return
		}
		id, okID := r.id(n, m, "document")
		if okID {
			if prev, dup := docs[id]; dup {
				r.add(n, "duplicate document id %q (first on line %d); ids must be unique", id, prev)
				okID = false
			} else {
				docs[id] = n
			}
		}
		text, hasText, okT := r.str(n, m, "text")
		if okT && !hasText {
			r.add(n, "missing %q; a document needs its text", "text")
			okT = false
		}
		family, _, okF := r.str(n, m, "family")
		spans, okS := r.spans(n, m, len(text), okT)
		if !(ok && okID && okT && okF && okS) {
			return
		}
		for k, s := range spans {
			r.emit(n, Question{
				ID:     id + "/" + strconv.Itoa(k+1),
				Prefix: maskedTail(text, spans[:k], s[0], o.contextBytes),
				Answer: []byte(text[s[0]:s[1]]),
				Family: family,
			})
		}
	})
	if err != nil {
		return nil, err
	}
	return r.result()
}

// spans reads and checks "answers": sorted, non-overlapping, non-empty [start, end) byte ranges
// inside text. textOK false means the text is unknown, so ranges are checked only for shape. It is
// long because it is one rule per property of a span, each with its message.
func (r *reader) spans(n int, m map[string]json.RawMessage, textLen int, textOK bool) ([][2]int, bool) {
	raw, present := m["answers"]
	if !present {
		r.add(n, "missing %q; give the answer spans as [[start, end], ...] byte offsets into text", "answers")
		return nil, false
	}
	var list [][]json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&list); err != nil {
		r.add(n, "%q is not a list of [start, end] pairs of integers (%s)", "answers", jsonKind(raw))
		return nil, false
	}
	if len(list) == 0 {
		r.add(n, "%q is empty; a document needs at least one answer span", "answers")
		return nil, false
	}
	if len(list) > MaxSpansPerDocument {
		r.add(n, "%q has %d spans; at most %d per document", "answers", len(list), MaxSpansPerDocument)
		return nil, false
	}
	out := make([][2]int, 0, len(list))
	ok := true
	for k, pair := range list {
		at := fmt.Sprintf("answers[%d]", k)
		if len(pair) != 2 {
			r.add(n, "%s has %d numbers; a span is [start, end]", at, len(pair))
			ok = false
			continue
		}
		var se [2]int
		good := true
		for i, num := range pair {
			v, err := strconv.ParseInt(num.String(), 10, 64)
			if err != nil || v < 0 || v > MaxLineBytes {
				r.add(n, "%s: %s is not a byte offset; expected a whole number from 0 to the text length", at, num)
				good = false
				continue
			}
			se[i] = int(v)
		}
		if !good {
			ok = false
			continue
		}
		start, end := se[0], se[1]
		switch {
		case end <= start:
			r.add(n, "%s = [%d, %d] is empty or reversed; a span needs start < end", at, start, end)
			ok = false
		case textOK && end > textLen:
			r.add(n, "%s = [%d, %d] is out of range: text is %d bytes", at, start, end, textLen)
			ok = false
		case start == 0:
			r.add(n, "%s = [%d, %d] starts at 0, so its prefix would be empty; a question needs a prefix", at, start, end)
			ok = false
		case len(out) > 0 && start < out[len(out)-1][0]:
			r.add(n, "%s = [%d, %d] is not sorted: it starts before the span before it; list spans in text order", at, start, end)
			ok = false
		case len(out) > 0 && start < out[len(out)-1][1]:
			r.add(n, "%s = [%d, %d] overlaps the span before it [%d, %d]; spans must not overlap", at, start, end, out[len(out)-1][0], out[len(out)-1][1])
			ok = false
		case !r.checkAnswerLen(n, at, end-start):
			ok = false
		}
		out = append(out, se)
	}
	return out, ok
}

// maskedTail returns the last c bytes of text[:start] with the earlier spans replaced by '_'.
// Earlier spans are sorted and end at or before start; only those reaching into the window matter.
func maskedTail(text string, earlier [][2]int, start, c int) []byte {
	lo := max(0, start-c)
	out := []byte(text[lo:start])
	for j := len(earlier) - 1; j >= 0 && earlier[j][1] > lo; j-- {
		a, b := max(earlier[j][0], lo), earlier[j][1]
		for i := a; i < b; i++ {
			out[i-lo] = '_'
		}
	}
	return out
}

// tail returns the last c bytes of p.
func tail(p []byte, c int) []byte {
	if len(p) > c {
		return p[len(p)-c:]
	}
	return p
}

// countMembers counts the members of the top-level JSON object in a line that json.Unmarshal
// accepted, so that duplicate keys (which Unmarshal silently merges) are caught.
func countMembers(line []byte) int {
	depth, members := 0, 0
	inString, escaped, empty := false, false, true
	for _, c := range line {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
			if depth == 1 {
				empty = false
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case ',':
			if depth == 1 {
				members++
			}
		}
	}
	if empty {
		return 0
	}
	return members + 1
}

func jsonKind(raw []byte) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "empty value"
	}
	switch t[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// truncateForMsg shortens s for an error message, on a rune boundary.
func truncateForMsg(s string) string {
	if len(s) <= 40 {
		return s
	}
	cut := 40
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
