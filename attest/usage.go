package attest

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/policy"
)

// EntryTokens reads a gateway audit entry's tokens; ok is false for any other entry.
func EntryTokens(line []byte) (t policy.Tokens, ok bool) {
	var e struct {
		Kind  string      `json:"kind"`
		Usage audit.Usage `json:"usage"`
	}
	if json.Unmarshal(line, &e) != nil || e.Kind != audit.KindGateway {
		return policy.Tokens{}, false
	}
	return e.Usage.Tokens(), true
}

// UsageFromAudit sums a run's model use from its audit log: every gateway entry is a request, and
// its tokens are added; the cost is the sum's at price, when there is one. It also returns the
// log's head and entry count, as audit.Head does.
func UsageFromAudit(r io.Reader, price *policy.Price) (u *Usage, head string, entries int, err error) {
	f, err := ReadAudit(r, price)
	if err != nil {
		return nil, "", 0, err
	}
	return f.Usage, f.Head, f.Entries, nil
}

// AuditFacts are what a run's audit log says that its attestation repeats: the model use, and
// for a human run every terminal attached (Attaches: in order, from its attach or watch record to
// its detach or unwatch, End zero while none came), with the log's head and entry count.
type AuditFacts struct {
	Usage    *Usage
	Attaches []HumanAttach
	Head     string
	Entries  int
}

