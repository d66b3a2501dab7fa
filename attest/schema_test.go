package attest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/sealrun/sealrun/outcome"
)

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	s, err := c.Compile(filepath.Join("predicate.schema.json"))
	if err != nil {
		t.Fatalf("compile predicate.schema.json: %v", err)
	}
	return s
}

// The predicates sealrun signs validate against the published schema, and the schema is not
// vacuous: a broken predicate does not.
func TestPredicateSchema(t *testing.T) {
	schema := compileSchema(t)
	for _, n := range []int{0, 3, 50} {
		st, _ := fixture(t, n, 10)
		if n == 0 {
			st.Subject = st.Subject[1:]
			st.Predicate.Result = Result{Status: outcome.Failed, Reason: "no promoted candidate", Questions: 100}
		}
		canon, err := st.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		var doc struct{ Predicate json.RawMessage }
		json.Unmarshal(canon, &doc)
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc.Predicate))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(inst); err != nil {
			t.Errorf("%d candidates: %v", n, err)
		}
	}
	golden, err := os.ReadFile(filepath.Join("testdata", "statement.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	json.Unmarshal(golden, &doc)
	pred := doc["predicate"].(map[string]any)
	pred["result"].(map[string]any)["status"] = "excellent"
	if err := schema.Validate(pred); err == nil {
		t.Error("schema accepted status \"excellent\"")
	}
}
