// Package opt is a library's word on one of the options its caller gave it (a field of its
// Options, or an argument of its call): which option, what is wrong with it and the fix, and
// the other options it needs. A library names its own options; a command line names them as
// the flags they came from (cmd/sealrun renders every *Error with its verb's flags), so that no
// library speaks of a flag it does not have.
package opt

import (
	"errors"
	"strings"
	"unicode"
)

// Error is a problem with one option.
type Error struct {
	Where   string   // whose option: "verify.Options", "publish.Options"; "" for a field of a request on the wire (its JSON name)
	Option  string   // the option, as its Go field is named: "TSAChain" ("": the call as a whole)
	Problem string   // what is wrong, and the fix, in words; "" when Err says it
	Needs   []string // options to give with it (their fields)
	Err     error    // the cause, when there is one
}

// New is a problem with option of where.
func New(where, option, problem string, needs ...string) *Error {
	return &Error{Where: where, Option: option, Problem: problem, Needs: needs}
}

// Wrap is err as a problem with option of where.
func Wrap(where, option string, err error) *Error {
	return &Error{Where: where, Option: option, Err: err}
}

func (e *Error) Error() string {
	return e.Text(func(o string) string {
		if e.Where == "" {
			return o
		}
		return e.Where + "." + o
	})
}

// Field is a problem with the field of a request sealrund was sent (its JSON name: "rerun_of",
// "person.key"): what its answer names, and a client names as its own input.
func Field(field, problem string, needs ...string) *Error {
	return &Error{Option: field, Problem: problem, Needs: needs}
}

func (e *Error) Unwrap() error { return e.Err }

// Text is e's message with each option named by name (a command line passes its flags).
func (e *Error) Text(name func(option string) string) string {
	var b strings.Builder
	if e.Option != "" {
		b.WriteString(name(e.Option))
		b.WriteString(": ")
	}
	switch {
	case e.Problem != "" && e.Err != nil:
		b.WriteString(e.Problem + ": " + e.Err.Error())
	case e.Problem != "":
		b.WriteString(e.Problem)
	case e.Err != nil:
		b.WriteString(e.Err.Error())
	}
	if len(e.Needs) > 0 {
		b.WriteString(NeedsText(e.Needs, name))
	}
	return b.String()
}

// NeedsText is what an Error says of the options it needs: "; give A, B and C", each named by
// name.
func NeedsText(needs []string, name func(option string) string) string {
	names := make([]string, len(needs))
	for i, n := range needs {
		names[i] = name(n)
	}
	last := names[len(names)-1]
	if len(names) > 1 {
		last = strings.Join(names[:len(names)-1], ", ") + " and " + last
	}
	return "; give " + last
}

// Kebab is an option's field name as a flag names it: TSAChain → tsa-chain, AllowUnchecked →
// allow-unchecked, Key → key; a request's JSON field too: rerun_of → rerun-of, person.key →
// person-key.
func Kebab(option string) string {
	rs := []rune(option)
	var b strings.Builder
	for i, r := range rs {
		if unicode.IsUpper(r) {
			// a word starts here: after a lower-case letter, or before one (the C of TSAChain),
			// but not before an acronym's plural s (GPUs)
			plural := i+1 < len(rs) && rs[i+1] == 's' && (i+2 == len(rs) || unicode.IsUpper(rs[i+2]))
			if i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]) && !plural)) {
				b.WriteByte('-')
			}
			r = unicode.ToLower(r)
		}
		if r == '_' || r == '.' {
			r = '-'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Render is err's message with every *Error in it named by name; err's own text otherwise.
func Render(err error, name func(option string) string) string {
	msg := err.Error()
	for e := err; e != nil; {
		var oe *Error
		if !errors.As(e, &oe) {
			break
		}
		msg = strings.Replace(msg, oe.Error(), oe.Text(name), 1)
		e = oe.Err
	}
	return msg
}
