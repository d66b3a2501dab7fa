package attest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./attest -update creates it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./attest -update to accept):\n%s", name, got)
	}
}

func sign(t *testing.T, st *Statement, key string) []byte {
	t.Helper()
	env, err := Sign(context.Background(), st, signer(t, key))
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// reason returns the verdict reason of err, or fails the test when err is not a verdict.
func reason(t *testing.T, err error) Reason {
	t.Helper()
	var vf *VerificationFailure
	if !errors.As(err, &vf) {
		t.Fatalf("error %v is not a *VerificationFailure", err)
	}
	return vf.Reason
}

func TestSignVerifyRoundTrip(t *testing.T) {
	for _, key := range []string{"ed25519", "ecdsa"} {
		t.Run(key, func(t *testing.T) {
			st, bundle := fixture(t, 50, 500)
			env := sign(t, st, key)
			got, err := Verify(env, verifier(t, key), WithBundleDigest(bundle), WithReportDigest(sum("report")),
				WithAuditLog(strings.NewReader(auditLog(500))), WithTrack(loadTrack(t)))
			if err != nil {
				t.Fatal(err)
			}
			if got.Statement.Predicate.Result.Passed != 75 || len(got.Statement.Predicate.Submissions.History) != 50 {
				t.Errorf("predicate = %+v", got.Statement.Predicate.Result)
			}
			canon, _ := st.Canonical()
			if !bytes.Equal(got.Payload, canon) {
				t.Error("verified payload is not the canonical statement")
			}
			want := []string{"envelope", "one signature", "payload type", "signature", "statement type", "predicate type", "bundle.tar.gz digest", "report.json digest", "subjects", "audit log", "predicate consistency", "track"}
			if strings.Join(got.Checks, ",") != strings.Join(want, ",") {
				t.Errorf("checks = %v", got.Checks)
			}
		})
	}
}

// Golden statement and envelope: fixed clock, fixed ed25519 key (deterministic signatures).
func TestGolden(t *testing.T) {
	st, _ := fixture(t, 3, 5)
	canon, err := st.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	var pretty bytes.Buffer
	json.Indent(&pretty, canon, "", "  ")
	pretty.WriteByte('\n')
	golden(t, "statement.golden.json", pretty.Bytes())
	golden(t, "envelope.golden.json", sign(t, st, "ed25519"))
	// The committed golden envelope verifies.
	env, _ := os.ReadFile(filepath.Join("testdata", "envelope.golden.json"))
	if _, err := Verify(env, verifier(t, "ed25519")); err != nil {
		t.Errorf("golden envelope: %v", err)
	}
}

// resign signs arbitrary payload bytes with the test key, bypassing Sign's checks, as an
// attacker or a buggy tool could.
func resign(t *testing.T, payloadType string, payload []byte) []byte {
	t.Helper()
	env, err := dsse.WrapSigner(signer(t, "ed25519"), payloadType).SignMessage(bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// mutate decodes the envelope, applies f, and re-encodes it.
func mutate(t *testing.T, env []byte, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(env, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTamperingEveryByte(t *testing.T) {
	st, _ := fixture(t, 2, 3)
	env := sign(t, st, "ed25519")
	v := verifier(t, "ed25519")
	o := openEnvelope(t, env)
	payload, sig := o.payload, o.sig
	flip := func(b []byte, i int) string {
		c := bytes.Clone(b)
		c[i] ^= 0xff
		return base64.StdEncoding.EncodeToString(c)
	}
	for i := range payload {
		bad := mutate(t, env, func(m map[string]any) { m["payload"] = flip(payload, i) })
		if _, err := Verify(bad, v); reason(t, err) != ReasonSignature {
			t.Fatalf("payload byte %d flipped: reason %v, want signature", i, err)
		}
	}
	for i := range sig {
		bad := mutate(t, env, func(m map[string]any) {
			m["signatures"].([]any)[0].(map[string]any)["sig"] = flip(sig, i)
		})
		if _, err := Verify(bad, v); reason(t, err) != ReasonSignature {
			t.Fatalf("signature byte %d flipped: reason %v, want signature", i, err)
		}
	}
	t.Logf("%d payload and %d signature byte flips all rejected", len(payload), len(sig))
}

func TestTamperingCases(t *testing.T) {
	st, _ := fixture(t, 2, 3)
	env := sign(t, st, "ed25519")
	v := verifier(t, "ed25519")
	canon, _ := st.Canonical()
	restated := func(f func(m map[string]any)) []byte {
		var m map[string]any
		json.Unmarshal(canon, &m)
		f(m)
		b, _ := json.Marshal(m)
		return resign(t, PayloadType, b)
	}
	sigObj := func(m map[string]any) map[string]any { return m["signatures"].([]any)[0].(map[string]any) }
	big := bytes.Repeat([]byte(" "), 100<<20)
	tests := []struct {
		name string
		env  []byte
		want Reason
	}{
		{"100 MB envelope", big, ReasonEnvelopeSize},
		{"truncated", env[:len(env)/2], ReasonEnvelopeSyntax},
		{"empty", nil, ReasonEnvelopeSyntax},
		{"not json", []byte("hello"), ReasonEnvelopeSyntax},
		{"array", []byte("[]"), ReasonEnvelopeSyntax},
		{"no payloadType", mutate(t, env, func(m map[string]any) { delete(m, "payloadType") }), ReasonEnvelopeSyntax},
		{"no payload", mutate(t, env, func(m map[string]any) { delete(m, "payload") }), ReasonEnvelopeSyntax},
		{"unpadded base64 payload", mutate(t, env, func(m map[string]any) {
			b := canon
			if len(b)%3 == 0 {
				b = append(bytes.Clone(b), ' ')
			}
			m["payload"] = base64.RawStdEncoding.EncodeToString(b)
		}), ReasonEnvelopeSyntax},
		{"base64 payload broken by a newline", mutate(t, env, func(m map[string]any) {
			p := m["payload"].(string)
			m["payload"] = p[:40] + "\r\n" + p[40:]
		}), ReasonEnvelopeSyntax},
		{"base64 sig broken by a newline", mutate(t, env, func(m map[string]any) {
			s := sigObj(m)["sig"].(string)
			sigObj(m)["sig"] = s[:20] + "\n" + s[20:]
		}), ReasonEnvelopeSyntax},
		{"url base64 payload", mutate(t, env, func(m map[string]any) {
			m["payload"] = base64.URLEncoding.EncodeToString(append([]byte{0xfb, 0xff}, canon...))
		}), ReasonEnvelopeSyntax},
		{"non-canonical trailing bits", mutate(t, env, func(m map[string]any) {
			s := sigObj(m)["sig"].(string) // 64-byte sig: "...==", last char before == carries unused bits
			i := strings.Index(s, "=") - 1
			sigObj(m)["sig"] = s[:i] + string(rune(s[i]+1)) + s[i+1:]
		}), ReasonEnvelopeSyntax},
		{"duplicate payload key", []byte(strings.Replace(string(env), `"payloadType"`, `"payload": "eA==", "payloadType"`, 1)), ReasonEnvelopeSyntax},
		{"missing signature", mutate(t, env, func(m map[string]any) { m["signatures"] = []any{} }), ReasonSignatureCount},
		{"null signatures", mutate(t, env, func(m map[string]any) { m["signatures"] = nil }), ReasonSignatureCount},
		{"two signatures", mutate(t, env, func(m map[string]any) {
			m["signatures"] = append(m["signatures"].([]any), m["signatures"].([]any)[0])
		}), ReasonSignatureCount},
		{"swapped payloadType", mutate(t, env, func(m map[string]any) { m["payloadType"] = "application/json" }), ReasonPayloadType},
		{"signed with another payloadType", resign(t, "application/json", canon), ReasonPayloadType},
		{"wrong _type", restated(func(m map[string]any) { m["_type"] = "https://in-toto.io/Statement/v0.1" }), ReasonStatementType},
		{"payload not json", resign(t, PayloadType, []byte("not a statement")), ReasonStatementType},
		{"unknown predicate type", restated(func(m map[string]any) { m["predicateType"] = "https://slsa.dev/provenance/v1" }), ReasonPredicateType},
		{"missing predicate type", restated(func(m map[string]any) { delete(m, "predicateType") }), ReasonPredicateType},
		{"no report subject", restated(func(m map[string]any) { m["subject"] = m["subject"].([]any)[:1] }), ReasonSubject},
		{"unknown predicate field", restated(func(m map[string]any) { m["predicate"].(map[string]any)["bonus"] = 1 }), ReasonPredicate},
		{"score not matching passed", restated(func(m map[string]any) {
			m["predicate"].(map[string]any)["result"].(map[string]any)["score"] = 99.0
		}), ReasonPredicate},
		{"history chain broken", restated(func(m map[string]any) {
			h := m["predicate"].(map[string]any)["submissions"].(map[string]any)["history"].([]any)
			h[0].(map[string]any)["validation_score"] = 100.0
		}), ReasonPredicate},
		{"failed without reason", restated(func(m map[string]any) {
			m["predicate"].(map[string]any)["result"].(map[string]any)["status"] = "failed"
		}), ReasonPredicate},
		{"timeline out of order", restated(func(m map[string]any) {
			m["predicate"].(map[string]any)["timeline"].(map[string]any)["queued"] = "2027-01-01T00:00:00Z"
		}), ReasonPredicate},
		{"bad run id", restated(func(m map[string]any) {
			m["predicate"].(map[string]any)["run"].(map[string]any)["id"] = "../x"
		}), ReasonPredicate},
		{"rerun of itself", restated(func(m map[string]any) {
			r := m["predicate"].(map[string]any)["run"].(map[string]any)
			r["rerun_of"] = r["id"]
		}), ReasonPredicate},
		{"no seeds required", restated(func(m map[string]any) {
			m["predicate"].(map[string]any)["track"].(map[string]any)["seeds_required"] = 0
		}), ReasonPredicate},
		{"no run", restated(func(m map[string]any) { delete(m["predicate"].(map[string]any), "run") }), ReasonPredicate},
		{"finished after grading limit", restated(func(m map[string]any) {
			m["predicate"].(map[string]any)["timeline"].(map[string]any)["finished"] = "2026-11-21T14:00:00Z"
		}), ReasonPredicate},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Verify(tc.env, v)
			if got := reason(t, err); got != tc.want {
				t.Errorf("reason %s, want %s (%v)", got, tc.want, err)
			}
		})
	}
	t.Run("wrong key", func(t *testing.T) {
		_, err := Verify(env, verifier(t, "ecdsa"))
		if reason(t, err) != ReasonSignature {
			t.Errorf("got %v", err)
		}
	})
}

func TestVerifyAgainstFiles(t *testing.T) {
	st, bundle := fixture(t, 5, 20)
	env := sign(t, st, "ed25519")
	v := verifier(t, "ed25519")
	tr := loadTrack(t)
	withdrawn := *tr
	withdrawn.Status = "withdrawn"
	other := *tr
	other.ID = sum("another track")
	repinned := *tr
	repinned.Exam.SHA256 = digest.Hex(sum("another exam"))
	tests := []struct {
		name string
		opt  VerifyOption
		want Reason // "" valid
	}{
		{"bundle ok", WithBundleDigest(bundle), ""},
		{"bundle differs", WithBundleDigest(sum("other bundle")), ReasonSubject},
		{"report differs", WithReportDigest(sum("other report")), ReasonSubject},
		{"audit ok", WithAuditLog(strings.NewReader(auditLog(20))), ""},
		{"audit shorter", WithAuditLog(strings.NewReader(auditLog(19))), ReasonAudit},
		{"audit edited", WithAuditLog(strings.NewReader(strings.Replace(auditLog(20), `"exit":0`, `"exit":1`, 1))), ReasonAudit},
		{"audit truncated line", WithAuditLog(strings.NewReader(strings.TrimSuffix(auditLog(20), "\n"))), ReasonAudit},
		{"track ok", WithTrack(tr), ""},
		{"track other id", WithTrack(&other), ReasonTrack},
		{"track pin differs", WithTrack(&repinned), ReasonTrack},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Verify(env, v, tc.opt)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if got := reason(t, err); got != tc.want {
				t.Errorf("reason %s, want %s (%v)", got, tc.want, err)
			}
		})
	}
	// A withdrawn track: the id changes with the status, so pin the predicate to it, and check
	// that the verdict is valid but warns.
	withdrawn.ID = tr.ID
	got, err := Verify(env, v, WithTrack(&withdrawn))
	if err != nil || len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0], "withdrawn") {
		t.Errorf("withdrawn: %v %v", err, got)
	}
}

