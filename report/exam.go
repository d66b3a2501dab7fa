// Package report is report.json, the one format of a run's result report (grader/REPORT.md): an
// exam run's (Exam) and a task run's (Task), as the grader writes them and the daemon, the
// client's gather, the metrics and sealrun grade read them. Portable: it imports nothing that
// runs containers.
package report

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/policy"
)

// PassVector is the result of hidden grading, one ASCII '1' (exact match) or '0' per question
// in exam order. Its hash is what the attestation carries (attest/PREDICATE.md).
type PassVector []byte

// SHA256 is the lowercase hex SHA-256 of the vector's bytes: `printf %s 0110… | sha256sum`.
func (v PassVector) SHA256() digest.Hex { return digest.SumHex(v) }

// Passed counts the '1's.
func (v PassVector) Passed() int { return bytes.Count(v, []byte{'1'}) }

// Outcome is why a question passed or failed. Only the counts are published (report.json); the
// per-question outcomes stay in the run's private grading log.
type Outcome string

// The outcomes of one question.
const (
	Pass        Outcome = "pass"
	Wrong       Outcome = "wrong"        // answered with the right length, different bytes
	WrongLength Outcome = "wrong_length" // answered with another number of bytes
	Malformed   Outcome = "malformed"    // a line that is not a valid response
	Timeout     Outcome = "timeout"      // no answer within the per-question limit
	Crash       Outcome = "crash"        // the entrypoint exited while the question was open
	NotRun      Outcome = "not_run"      // grading time or restarts ran out before it
)

// ExamFormat is the version of report.json (grader/REPORT.md).
const ExamFormat = "sealrun-report/v1"

// Exam is report.json: what the attestation's report subject binds. Everything in it is safe
// to publish: counts and hashes, never a question, an answer, or the bundle's own output.
type Exam struct {
	Format    string          `json:"format"`
	Track     Track           `json:"track"`
	Exam      ExamInfo        `json:"exam"`
	Candidate Candidate       `json:"candidate"`
	Status    outcome.Outcome `json:"status"`
	Reason    string          `json:"reason"`
	Score     Score           `json:"score"`
	// Families: per-family scores when the operator has the family labels, else empty.
	Families         map[string]Score `json:"families"`
	PassVector       string           `json:"pass_vector"`
	PassVectorSHA256 digest.Hex       `json:"pass_vector_sha256"`
	Outcomes         map[Outcome]int  `json:"outcomes"`
	BitsPerByte      *float64         `json:"bits_per_byte"`
	BitsPerByteNote  string           `json:"bits_per_byte_note"`
	Device           string           `json:"device"`
	GraderImage      string           `json:"grader_image"`
	Limits           Limits           `json:"limits"`
	Timings          Timings          `json:"timings"`
	Restarts         Restarts         `json:"restarts"`
	HistoryHead      string           `json:"history_head"`
	// Usage is the run's model use and cost (added by the daemon once the run has ended).
	Usage *policy.Usage `json:"usage,omitempty"`
}

// Track names the track the bundle was graded under.
type Track struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Version string `json:"version"`
}

// ExamInfo is the exam's hash and shape.
type ExamInfo struct {
	SHA256       digest.Hex `json:"sha256"`
	Questions    int        `json:"questions"`
	ContextBytes int        `json:"context_bytes"`
}

// Candidate is the graded bundle ("" id when no candidate was promoted).
type Candidate struct {
	ID   digest.Digest `json:"id"` // sha256:<hex> of the .tar.gz, or ""
	Size int64         `json:"size"`
}

// Score is exact matches out of questions.
type Score struct {
	Questions int     `json:"questions"`
	Passed    int     `json:"passed"`
	Percent   float64 `json:"percent"`
}

// Limits are the grading limits applied.
type Limits struct {
	Grading     string `json:"grading"`
	Question    string `json:"question"`
	MaxRestarts int    `json:"max_restarts"`
}

// Timings are wall-clock milliseconds.
type Timings struct {
	AnswersMS       int64   `json:"answers_ms"`      // phase 1, container starts included
	BitsMS          int64   `json:"bits_ms"`         // phase 2
	QuestionP50MS   float64 `json:"question_p50_ms"` // one answer, as the harness saw it
	QuestionMaxMS   float64 `json:"question_max_ms"`
	EntrypointLoads int     `json:"entrypoint_loads"` // containers started across both phases
}

// Restarts count entrypoint restarts per phase.
type Restarts struct {
	Answers int `json:"answers"`
	Bits    int `json:"bits"`
}

// NewScore is passed out of questions with its percent.
func NewScore(passed, questions int) Score {
	s := Score{Questions: questions, Passed: passed}
	if questions > 0 {
		s.Percent = 100 * float64(passed) / float64(questions)
	}
	return s
}

// FamilyScores groups a pass vector by family labels (question id -> family); questions
// without a label count under "unlabelled".
func FamilyScores(ids []string, v PassVector, families map[string]string) map[string]Score {
	out := map[string]Score{}
	if len(families) == 0 {
		return out
	}
	for i, id := range ids {
		f := families[id]
		if f == "" {
			f = "unlabelled"
		}
		s := out[f]
		s.Questions++
		if i < len(v) && v[i] == '1' {
			s.Passed++
		}
		out[f] = s
	}
	for f, s := range out {
		out[f] = NewScore(s.Passed, s.Questions)
	}
	return out
}

// WriteExam writes r as indented JSON, atomically (temp file, fsync, rename, fsync dir), and
// returns the file's sha256 (the attestation's report subject).
func WriteExam(path string, r *Exam) (string, error) {
	if r.Families == nil {
		r.Families = map[string]Score{}
	}
	if r.Outcomes == nil {
		r.Outcomes = map[Outcome]int{}
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	data = append(data, '\n')
	if err := fileio.WriteAtomic(path, 0o644, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
		return "", fmt.Errorf("write report: %w", err)
	}
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:]), nil
}

// DiffVectors lists the questions (1-based index and id) where two pass vectors differ, for a
// regrade that does not match.
func DiffVectors(ids []string, want, got PassVector) []string {
	var out []string
	for i := 0; i < max(len(want), len(got)); i++ {
		var a, b byte = '-', '-'
		if i < len(want) {
			a = want[i]
		}
		if i < len(got) {
			b = got[i]
		}
		if a != b {
			id := ""
			if i < len(ids) {
				id = ids[i]
			}
			out = append(out, fmt.Sprintf("question %d (%s): attested %c, regraded %c", i+1, id, a, b))
		}
	}
	return out
}
