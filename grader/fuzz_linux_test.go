package grader

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParseManifest: any sealrun-bundle.json either parses to a manifest of the protocol with an
// entrypoint within the rules, or is refused; never a panic.
func FuzzParseManifest(f *testing.F) {
	for _, s := range []string{
		`{"protocol": "sealrun-bundle/v1", "entrypoint": ["python3", "predict.py"]}`,
		`{"protocol": "sealrun-bundle/v1", "entrypoint": ["/bin/sh"]}`,
		`{"protocol": "sealrun-bundle/v1", "entrypoint": ["./run", "../x"]}`,
		`{"protocol": "sealrun-bundle/v1", "entrypoint": ["python3", "../x.py"]}`,
		`{"protocol": "sealrun-bundle/v1", "entrypoint": ["../run"]}`,
		`{"protocol": "sealrun-bundle/v1", "protocol": "x", "entrypoint": ["a"]}`,
		`{"protocol": "sealrun-bundle/v1", "entrypoint": []}`, `{}`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(bytes.NewReader(data))
		if err != nil {
			return
		}
		if m.Protocol != Protocol || len(m.Entrypoint) == 0 || (m.Program() == "") == (len(m.BundleFiles()) == 0) && m.Program() == "" {
			t.Fatalf("accepted manifest %+v", m)
		}
		for _, f := range m.BundleFiles() {
			if f == ".." || strings.HasPrefix(f, "../") || strings.HasPrefix(f, "/") {
				t.Fatalf("accepted a bundle file outside the bundle: %q", f)
			}
		}
		for _, a := range m.Entrypoint {
			if a == "" {
				t.Fatalf("accepted an empty argument: %q", m.Entrypoint)
			}
		}
		if m.Entrypoint[0][0] == '/' {
			t.Fatalf("accepted an absolute program %q", m.Entrypoint[0])
		}
	})
}

// FuzzParseResponse: whatever line a bundle prints, the harness either reads one response object
// with known keys or calls the line malformed; never a panic.
func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		`{"ready": true, "protocol": "sealrun-bundle/v1"}`, `{"seq": 1, "output_b64": "YQ=="}`, `{"seq": 2, "bits": 1.5}`,
		`{"seq": 1}{"seq": 2}`, `{"seq": "1"}`, `{"bits": 1e999}`, `{"extra": 1}`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := parseResponse(line)
		if err != nil {
			return
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("a parsed response does not encode: %v", err)
		}
	})
}
