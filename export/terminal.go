package export

import (
	"encoding/json"
	"regexp"
	"strings"
)

// A human run's recording (its terminal segments, as transcript.json carries them) read as what
// a person typed and what the terminal showed them: the typed lines with their line editing
// applied (backspace), escape sequences and other control characters left out of both.

var (
	escapes  = regexp.MustCompile(`\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[PX^_][^\x1b]*(\x1b\\)?|[()*+#%].|[@-Z\\-_])`)
	controls = regexp.MustCompile(`[\x00-\x08\x0b-\x1f\x7f]`)
)

// castText is the typed lines and the shown text of one segment's asciicast lines.
func castText(cast string) (typed []string, shown string) {
	var in, out strings.Builder
	for _, line := range strings.Split(cast, "\n") {
		if !strings.HasPrefix(line, "[") {
			continue // the header, or nothing
		}
		var ev []any
		if json.Unmarshal([]byte(line), &ev) != nil || len(ev) != 3 {
			continue
		}
		code, _ := ev[1].(string)
		data, _ := ev[2].(string)
		switch code {
		case "i":
			in.WriteString(data)
		case "o":
			out.WriteString(data)
		}
	}
	// What was typed, a line at a time, as the line editor took it: an escape sequence (an arrow
	// key) is dropped, a backspace takes back the character before it.
	var cur []rune
	for _, r := range escapes.ReplaceAllString(in.String(), "") {
		switch {
		case r == '\r' || r == '\n':
			if s := strings.TrimSpace(string(cur)); s != "" {
				typed = append(typed, s)
			}
			cur = cur[:0]
		case r == 0x7f || r == '\b':
			if len(cur) > 0 {
				cur = cur[:len(cur)-1]
			}
		case r == 0x15: // ^U: the line is dropped
			cur = cur[:0]
		case r < 0x20:
		default:
			cur = append(cur, r)
		}
	}
	if s := strings.TrimSpace(string(cur)); s != "" {
		typed = append(typed, s)
	}
	shown = escapes.ReplaceAllString(out.String(), "")
	shown = strings.ReplaceAll(shown, "\r\n", "\n")
	shown = controls.ReplaceAllStringFunc(shown, func(c string) string {
		if c == "\r" {
			return "\n"
		}
		return ""
	})
	return typed, shown
}
