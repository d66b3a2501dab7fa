package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/transcript"
	"github.com/sealrun/sealrun/transcript/transcripttest"
)

// Inspect puts the samples into the log itself (json.Marshal would validate and copy each
// again): the bytes are exactly json.Marshal's of the whole log, HTML-escaped text and several
// runs included.
func TestInspectIsMarshalsBytes(t *testing.T) {
	var runs []Run
	for seed := 1; seed <= 3; seed++ {
		r, err := transcripttest.New(t.TempDir(), start)
		if err != nil {
			t.Fatal(err)
		}
		if err := transcripttest.Conversation(r, 4, 300, 120, func(i int) string {
			return fmt.Sprintf("<script>alert(%d)</script> & \u2028 \"quoted\" turn %d\n", seed, i)
		}); err != nil {
			t.Fatal(err)
		}
		r.Entry(audit.KindSealed, map[string]any{"passed": seed, "questions": 12, "score": 8.3 * float64(seed)})
		r.Close()
		run := transcript.Run{ID: fmt.Sprintf("r-splice-%d", seed), Track: "ari", TrackVersion: "1", TrackID: strings.Repeat("cd", 32), Agent: "openai/gpt-x@high",
			Scaffold: "codex 0.98.0", Seed: int64(seed), State: "graded", Started: start, Finished: start.Add(50 * time.Minute)}
		tj, tt := written(t, r.Dir, run)
		runs = append(runs, Run{T: tt, Src: SourceOf(tj, tt, "v-splice")})
	}
	got, err := Inspect(runs)
	if err != nil {
		t.Fatal(err)
	}
	log, err := inspectLogOf(runs)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(log)
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("Inspect's log differs from json.Marshal's at byte %d of %d/%d", i, len(got), len(want))
	}
	if !bytes.Contains(got, []byte(`\u003cscript\u003e`)) {
		t.Error("the samples' text is not HTML-escaped as json.Marshal escapes it")
	}
}
