package transcript_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/transcript"
)

// TestHumanRunTranscript: a human run's recording segments and attaches are events of its
// transcript, each segment's body checked like any (intact, altered, missing, withheld), the
// transcript valid against the schema, hostile terminal bytes data in the page.
func TestHumanRunTranscript(t *testing.T) {
	r := newRun(t)
	r.Record(audit.KindAttach, audit.Attach{Time: start.Add(time.Second), Offset: "0s", Event: "attach", User: "alice (uid 1000, pid 7)"})
	rec, err := controller.NewRecording(r.Dir, r.Log(), start, 80, 24, "r-test", 0)
	if err != nil {
		t.Fatal(err)
	}
	rec.Input([]byte("ls\r"), start.Add(2*time.Second))
	hostile := "\x1b]52;c;ZXZpbA==\x07</script><script>alert(1)</script>\xff"
	rec.Output([]byte(hostile), start.Add(3*time.Second))
	rec.Flush()
	rec.Output([]byte("second segment\n"), start.Add(10*time.Second))
	if err := rec.Close(start.Add(11 * time.Second)); err != nil {
		t.Fatal(err)
	}
	r.Record(audit.KindAttach, audit.Attach{Time: start.Add(12 * time.Second), Offset: "12s", Event: "detach", User: "alice (uid 1000, pid 7)", Reason: "detached"})

	tr, err := transcript.Build(r.Dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var segs []*transcript.Terminal
	for _, e := range tr.Events {
		kinds = append(kinds, e.Kind)
		if e.Terminal != nil {
			segs = append(segs, e.Terminal)
			if e.At != int64(e.Terminal.To*1000) {
				t.Errorf("segment %d at %d ms, its last event at %.3f s", e.Terminal.Segment, e.At, e.Terminal.To)
			}
		}
	}
	if got := strings.Join(kinds, ","); got != "attach,terminal,terminal,detach" && got != "attach,terminal,terminal,attach" {
		t.Errorf("events %s", got)
	}
	if len(segs) != 2 || segs[0].Body.State != transcript.BodyIntact || segs[1].Body.State != transcript.BodyIntact || segs[0].InputBytes != 3 || tr.Bodies.Intact != 2 {
		t.Fatalf("segments %+v, bodies %+v", segs, tr.Bodies)
	}
	j, _ := transcript.Marshal(tr)
	c := jsonschema.NewCompiler()
	schema, err := c.Compile("transcript.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err := schema.Validate(inst); err != nil {
		t.Errorf("a human run's transcript does not validate: %v", err)
	}
	var page bytes.Buffer
	if err := transcript.Render(&page, tr, transcript.PageOptions{}); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(page.Bytes(), []byte("<script>alert(1)")) {
		t.Error("the page carries the recording's markup as markup")
	}
	if d := os.Getenv("SEALRUN_EXPORT_DIR"); d != "" { // for a look by hand
		os.WriteFile(filepath.Join(d, "human-transcript.html"), page.Bytes(), 0o644)
	}

	// A segment edited, one gone, one withheld: each named.
	seg1 := filepath.Join(r.Dir, audit.TerminalSegmentPath(1))
	os.WriteFile(seg1, []byte("not gzip"), 0o644)
	os.Remove(filepath.Join(r.Dir, audit.TerminalSegmentPath(2)))
	tr, err = transcript.Build(r.Dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Bodies.Altered != 1 || tr.Bodies.Missing != 1 {
		t.Errorf("an edited and a removed segment: bodies %+v", tr.Bodies)
	}
	tr, _ = transcript.Build(r.Dir, header(), transcript.Options{Withheld: map[string]bool{audit.TerminalSegmentPath(1): true, audit.TerminalSegmentPath(2): true}})
	if tr.Bodies.Withheld != 2 {
		t.Errorf("withheld segments: bodies %+v", tr.Bodies)
	}
	refs, err := transcript.BodyRefs(bytes.NewReader(mustReadFile(t, filepath.Join(r.Dir, "audit.jsonl"))))
	if err != nil || len(refs) != 2 || refs[1].APIName != "terminal-2" || refs[1].Path != audit.TerminalSegmentPath(2) {
		t.Errorf("body refs %+v, %v", refs, err)
	}
}
