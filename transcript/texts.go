package transcript

// What an audit record says in words: the one place each text is written, for the transcript's
// events, report.html and the daemon's live activity lines. Texts a published page already
// carries (report.html's, which a verifier makes again byte for byte) keep their words.

import (
	"fmt"
	"strings"
	"time"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/digest"
)

// callText is a compute call in words: its argv (as the reader shows it) and its length d.
func callText(e *audit.Call, argv string, d time.Duration) string {
	return fmt.Sprintf("call %d: %s — %s, exit %d, %s", e.Call, argv, e.Status, e.Exit, d)
}

func submitText(e *audit.Submit) string { return "submitted " + e.Candidate.Short() }

func refusedText(e *audit.SubmitRefused) string {
	return fmt.Sprintf("submission of %s refused: %s", e.Dir, e.Reason)
}

func validationText(e *audit.Validation) string {
	return fmt.Sprintf("validation of %s: %d/%d", e.Candidate.Short(), deref(e.Passed), e.Questions)
}

func promoteText(candidate digest.Digest) string { return "promoted " + candidate.Short() }

func finalizeText(e *audit.Finalize) string {
	if e.Candidate == "" {
		return "finalized"
	}
	return "finalized, " + promoteText(e.Candidate)
}

// maxActivityArgv is how much of a call's argv an activity line shows.
const maxActivityArgv = 60

// Activity is one line for a follower of a run about its audit entry of kind (line is the whole
// entry), or "" for an entry a follower is not shown.
func Activity(kind string, line []byte) string {
	rec, err := audit.Decode(kind, line)
	if err != nil || rec == nil {
		return ""
	}
	switch e := rec.(type) {
	case *audit.Call:
		argv := strings.Join(e.Argv, " ")
		if len(argv) > maxActivityArgv {
			argv = strings.ToValidUTF8(argv[:maxActivityArgv], "") + "…"
		}
		return callText(e, argv, e.End.Sub(e.Start).Round(100*time.Millisecond))
	case *audit.Gateway:
		s := fmt.Sprintf("model request %d %s: %d in %d ms, %d+%d tokens", e.Request, e.Path, e.Status, e.LatencyMS, e.Usage.Prompt, e.Usage.Completion)
		if len(e.Tries) > 1 {
			s += fmt.Sprintf(" (%d tries)", len(e.Tries))
		}
		return s
	case *audit.Submit:
		return submitText(e)
	case *audit.SubmitRefused:
		return refusedText(e)
	case *audit.Validation:
		return validationText(e)
	case *audit.Promote:
		return promoteText(e.Candidate)
	case *audit.Finalize:
		return finalizeText(e)
	}
	return ""
}
