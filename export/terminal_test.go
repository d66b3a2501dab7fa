package export

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/export/exporttest"
	"github.com/sealrun/sealrun/transcript"
	"github.com/sealrun/sealrun/transcript/transcripttest"
)

// TestHumanRunExport: a human run exports with the person's steps as ATIF user steps (the lines
// they typed, their line editing applied; what the terminal showed as the observation, escape
// sequences left out), by each format's rules; a segment not in the transcript says why.
func TestHumanRunExport(t *testing.T) {
	r, err := transcripttest.New(t.TempDir(), start)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Record(audit.KindAttach, audit.Attach{Time: start.Add(time.Second), Offset: "0s", Event: "attach", User: "alice"})
	rec, err := controller.NewRecording(r.Dir, r.Log(), start, 80, 24, "r-human", 0)
	if err != nil {
		t.Fatal(err)
	}
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	rec.Output([]byte("\x1b[1m[sealrun] ~ $ \x1b[0m"), at(1))
	rec.Input([]byte("runner pyth"), at(2))
	rec.Input([]byte("\x1b[A\x7f\x7fthon3 train.py --stepz\x7fs 10\r"), at(3)) // an arrow key (history: dropped), backspaces
	rec.Output([]byte("step 1 \x1b[32mloss 2.1\x1b[0m\r\n\x1b]0;title\x07done\r\n"), at(4))
	rec.Flush()
	rec.Input([]byte("runner finalize\r"), at(9))
	if err := rec.Close(at(10)); err != nil {
		t.Fatal(err)
	}
	run := transcript.Run{ID: "r-human", Track: "ari", Agent: "human/alice", Scaffold: "scripted-demo 1.0.0", Seed: 1, State: "failed", Started: start}
	tr, err := transcript.Build(r.Dir, run, transcript.Options{Withheld: map[string]bool{audit.TerminalSegmentPath(2): true}})
	if err != nil {
		t.Fatal(err)
	}
	tj := mustMarshal(t, tr)
	src := SourceOf(tj, tr, "v-test")
	a, err := ATIF(tr, src)
	if err != nil {
		t.Fatal(err)
	}
	if d := os.Getenv("SEALRUN_EXPORT_DIR"); d != "" {
		os.WriteFile(filepath.Join(d, "atif-human.json"), a, 0o644)
	}
	got := exporttest.ATIFRules(t, a)
	if ag := got["agent"].(map[string]any); ag["name"] != "human" || ag["model_name"] != nil {
		t.Errorf("agent %v; want a person, no model", ag)
	}
	var user []map[string]any
	for _, sv := range got["steps"].([]any) {
		if s := sv.(map[string]any); s["source"] == "user" {
			user = append(user, s)
		}
	}
	if len(user) != 2 {
		t.Fatalf("%d user steps; want the two segments", len(user))
	}
	if m := user[0]["message"]; m != "runner python3 train.py --steps 10" {
		t.Errorf("typed %q; want the line as edited", m)
	}
	obs := user[0]["observation"].(map[string]any)["results"].([]any)[0].(map[string]any)["content"].(string)
	if !strings.Contains(obs, "step 1 loss 2.1\ndone") || strings.ContainsAny(obs, "\x1b\x07\r") || strings.Contains(obs, "title") {
		t.Errorf("the observation %q; want the text shown, escape sequences out", obs)
	}
	if m := user[1]["message"].(string); !strings.Contains(m, "not in the transcript (withheld)") || strings.Contains(m, "finalize") {
		t.Errorf("a withheld segment's step: %q", m)
	}
	i, err := Inspect([]Run{{T: tr, Src: src}})
	if err != nil {
		t.Fatal(err)
	}
	exporttest.InspectRules(t, i)
}
