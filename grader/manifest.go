package grader

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Protocol is the version of the bundle format and the line protocol (grader/PROTOCOL.md).
const Protocol = "sealrun-bundle/v1"

// ManifestName is the file at the top of every bundle that names its entrypoint.
const ManifestName = "sealrun-bundle.json"

// MaxManifestBytes bounds sealrun-bundle.json.
const MaxManifestBytes = 64 << 10

// Manifest is a validated sealrun-bundle.json.
type Manifest struct {
	Protocol   string   `json:"protocol"`
	Entrypoint []string `json:"entrypoint"`
}

// interpreters are the programs whose first argument, when it is a relative path, names a file
// of the bundle: ["python3", "predict.py"] checks that predict.py is in the bundle.
var interpreters = map[string]bool{"python3": true, "python": true, "sh": true, "bash": true}

// BundleError is a bundle that breaks a rule of grader/PROTOCOL.md: the agent's (or the
// bundle author's) fault, never the host's. Path is the file inside the bundle ("" for the
// whole bundle).
type BundleError struct {
	Path string
	Rule string
}

func (e *BundleError) Error() string {
	if e.Path == "" {
		return "bundle: " + e.Rule
	}
	return "bundle " + e.Path + ": " + e.Rule
}

func bundleErr(p, format string, args ...any) *BundleError {
	return &BundleError{Path: p, Rule: fmt.Sprintf(format, args...)}
}

// ParseManifest reads and checks sealrun-bundle.json: a JSON object with exactly the keys
// "protocol" (Protocol) and "entrypoint" (1 to 64 non-empty arguments without NUL bytes or
// control characters, each at most 4096 bytes, argv[0] a bundle file given as a relative path
// such as "./predict" or a bare program name of the grader image).
func ParseManifest(r io.Reader) (*Manifest, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxManifestBytes+1))
	if err != nil {
		return nil, bundleErr(ManifestName, "cannot read: %v", err)
	}
	if len(data) > MaxManifestBytes {
		return nil, bundleErr(ManifestName, "is over %d bytes; it holds only the protocol and the entrypoint", MaxManifestBytes)
	}
	if !utf8.Valid(data) {
		return nil, bundleErr(ManifestName, "is not UTF-8 text")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, bundleErr(ManifestName, "is not a JSON object {\"protocol\": %q, \"entrypoint\": [\"python3\", \"predict.py\"]}: %v", Protocol, err)
	}
	if dec.More() {
		return nil, bundleErr(ManifestName, "has data after the JSON object; it must hold exactly one object")
	}
	if err := checkDuplicateKeys(data); err != nil {
		return nil, bundleErr(ManifestName, "%v", err)
	}
	if m.Protocol != Protocol {
		return nil, bundleErr(ManifestName, "protocol is %q; this grader speaks %q (set \"protocol\": %q)", m.Protocol, Protocol, Protocol)
	}
	if len(m.Entrypoint) == 0 || len(m.Entrypoint) > 64 {
		return nil, bundleErr(ManifestName, "entrypoint has %d arguments; give 1 to 64, for example [\"python3\", \"predict.py\"]", len(m.Entrypoint))
	}
	for i, a := range m.Entrypoint {
		switch {
		case a == "":
			return nil, bundleErr(ManifestName, "entrypoint[%d] is empty", i)
		case len(a) > 4096:
			return nil, bundleErr(ManifestName, "entrypoint[%d] is %d bytes; at most 4096", i, len(a))
		case strings.IndexFunc(a, unicode.IsControl) >= 0:
			return nil, bundleErr(ManifestName, "entrypoint[%d] %q has a control character or NUL byte", i, a)
		}
	}
	if p := m.Entrypoint[0]; path.IsAbs(p) {
		return nil, bundleErr(ManifestName, "entrypoint[0] %q is absolute; name a bundle file as a relative path (\"./predict\") or a program of the grader image by its bare name (\"python3\")", p)
	}
	// A bundle file the entrypoint names is inside the bundle (found by make fuzz: "../run"
	// passed here and was refused only later, when the files were checked).
	for _, f := range m.BundleFiles() {
		if f == ".." || strings.HasPrefix(f, "../") {
			return nil, bundleErr(ManifestName, "entrypoint names %q, which is outside the bundle; name files of the bundle relative to its top (\"./predict\", \"predict.py\")", f)
		}
	}
	return &m, nil
}

// BundleFiles are the files the entrypoint needs from the bundle: argv[0] when it is a path
// ("./predict", "bin/predict"), and an interpreter's script ("predict.py" in
// ["python3", "predict.py"]). Names are cleaned and relative to the bundle.
func (m *Manifest) BundleFiles() []string {
	var files []string
	a0 := m.Entrypoint[0]
	if strings.Contains(a0, "/") {
		files = append(files, path.Clean(a0))
	} else if interpreters[a0] && len(m.Entrypoint) > 1 {
		if s := m.Entrypoint[1]; !strings.HasPrefix(s, "-") && !path.IsAbs(s) {
			files = append(files, path.Clean(s))
		}
	}
	return files
}

// Program is the bare program name the grader image must provide ("" when argv[0] is a bundle
// file).
func (m *Manifest) Program() string {
	if strings.Contains(m.Entrypoint[0], "/") {
		return ""
	}
	return m.Entrypoint[0]
}

// checkDuplicateKeys refuses an object that repeats a key: encoding/json keeps the last, and a
// manifest must mean one thing.
func checkDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		k, _ := t.(string)
		if seen[k] {
			return fmt.Errorf("key %q appears twice", k)
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return nil
}
