package grader

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/sealrun/sealrun/report"
)

// No answer is lost (issue 28), in grading and validation alike (both read a bundle's answers the
// same way): a bundle that knows every answer is graded again and again by three runs at once.
// Every question must pass and the bits phase must read every span (8 bits a byte exactly): a
// lost or cut answer line shows as a crash, a malformed answer or a missing bits figure.
func TestNoAnswerLost(t *testing.T) {
	const envs, rounds = 3, 4
	var wg sync.WaitGroup
	for i := 0; i < envs; i++ {
		e := testEnv(t, 5*time.Second)
		ex := synthExam(t, t.TempDir(), uint64(40+i), 40)
		truth := map[string]string{}
		for _, q := range ex.Questions {
			truth[base64.StdEncoding.EncodeToString(q.Prefix)] = string(q.Answer)
		}
		tj, _ := json.Marshal(truth)
		file := pyBundle(t, `import json, base64
TRUE = {k: v.encode() for k, v in json.load(open("truth.json")).items()}
def answer(seq, prefix, n):
    return TRUE[base64.b64encode(prefix).decode()]`, map[string]string{"truth.json": string(tj)})
		want := bytes.Repeat([]byte("1"), len(ex.Questions))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				res := grade(t, e, file, ex, 2*time.Minute)
				if !bytes.Equal(res.Answers.Vector, want) || res.Answers.Count()[report.Pass] != len(want) {
					t.Errorf("env %d round %d: vector %s, outcomes %v (%s)", i, r, res.Answers.Vector, res.Answers.Count(), res.Answers.FirstNote)
				}
				if res.BitsPerByte == nil || *res.BitsPerByte != 8 {
					t.Errorf("env %d round %d: bits per byte %v (%s)", i, r, res.BitsPerByte, res.BitsNote)
				}
			}
		}()
	}
	wg.Wait()
}
