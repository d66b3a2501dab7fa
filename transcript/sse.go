package transcript

import (
	"bytes"
	"errors"
)

// eachEvent calls f with each event of a server-sent event stream (the WHATWG format: lines of
// "field: value", an event ended by a blank line, its data lines joined by "\n"), skipping
// comments and OpenAI's closing "[DONE]". A stream cut mid-event still gives what arrived of
// it. It fails only when the body holds no event at all.
func eachEvent(body []byte, f func(event string, data []byte)) error {
	var event string
	var data [][]byte
	n := 0
	dispatch := func() {
		if len(data) > 0 {
			d := bytes.Join(data, []byte("\n"))
			if !bytes.Equal(d, []byte("[DONE]")) {
				f(event, d)
				n++
			}
		}
		event, data = "", nil
	}
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			dispatch()
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			event = string(value)
		case "data":
			data = append(data, value)
		}
	}
	dispatch()
	if n == 0 {
		return errors.New("the stream holds no event")
	}
	return nil
}
