package grader

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseManifest(t *testing.T) {
	good := `{"protocol": "sealrun-bundle/v1", "entrypoint": ["python3", "predict.py"]}`
	m, err := ParseManifest(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if m.Program() != "python3" || !reflect.DeepEqual(m.BundleFiles(), []string{"predict.py"}) {
		t.Errorf("program %q files %v", m.Program(), m.BundleFiles())
	}
	m, err = ParseManifest(strings.NewReader(`{"protocol":"sealrun-bundle/v1","entrypoint":["./bin/predict","--fast"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.Program() != "" || !reflect.DeepEqual(m.BundleFiles(), []string{"bin/predict"}) {
		t.Errorf("program %q files %v", m.Program(), m.BundleFiles())
	}

	bad := []struct{ name, in, want string }{
		{"empty", ``, "is not a JSON object"},
		{"not an object", `["python3"]`, "is not a JSON object"},
		{"unknown key", `{"protocol":"sealrun-bundle/v1","entrypoint":["x"],"weights":"a"}`, `unknown field "weights"`},
		{"duplicate key", `{"protocol":"sealrun-bundle/v1","entrypoint":["x"],"entrypoint":["y"]}`, `key "entrypoint" appears twice`},
		{"wrong protocol", `{"protocol":"sealrun-bundle/v2","entrypoint":["x"]}`, `protocol is "sealrun-bundle/v2"`},
		{"no protocol", `{"entrypoint":["x"]}`, `protocol is ""`},
		{"no entrypoint", `{"protocol":"sealrun-bundle/v1"}`, "entrypoint has 0 arguments"},
		{"entrypoint a string", `{"protocol":"sealrun-bundle/v1","entrypoint":"python3 predict.py"}`, "cannot unmarshal string"},
		{"empty argument", `{"protocol":"sealrun-bundle/v1","entrypoint":["python3",""]}`, "entrypoint[1] is empty"},
		{"NUL", `{"protocol":"sealrun-bundle/v1","entrypoint":["python3","a\u0000b"]}`, "control character or NUL"},
		{"absolute", `{"protocol":"sealrun-bundle/v1","entrypoint":["/usr/bin/python3","p.py"]}`, "is absolute"},
		{"trailing data", `{"protocol":"sealrun-bundle/v1","entrypoint":["x"]} {}`, "data after the JSON object"},
		{"too many args", `{"protocol":"sealrun-bundle/v1","entrypoint":[` + strings.Repeat(`"a",`, 64) + `"a"]}`, "entrypoint has 65 arguments"},
		{"oversized", `{"protocol":"sealrun-bundle/v1","entrypoint":["` + strings.Repeat("a", MaxManifestBytes) + `"]}`, "is over 65536 bytes"},
		{"not UTF-8", "{\"protocol\":\"sealrun-bundle/v1\",\"entrypoint\":[\"\xff\"]}", "is not UTF-8"},
	}
	for _, c := range bad {
		_, err := ParseManifest(strings.NewReader(c.in))
		var be *BundleError
		if !errors.As(err, &be) || be.Path != ManifestName || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v; want a BundleError on %s containing %q", c.name, err, ManifestName, c.want)
		}
	}
}
