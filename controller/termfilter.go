package controller

import "bytes"

// A terminal filter reads a shell's output as a terminal would and leaves out what must not
// reach a terminal other than the person's own:
//
//   - queries (QueriesOnly and Watcher): the sequences by which a program asks the terminal
//     something, which it answers as if typed: the device status and cursor position (CSI n),
//     the device attributes (CSI c, ESC Z), window reports (CSI 11/13/14/15/16/18/19/20/21 t),
//     the terminal's version (CSI > q), a mode's state (CSI $ p), the keyboard protocol
//     (CSI ? u), modifier keys (CSI ? m), graphics attributes (CSI ? S), terminal parameters
//     (CSI x), a colour or the clipboard (an OSC whose value is ?), a setting or a capability
//     (DCS $ q, DCS + q). Replayed to a terminal that attaches later, a query is answered again,
//     and the answer arrives as input the person did not type.
//   - for a watcher (Watcher), besides: every string sequence (OSC: the title, the clipboard
//     (OSC 52), hyperlinks, colours; DCS; APC, PM and SOS) and every window operation (CSI t): a
//     person's output must not set a proctor's clipboard, title or colours, move or resize their
//     window, or make their terminal answer.
//
// It keeps state across writes (a sequence may be cut anywhere), holds at most a sequence's
// first maxHeld bytes, and never grows with its input: a string sequence longer than that is
// passed whole (QueriesOnly: no query is that long) or dropped whole (Watcher).
type termFilter struct {
	watcher bool
	queries int // the queries left out so far (QueriesOnly: every sequence left out)
	state   int
	held    []byte // the sequence so far, while it is decided
	drop    bool   // the string sequence being read is dropped, not held
}

const (
	tfGround = iota
	tfEsc    // after ESC
	tfCSI    // in a CSI sequence
	tfStr    // in a string sequence (OSC, DCS, APC, PM, SOS)
	tfStrEsc // in a string sequence, after ESC (ST is ESC \)
	tfPass   // in a string sequence too long to be a query: passed through to its end
	tfPassEsc
)

const maxHeld = 256

func newTermFilter(watcher bool) *termFilter {
	return &termFilter{watcher: watcher, held: make([]byte, 0, 64)}
}

// filterQueries is a complete buffer (the history a new attachment is shown) without its
// queries.
func filterQueries(b []byte) []byte {
	f := newTermFilter(false)
	out := f.Write(nil, b)
	switch f.state {
	case tfEsc, tfCSI, tfStr, tfStrEsc: // a sequence cut at the end: the next write ends it
		out = append(out, f.held...)
	case tfPassEsc:
		out = append(out, 0x1b)
	}
	return out
}

// Write appends what passes of p to dst and returns it.
func (f *termFilter) Write(dst, p []byte) []byte {
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch f.state {
		case tfGround:
			// copy the run of plain bytes at once
			j := bytes.IndexByte(p[i:], 0x1b)
			if j < 0 {
				return append(dst, p[i:]...)
			}
			dst = append(dst, p[i:i+j]...)
			i += j
			f.held = append(f.held[:0], 0x1b)
			f.state = tfEsc
		case tfEsc:
			switch c {
			case '[':
				f.held = append(f.held, c)
				f.state = tfCSI
			case ']', 'P', '_', '^', 'X': // OSC, DCS, APC, PM, SOS
				f.held = append(f.held, c)
				f.state = tfStr
				f.drop = f.watcher
			case 'Z': // DECID: the device attributes
				f.queries++
				f.state = tfGround
			case 0x1b: // ESC ESC: the first does nothing (sent alone, it would begin what follows)
			default:
				dst = append(append(dst, f.held...), c)
				f.state = tfGround
			}
		case tfCSI:
			switch {
			case c == 0x1b: // a new escape: the unfinished CSI does nothing
				f.held = append(f.held[:0], 0x1b)
				f.state = tfEsc
			case c == 0x18 || c == 0x1a: // CAN, SUB: cancelled
				f.state = tfGround
			case c < 0x20: // a control inside a CSI is done at once, and the CSI goes on
				dst = append(dst, c)
			case c >= 0x40 && c <= 0x7e: // the final byte
				f.held = append(f.held, c)
				if !f.csiDropped() {
					dst = append(dst, f.held...)
				} else {
					f.queries++
				}
				f.state = tfGround
			case len(f.held) >= maxHeld: // longer than any a terminal reads: it does nothing
				f.state = tfGround
			default:
				f.held = append(f.held, c)
			}
		case tfStr, tfStrEsc:
			if f.state == tfStrEsc {
				if c == '\\' { // ST
					if q := f.strIsQuery(); !f.drop && !q {
						dst = append(append(dst, f.held...), c)
					} else if q {
						f.queries++
					}
					f.state = tfGround
					continue
				}
				// ESC not followed by \ aborts the string, which a terminal then does not act on:
				// left out; the ESC begins anew
				f.held = append(f.held[:0], 0x1b)
				f.state = tfEsc
				i-- // read c again after ESC
				continue
			}
			if !f.drop && len(f.held) >= maxHeld { // too long to be a query: pass it whole
				dst = append(dst, f.held...)
				f.state = tfPass
				i--
				continue
			}
			switch {
			case c == 0x07 && f.held[1] == ']': // BEL ends an OSC
				if q := f.strIsQuery(); !f.drop && !q {
					dst = append(append(dst, f.held...), c)
				} else if q {
					f.queries++
				}
				f.state = tfGround
			case c == 0x1b:
				f.held = append(f.held, c)
				f.state = tfStrEsc
			case c == 0x18 || c == 0x1a: // CAN, SUB: the sequence is cancelled, not acted on
				f.state = tfGround
			case f.drop:
				if len(f.held) < 2+8 { // what an error message may name
					f.held = append(f.held, c)
				}
			default:
				f.held = append(f.held, c)
			}
		case tfPass:
			switch {
			case c == 0x1b:
				f.state = tfPassEsc
			case c == 0x07 || c == 0x18 || c == 0x1a:
				dst = append(dst, c)
				f.state = tfGround
			default:
				dst = append(dst, c)
			}
		case tfPassEsc:
			if c == '\\' { // ST
				dst = append(dst, 0x1b, c)
				f.state = tfGround
				continue
			}
			f.held = append(f.held[:0], 0x1b) // the string aborted: the ESC begins anew
			f.state = tfEsc
			i--
		}
	}
	return dst
}