func TestSignRefusesInconsistent(t *testing.T) {
	st, _ := fixture(t, 2, 3)
	st.Predicate.Result.Score = 12
	if _, err := Sign(context.Background(), st, signer(t, "ed25519")); err == nil || !strings.Contains(err.Error(), "result.score") {
		t.Errorf("Sign = %v", err)
	}
}

func TestFailedAndInvalidRuns(t *testing.T) {
	for _, status := range []outcome.Outcome{outcome.Failed, outcome.Invalid} {
		st, _ := fixture(t, 2, 3)
		st.Subject = st.Subject[1:] // no graded bundle
		st.Predicate.Result = Result{Status: status, Reason: "no promoted candidate at the deadline", Questions: 100}
		if status == outcome.Invalid {
			st.Predicate.AirGap.Containers = nil // the run never proved its air gap
			st.Predicate.Timeline.Finished = st.Predicate.Timeline.Deadline.Add(48 * 3600e9)
		}
		env := sign(t, st, "ed25519")
		if _, err := Verify(env, verifier(t, "ed25519")); err != nil {
			t.Errorf("%s: %v", status, err)
		}
	}
}

// The air-gap evidence is judged with the same rule the network hook enforced: a graded run
// whose runner had a default route, a second link or an address beyond loopback is refused.
func TestSignRefusesBrokenAirGap(t *testing.T) {
	for name, mutate := range map[string]func(c *AirGapContainer){
		"default route":        func(c *AirGapContainer) { c.Routes = append(c.Routes, "default via 10.0.0.1 dev lo") },
		"extra link":           func(c *AirGapContainer) { c.Links = append(c.Links, "eth1 (veth, up)") },
		"address beyond lo":    func(c *AirGapContainer) { c.Addresses = append(c.Addresses, "192.168.1.5/24 lo") },
		"IPv6 address":         func(c *AirGapContainer) { c.Addresses = append(c.Addresses, "::1/128 lo") },
		"controller-only link": func(c *AirGapContainer) { c.Links = []string{"eth0 (veth, up)", "lo (device, up)"} },
	} {
		st, _ := fixture(t, 2, 3)
		mutate(&st.Predicate.AirGap.Containers[1]) // the runner
		if _, err := Sign(context.Background(), st, signer(t, "ed25519")); err == nil || !strings.Contains(err.Error(), "air_gap.containers[1]") || !strings.Contains(err.Error(), "runner netns") {
			t.Errorf("%s: Sign = %v; want a refusal naming air_gap.containers[1]", name, err)
		}
	}
}