// ReadAudit reads a run's audit log once for its AuditFacts; price, when given, prices the use.
func ReadAudit(r io.Reader, price *policy.Price) (*AuditFacts, error) {
	f := &AuditFacts{Usage: &Usage{}}
	type conn struct {
		user  string
		watch bool
	}
	open := map[conn][]int{} // the attaches not yet ended, by who and how
	var err error
	f.Head, f.Entries, err = audit.Scan(r, func(line []byte) {
		if t, ok := EntryTokens(line); ok {
			f.Usage.Requests++
			f.Usage.Tokens.Add(t)
			return
		}
		e, ok := attachEntry(line)
		if !ok {
			return
		}
		switch e.Event {
		case audit.AttachStart, audit.AttachWatch:
			if a, ok := parseAttach(e); ok {
				k := conn{e.User, a.Watch}
				open[k] = append(open[k], len(f.Attaches))
				f.Attaches = append(f.Attaches, a)
			}
		case audit.AttachEnd, audit.AttachUnwatch:
			k := conn{e.User, e.Event == audit.AttachUnwatch}
			if q := open[k]; len(q) > 0 {
				f.Attaches[q[0]].End = e.Time.UTC()
				open[k] = q[1:]
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if price != nil {
		f.Usage.Cost = &Cost{Amount: price.Cost(f.Usage.Tokens), Price: *price}
	}
	return f, nil
}

// ListAttaches is what an attestation lists of a run's attaches (AuditFacts.Attaches): the first
// MaxHumanAttaches of the person's and of everyone else's (a person attaching in a loop never
// pushes an operator's take-over or a proctor out), each still open ending at finished, and how
// many more there were.
func ListAttaches(all []HumanAttach, finished time.Time) (listed []HumanAttach, omitted int) {
	listed = []HumanAttach{}
	persons, others := 0, 0
	for _, a := range all {
		n := &others
		if a.Role == RolePerson {
			n = &persons
		}
		if *n >= MaxHumanAttaches {
			omitted++
			continue
		}
		*n++
		if a.End.IsZero() {
			a.End = finished.UTC()
		}
		listed = append(listed, a)
	}
	return listed, omitted
}

// How sealrund names an attach's role at the end of its audit record's user ("bob (uid 1001, pid
// 42), the person"); an operator's take-over has its reason after it.
const takeoverPhrase = ", an operator taking the terminal over: "

var roleSuffixes = []struct{ suffix, role string }{
	{", the person", RolePerson}, {", a proctor", RoleProctor}, {", an operator", RoleOperator},
}

// AttachUser is an attach record's user as sealrund writes it and parseAttach reads it: who (the
// peer, "bob (uid 1001, pid 42)"), the ssh key it said it logged in with, its role and an
// operator's reason for taking the terminal over.
func AttachUser(who, key, role, takeover string) string {
	if key != "" {
		who += " with key " + key
	}
	if role == RoleOperator && takeover != "" {
		return who + takeoverPhrase + takeover
	}
	for _, r := range roleSuffixes {
		if r.role == role {
			return who + r.suffix
		}
	}
	return who
}

// ValidAccount and ValidKeyFingerprint say whether a string is a unix account's name as a run
// names it, and an ssh key's SHA256 fingerprint as ssh-keygen -lf prints it.
func ValidAccount(name string) bool      { return accountRe.MatchString(name) }
func ValidKeyFingerprint(fp string) bool { return keyFPRe.MatchString(fp) }

// attachEntry reads an audit entry of kind attach.
func attachEntry(line []byte) (e audit.Attach, ok bool) {
	var k struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(line, &k) != nil || k.Kind != audit.KindAttach || json.Unmarshal(line, &e) != nil {
		return e, false
	}
	return e, true
}

// parseAttach reads the record that begins an attach (attach, or watch) as sealrund writes it for
// a run whose people are bound: the account ("name (uid N)"), the key, the role and an operator's
// reason from its user ("bob (uid 1001, pid 42) with key SHA256:..., the person"), and its time;
// ok is false for a record of another form (a run attested before people were bound).
func parseAttach(e audit.Attach) (a HumanAttach, ok bool) {
	a.Watch, a.Start = e.Event == audit.AttachWatch, e.Time.UTC()
	who := e.User
	if i := strings.Index(who, takeoverPhrase); i >= 0 { // the reason is last, and may say anything
		a.Role, a.Takeover, who = RoleOperator, who[i+len(takeoverPhrase):], who[:i]
	} else {
		for _, r := range roleSuffixes {
			if w, found := strings.CutSuffix(who, r.suffix); found {
				a.Role, who = r.role, w
				break
			}
		}
	}
	if a.Role == "" {
		return a, false
	}
	if who, a.Key, ok = strings.Cut(who, " with key "); !ok {
		a.Key = ""
	}
	// "name (uid N, pid P)" names the account "name (uid N)"
	name, rest, _ := strings.Cut(who, " (uid ")
	uid, _, _ := strings.Cut(rest, ",")
	a.Account = name + " (uid " + uid + ")"
	return a, true
}

// checkHumanAgainstAudit checks the attestation's attaches against its audit log's: the list is
// what ListAttaches makes of the log's (the same accounts, keys, roles, reasons and times, in
// order), and the omitted count is theirs.
func checkHumanAgainstAudit(h *Human, logged []HumanAttach, finished time.Time) error {
	if h == nil {
		return nil
	}
	want, omitted := ListAttaches(logged, finished)
	for i, a := range h.Attaches {
		if i >= len(want) {
			return failf(ReasonAudit, "human.attaches[%d] (%s as %s) is not among the attaches of the run's audit log (it has %d)", i, a.Account, a.Role, len(logged))
		}
		w := want[i]
		if !a.Start.Equal(w.Start) || !a.End.Equal(w.End) {
			return failf(ReasonAudit, "human.attaches[%d] (%s as %s) is from %s to %s; the run's audit log says %s to %s", i, a.Account, a.Role, a.Start.Format(time.RFC3339Nano), a.End.Format(time.RFC3339Nano), w.Start.Format(time.RFC3339Nano), w.End.Format(time.RFC3339Nano))
		}
		a.Start, a.End = w.Start, w.End
		if a != w {
			return failf(ReasonAudit, "human.attaches[%d] (%s as %s) is not the run's audit log's attach %d (%s as %s)", i, a.Account, a.Role, i, w.Account, w.Role)
		}
	}
	if len(h.Attaches) != len(want) || h.AttachesOmitted != omitted {
		return failf(ReasonAudit, "the attestation accounts for %d attaches (%d listed, %d omitted); the run's audit log has %d (%d listed, %d omitted)", len(h.Attaches)+h.AttachesOmitted, len(h.Attaches), h.AttachesOmitted, len(logged), len(want), omitted)
	}
	return nil
}

// checkUsageAgainstAudit checks that the attested usage is the audit log's.
func checkUsageAgainstAudit(att, got *Usage) error {
	if att == nil {
		return nil
	}
	if att.Requests != got.Requests || att.Tokens != got.Tokens {
		return failf(ReasonAudit, "the attestation says the run made %d model requests using %s; its audit log's gateway entries add up to %d using %s",
			att.Requests, tokensText(att.Tokens), got.Requests, tokensText(got.Tokens))
	}
	return nil
}

func tokensText(t policy.Tokens) string {
	return fmt.Sprintf("%d input (%d cached, %d cache writes), %d output (%d reasoning) tokens", t.Input, t.CachedInput, t.CacheWrite, t.Output, t.Reasoning)
}