// csiDropped says whether the held CSI sequence is left out.
func (f *termFilter) csiDropped() bool {
	h := f.held[2:] // after ESC [
	final := h[len(h)-1]
	h = h[:len(h)-1]
	var prefix byte
	if len(h) > 0 && (h[0] == '?' || h[0] == '>' || h[0] == '=' || h[0] == '<') {
		prefix, h = h[0], h[1:]
	}
	// intermediates: the bytes 0x20-0x2f before the final (dollar: the one DECRQM has)
	inter := 0
	dollar := false
	for len(h) > 0 && h[len(h)-1] >= 0x20 && h[len(h)-1] <= 0x2f {
		dollar = h[len(h)-1] == '$'
		inter++
		h = h[:len(h)-1]
	}
	first := 0
	for _, c := range h {
		if c < '0' || c > '9' {
			break
		}
		first = first*10 + int(c-'0')
		if first > 1000 {
			break
		}
	}
	switch final {
	case 'n', 'c':
		return inter == 0
	case 't':
		if f.watcher {
			return true // window operations: none is a person's to do to a proctor's window
		}
		switch first {
		case 11, 13, 14, 15, 16, 18, 19, 20, 21:
			return prefix == 0 && inter == 0
		}
	case 'q':
		return prefix == '>' && inter == 0
	case 'p':
		return inter == 1 && dollar
	case 'u', 'm', 'S':
		return prefix == '?' && inter == 0
	case 'x':
		return prefix == 0 && inter == 0 && first <= 1
	}
	return false
}

// strIsQuery says whether the held string sequence (ESC ] … or ESC P …, its terminator not
// yet held) asks the terminal something: an OSC one of whose values is ?, a DCS $ q or + q.
func (f *termFilter) strIsQuery() bool {
	body := f.held[2:]
	if n := len(body); n > 0 && body[n-1] == 0x1b {
		body = body[:n-1]
	}
	switch f.held[1] {
	case ']':
		for _, v := range bytes.Split(body, []byte(";")) {
			if len(v) == 1 && v[0] == '?' {
				return true
			}
		}
	case 'P':
		return bytes.HasPrefix(body, []byte("$q")) || bytes.HasPrefix(body, []byte("+q"))
	}
	return false
}

// splitAnswers is what a person's terminal sent, without its answers to the shell's queries:
// the reports a terminal writes into its input when asked (a cursor position, CSI … R; device
// attributes, CSI ? … c and CSI > … c; a status, CSI … n; window reports, CSI … t; a mode's
// state, CSI … $ y; keyboard and graphics settings, CSI ? … u, CSI ? … S, CSI > … m;
// parameters, CSI … x; any OSC or DCS), taken as answers while *pending (the queries it was
// sent and has not answered) is above zero, each one answering one. What remains is what was
// typed. Only sequences whole within p are answers: a terminal writes each at once.
func splitAnswers(p []byte, pending *int) (typed []byte, answered int) {
	if *pending <= 0 || bytes.IndexByte(p, 0x1b) < 0 {
		return p, 0
	}
	typed = make([]byte, 0, len(p))
	for i := 0; i < len(p); {
		j := bytes.IndexByte(p[i:], 0x1b)
		if j < 0 || *pending <= 0 {
			typed = append(typed, p[i:]...)
			break
		}
		typed = append(typed, p[i:i+j]...)
		i += j
		if n := answerLen(p[i:]); n > 0 {
			i += n
			answered += n
			*pending--
			continue
		}
		typed = append(typed, p[i])
		i++
	}
	return typed, answered
}

// answerLen is the length of the terminal answer b begins with (ESC first), or 0.
func answerLen(b []byte) int {
	if len(b) < 3 {
		return 0
	}
	switch b[1] {
	case ']', 'P': // OSC, DCS: ended by BEL (OSC) or ST
		for k := 2; k < len(b) && k < maxHeld; k++ {
			switch {
			case b[k] == 0x07 && b[1] == ']':
				return k + 1
			case b[k] == 0x1b:
				if k+1 < len(b) && b[k+1] == '\\' {
					return k + 2
				}
				return 0
			}
		}
	case '[':
		k := 2
		var prefix byte
		if c := b[k]; c == '?' || c == '>' {
			prefix = c
			k++
		}
		for k < len(b) && k < maxHeld && (b[k] >= '0' && b[k] <= '9' || b[k] == ';' || b[k] == ':') {
			k++
		}
		dollar := k < len(b) && b[k] == '$'
		if dollar {
			k++
		}
		if k >= len(b) {
			return 0
		}
		ok := false
		switch b[k] {
		case 'R', 'n', 't', 'x':
			ok = !dollar
		case 'c':
			ok = !dollar && prefix != 0
		case 'y':
			ok = dollar
		case 'u', 'S':
			ok = !dollar && prefix == '?'
		case 'm':
			ok = !dollar && prefix == '>'
		}
		if ok {
			return k + 1
		}
	}
	return 0
}
