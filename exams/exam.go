package exams

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"
)

// Format is the format name on line 1 of every built exam.
const Format = "sealrun-exam/v1"

// Defaults and hard limits of the build step.
const (
	DefaultContextBytes   = 1024    // bytes of prefix a model sees (the grader's context window)
	DefaultMaxAnswerBytes = 256     // longest answer accepted by default
	DefaultMaxQuestions   = 1000000 // most questions accepted by default
	MaxContextBytes       = 1 << 20 // largest context window a built exam may declare
	MaxIDBytes            = 256     // longest question or document id
	MaxLineBytes          = 8 << 20 // longest input line (one question or document)
)

// Question is one hidden question: the model sees Prefix and must produce Answer exactly.
type Question struct {
	ID     string
	Prefix []byte // in a built exam, already masked and truncated to the context window
	Answer []byte
	Family string // synthetic family, from the input; never written into a built exam
}

// Header is line 1 of a built exam.
type Header struct {
	Format       string `json:"format"`
	ContextBytes int    `json:"context_bytes"`
	Questions    int    `json:"questions"`
}

// appendHeader appends the RFC 8785 canonical JSON of h and a newline. JCS sorts keys by UTF-16
// code units: context_bytes < format < questions.
func appendHeader(dst []byte, h Header) []byte {
	dst = append(dst, `{"context_bytes":`...)
	dst = strconv.AppendInt(dst, int64(h.ContextBytes), 10)
	dst = append(dst, `,"format":`...)
	dst = appendJCSString(dst, h.Format)
	dst = append(dst, `,"questions":`...)
	dst = strconv.AppendInt(dst, int64(h.Questions), 10)
	return append(dst, "}\n"...)
}

// appendQuestion appends the canonical line of q: {"answer":b64,"id":id,"prefix":b64} and "\n".
func appendQuestion(dst []byte, q *Question) []byte {
	dst = append(dst, `{"answer":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, q.Answer)
	dst = append(dst, `","id":`...)
	dst = appendJCSString(dst, q.ID)
	dst = append(dst, `,"prefix":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, q.Prefix)
	return append(dst, "\"}\n"...)
}

// appendJCSString appends s as an RFC 8785 string (ECMAScript JSON.stringify): '"' and '\' and
// the C0 controls are escaped (\b \t \n \f \r, else \u00xx in lowercase hex); every other
// character, including U+2028 and '<', is written as its UTF-8 bytes. s must be valid UTF-8.
func appendJCSString(dst []byte, s string) []byte {
	const hexdigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c >= 0x20:
			dst = append(dst, c)
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexdigits[c>>4], hexdigits[c&0xf])
		}
	}
	return append(dst, '"')
}

// checkID reports what is wrong with a question or document id, or "".
func checkID(id string) string {
	switch {
	case id == "":
		return "is empty"
	case len(id) > MaxIDBytes:
		return "is " + strconv.Itoa(len(id)) + " bytes; ids are at most " + strconv.Itoa(MaxIDBytes) + " bytes"
	case !utf8.ValidString(id):
		return "is not valid UTF-8"
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return "contains a control character; ids are printable text"
		}
	}
	return ""
}
