package leaderboard

import (
	"testing"

	"github.com/sealrun/sealrun/attest"
)

// TestPeopleOf: a human run's row details say who it was for and who attached, as what.
func TestPeopleOf(t *testing.T) {
	if got := peopleOf(nil); got != "" {
		t.Errorf("an agent's run: %q", got)
	}
	h := &attest.Human{Person: attest.Person{Account: "bob"}, Attaches: []attest.HumanAttach{
		{Account: "bob (uid 1001)", Role: "person"},
		{Account: "carol (uid 1003)", Role: "proctor", Watch: true},
		{Account: "bob (uid 1001)", Role: "person"},
		{Account: "root (uid 0)", Role: "operator", Takeover: "fire drill"},
	}, AttachesOmitted: 0}
	want := "for bob; attached: bob (person) 2×, carol (proctor) 1×, root (operator, took the terminal over: fire drill) 1×"
	if got := peopleOf(h); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := peopleOf(&attest.Human{Person: attest.Person{Account: "p", Key: "SHA256:k"}}); got != "for p (key SHA256:k); no one attached" {
		t.Errorf("no one attached: %q", got)
	}
}