// A human run's pauses: signed and verified where the track allows them and the deadline moved
// by them; refused where they break a rule, each naming its field.
func TestPauses(t *testing.T) {
	paused := func(edit func(p *Predicate)) *Statement {
		st, _ := fixture(t, 2, 3)
		p := st.Predicate
		p.Budget.Pauses = "15m0s"
		s := p.Timeline.Started
		p.Timeline.Pauses = []Pause{
			{Start: s.Add(5 * time.Minute), End: s.Add(9 * time.Minute), By: "root", Reason: "fire alarm"},
			{Start: s.Add(20 * time.Minute), End: s.Add(30 * time.Minute), By: "root", Reason: "the person's laptop died"},
		}
		p.Timeline.Deadline = p.Timeline.Deadline.Add(14 * time.Minute)
		p.Timeline.Finished = p.Timeline.Finished.Add(14 * time.Minute)
		if edit != nil {
			edit(p)
		}
		return st
	}
	env := sign(t, paused(nil), "ed25519")
	if _, err := Verify(env, verifier(t, "ed25519")); err != nil {
		t.Fatalf("a run with two pauses: %v", err)
	}
	for _, c := range []struct {
		name, want string
		edit       func(p *Predicate)
	}{
		{"no allowance", "budget.pauses", func(p *Predicate) { p.Budget.Pauses = "" }},
		{"deadline not moved", "timeline.deadline", func(p *Predicate) { p.Timeline.Deadline = p.Timeline.Deadline.Add(-14 * time.Minute) }},
		{"over the allowance", "more than budget.pauses", func(p *Predicate) { p.Budget.Pauses = "10m0s" }},
		{"overlapping", "timeline.pauses[1].start", func(p *Predicate) { p.Timeline.Pauses[1].Start = p.Timeline.Pauses[0].Start.Add(time.Minute) }},
		{"ends before it starts", "timeline.pauses[0].end", func(p *Predicate) { p.Timeline.Pauses[0].End = p.Timeline.Pauses[0].Start.Add(-time.Second) }},
		{"before the run", "timeline.pauses[0].start", func(p *Predicate) { p.Timeline.Pauses[0].Start = p.Timeline.Started.Add(-time.Second) }},
		{"no reason", "timeline.pauses[0]", func(p *Predicate) { p.Timeline.Pauses[0].Reason = " " }},
	} {
		_, err := Sign(context.Background(), paused(c.edit), signer(t, "ed25519"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Sign = %v, want %s", c.name, err, c.want)
		}
	}
}

// A human run's people: signed and verified as the daemon writes them; refused where a rule
// breaks, each naming its field.
func TestHumanPeople(t *testing.T) {
	const key = "SHA256:" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	people := func(edit func(p *Predicate)) *Statement {
		st, _ := fixture(t, 2, 3)
		p := st.Predicate
		p.Agent.Model = "human/bob"
		s := p.Timeline.Started
		p.Human = &Human{Person: Person{Account: "bob"}, Proctors: []string{"carol"}, Attaches: []HumanAttach{
			{Account: "bob (uid 1001)", Role: "person", Start: s, End: s.Add(10 * time.Minute)},
			{Account: "carol (uid 1003)", Role: "proctor", Watch: true, Start: s.Add(time.Minute), End: s.Add(5 * time.Minute)},
			{Account: "root (uid 0)", Role: "operator", Takeover: "fire drill", Start: s.Add(10 * time.Minute), End: s.Add(11 * time.Minute)},
			{Account: "root (uid 0)", Role: "operator", Watch: true, Start: s.Add(12 * time.Minute), End: s.Add(13 * time.Minute)},
		}}
		if edit != nil {
			edit(p)
		}
		return st
	}
	env := sign(t, people(nil), "ed25519")
	v, err := Verify(env, verifier(t, "ed25519"))
	if err != nil || v.Statement.Predicate.Human == nil || len(v.Statement.Predicate.Human.Attaches) != 4 {
		t.Fatalf("a human run with its people: %v", err)
	}
	// A person attaching in a loop: 256 of theirs listed, the rest counted, and the operator's
	// take-over after them listed still.
	if _, err := Verify(sign(t, people(func(p *Predicate) {
		first, op := p.Human.Attaches[0], p.Human.Attaches[2]
		p.Human.Attaches = p.Human.Attaches[:0]
		for range MaxHumanAttaches {
			p.Human.Attaches = append(p.Human.Attaches, first)
		}
		p.Human.Attaches = append(p.Human.Attaches, op)
		p.Human.AttachesOmitted = 1000
	}), "ed25519"), verifier(t, "ed25519")); err != nil {
		t.Fatalf("256 of the person's, the rest counted, then a take-over: %v", err)
	}
	if _, err := Verify(sign(t, people(func(p *Predicate) {
		p.Human.Person.Key = key
		p.Human.Attaches[0].Key = key
	}), "ed25519"), verifier(t, "ed25519")); err != nil {
		t.Fatalf("a person bound to a key: %v", err)
	}
	for _, c := range []struct {
		name, want string
		edit       func(p *Predicate)
	}{
		{"an agent's run", "human: an agent's run", func(p *Predicate) { p.Agent.Model = "openai/gpt-x" }},
		{"a hostile person", "human.person.account", func(p *Predicate) { p.Human.Person.Account = "bob\x1b]52;c;AAAA\x07" }},
		{"a bad key", "human.person.key", func(p *Predicate) { p.Human.Person.Key = "MD5:00" }},
		{"a hostile proctor", "human.proctors[0]", func(p *Predicate) { p.Human.Proctors[0] = "<script>" }},
		{"an account with text after it", "human.attaches[1].account", func(p *Predicate) { p.Human.Attaches[1].Account = "carol (uid 1003) \x1b[2J" }},
		{"an unknown role", "human.attaches[1].role", func(p *Predicate) { p.Human.Attaches[1].Role = "admin" }},
		{"someone else as the person", "not the run's person", func(p *Predicate) { p.Human.Attaches[0].Account = "alice (uid 1002)" }},
		{"the person with another key", "not the run's person", func(p *Predicate) { p.Human.Person.Key = key }},
		{"a proctor not named", "not one of the run's proctors", func(p *Predicate) { p.Human.Proctors = []string{"dave"} }},
		{"a proctor typing", "not one of the run's proctors", func(p *Predicate) { p.Human.Attaches[1].Watch = false }},
		{"a take-over without a reason", "without saying why", func(p *Predicate) { p.Human.Attaches[2].Takeover = "" }},
		{"a proctor's take-over", "human.attaches[1].takeover", func(p *Predicate) { p.Human.Attaches[1].Takeover = "mine" }},
		{"a reason on two lines", "human.attaches[2].takeover", func(p *Predicate) { p.Human.Attaches[2].Takeover = "a\nb" }},
		{"before the run", "human.attaches[0]", func(p *Predicate) { p.Human.Attaches[0].Start = p.Timeline.Queued.Add(-time.Second) }},
		{"after the run", "human.attaches[0]", func(p *Predicate) { p.Human.Attaches[0].End = p.Timeline.Finished.Add(time.Second) }},
		{"ends before it starts", "human.attaches[3]", func(p *Predicate) { p.Human.Attaches[3].End = p.Human.Attaches[3].Start.Add(-time.Second) }},
		{"omitted before the list is full", "human.attaches", func(p *Predicate) { p.Human.AttachesOmitted = 3 }},
		{"more of the person's than listed", "human.attaches", func(p *Predicate) {
			for range MaxHumanAttaches {
				p.Human.Attaches = append(p.Human.Attaches, p.Human.Attaches[0])
			}
		}},
	} {
		_, err := Sign(context.Background(), people(c.edit), signer(t, "ed25519"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Sign = %v, want %s", c.name, err, c.want)
		}
	}
}
