package controller

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// filterAll is f over p written in the given pieces.
func filterAll(watcher bool, pieces ...[]byte) []byte {
	f := newTermFilter(watcher)
	var out []byte
	for _, p := range pieces {
		out = f.Write(out, p)
	}
	return out
}

var termCases = []struct {
	name           string
	in             string
	person, proctr string // what the history shown to a person keeps; what a proctor is sent
}{
	{"plain text", "hello\r\n$ ", "hello\r\n$ ", "hello\r\n$ "},
	{"colour and cursor moves pass", "\x1b[1;32mok\x1b[0m\x1b[2K\x1b[3;4H\x1b[?25l", "\x1b[1;32mok\x1b[0m\x1b[2K\x1b[3;4H\x1b[?25l", "\x1b[1;32mok\x1b[0m\x1b[2K\x1b[3;4H\x1b[?25l"},
	{"cursor position report (busybox's prompt)", "a\x1b[6nb", "ab", "ab"},
	{"device status, private", "\x1b[?6n\x1b[5n", "", ""},
	{"device attributes 1, 2, 3", "\x1b[c\x1b[0c\x1b[>c\x1b[=c", "", ""},
	{"DECID", "x\x1bZy", "xy", "xy"},
	{"window reports", "\x1b[14t\x1b[18t\x1b[21t\x1b[11t", "", ""},
	{"a window operation: a proctor's window is not the person's to move", "\x1b[8;50;100t\x1b[3;0;0t", "\x1b[8;50;100t\x1b[3;0;0t", ""},
	{"terminal version", "\x1b[>q\x1b[>0q", "", ""},
	{"a mode's state (DECRQM)", "\x1b[?2004$p\x1b[4$p", "", ""},
	{"keyboard, modifier keys, graphics queries", "\x1b[?u\x1b[?4m\x1b[?1;1S", "", ""},
	{"terminal parameters", "\x1b[x\x1b[1x", "", ""},
	{"colour queries (OSC 10, 11, 4)", "\x1b]10;?\x07\x1b]11;?\x1b\\\x1b]4;1;?\x07", "", ""},
	{"clipboard query", "\x1b]52;c;?\x07", "", ""},
	{"clipboard set (OSC 52): a person's own, never a proctor's", "\x1b]52;c;ZWNobyBwd25lZA==\x07", "\x1b]52;c;ZWNobyBwd25lZA==\x07", ""},
	{"title", "\x1b]0;my shell\x07$ ", "\x1b]0;my shell\x07$ ", "$ "},
	{"hyperlink", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"},
	{"DCS queries (DECRQSS, XTGETTCAP)", "\x1bP$qm\x1b\\\x1bP+q544e\x1b\\", "", ""},
	{"another DCS: a proctor's terminal gets none", "\x1bPq#0;2;0;0;0#0~~@@vv\x1b\\", "\x1bPq#0;2;0;0;0#0~~@@vv\x1b\\", ""},
	{"APC, PM, SOS", "\x1b_Gq=1\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\", "\x1b_Gq=1\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\", ""},
	{"a control inside a CSI is done, the CSI goes on", "\x1b[6\x0bn", "\x0b", "\x0b"},
	{"CAN cancels a query", "\x1b[6\x18n", "n", "n"},
	{"an ESC starts anew", "\x1b[6\x1b[6n!", "!", "!"},
	{"an OSC cut by ESC is not acted on", "\x1b]0;t\x1b[6n!", "!", "!"},
	{"an OSC cancelled", "\x1b]0;t\x18!", "!", "!"},
	{"charset designation passes", "\x1b(B\x1b)0", "\x1b(B\x1b)0", "\x1b(B\x1b)0"},
	{"ESC ESC", "\x1b\x1b[6n", "", ""},
	{"ESC ESC, then what would begin a string", "\x1b\x1bX\x1bZX0", "X0", "X0"},
	{"a long title passes to the person, not to a proctor", "\x1b]2;" + strings.Repeat("t", 5000) + "\x07.", "\x1b]2;" + strings.Repeat("t", 5000) + "\x07.", "."},
	{"a long title aborted by a query", "\x1b]2;" + strings.Repeat("t", 300) + "\x1b[6n.", "\x1b]2;" + strings.Repeat("t", 300) + ".", "."},
	{"a long OSC with ? far in is no query", "\x1b]2;" + strings.Repeat("t", 300) + ";?\x07", "\x1b]2;" + strings.Repeat("t", 300) + ";?\x07", ""},
	{"an over-long CSI does nothing; its tail is text", "\x1b[" + strings.Repeat("1;", 200) + "6n", strings.Repeat("1;", 200)[255:] + "6n", strings.Repeat("1;", 200)[255:] + "6n"},
}

// The filter, on every case, whole and cut at every byte: the same output either way (a
// sequence may arrive in pieces), what the case says for a person's history and for a proctor.
func TestTermFilter(t *testing.T) {
	for _, c := range termCases {
		for _, w := range []struct {
			watcher bool
			want    string
		}{{false, c.person}, {true, c.proctr}} {
			if got := string(filterAll(w.watcher, []byte(c.in))); got != w.want {
				t.Errorf("%s (watcher %v): %q, want %q", c.name, w.watcher, got, w.want)
				continue
			}
			for cut := 1; cut < len(c.in); cut++ {
				if got := string(filterAll(w.watcher, []byte(c.in[:cut]), []byte(c.in[cut:]))); got != w.want {
					t.Errorf("%s (watcher %v), cut at %d: %q, want %q", c.name, w.watcher, cut, got, w.want)
					break
				}
			}
			if got := string(filterAll(w.watcher, bytesOneByOne(c.in)...)); got != w.want {
				t.Errorf("%s (watcher %v), a byte at a time: %q", c.name, w.watcher, got)
			}
		}
	}
	if got := string(filterQueries([]byte("$ \x1b[6n"))); got != "$ " {
		t.Errorf("history ending in a query: %q", got)
	}
	if got := string(filterQueries([]byte("$ \x1b[1;3"))); got != "$ \x1b[1;3" {
		t.Errorf("history cut in a sequence keeps it for the next write: %q", got)
	}
}

func bytesOneByOne(s string) [][]byte {
	out := make([][]byte, len(s))
	for i := range s {
		out[i] = []byte{s[i]}
	}
	return out
}

// What a proctor's terminal may never be sent, whatever the person's shell writes: a string
// sequence's introducer, or a query.
var proctorNever = regexp.MustCompile(`\x1b[\]P_^XZ]|\x1b\[[0-9;?>=<]*[nc]|\x1b\[[0-9;?>=<]*t`)

// FuzzTermFilter: whatever the output and however it is cut, a proctor is sent nothing of
// proctorNever, the output is the same cut or whole, and the filter holds no more than maxHeld.
func FuzzTermFilter(f *testing.F) {
	for _, c := range termCases {
		f.Add([]byte(c.in), uint16(len(c.in)/2))
	}
	f.Add([]byte("\x1b\x1b]]\x1b[[6n\x1bP\x1b\\\x1b[6\x1b]52;c;?\x07"), uint16(3))
	f.Fuzz(func(t *testing.T, in []byte, cut uint16) {
		k := int(cut) % (len(in) + 1)
		for _, watcher := range []bool{false, true} {
			whole := filterAll(watcher, in)
			ff := newTermFilter(watcher)
			out := ff.Write(nil, in[:k])
			if len(ff.held) > maxHeld {
				t.Fatalf("holds %d bytes", len(ff.held))
			}
			out = ff.Write(out, in[k:])
			if !bytes.Equal(whole, out) {
				t.Fatalf("watcher %v: cut at %d gives %q, whole %q", watcher, k, out, whole)
			}
			if watcher && proctorNever.Match(whole) {
				t.Fatalf("a proctor is sent %q of %q", proctorNever.Find(whole), in)
			}
		}
	})
}
