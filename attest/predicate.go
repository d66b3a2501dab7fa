package attest

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sealrun/sealrun/airgap"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/policy"
)

// runIDRE is a run id as the daemon makes them.
var runIDRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

// ValidRunID says whether id has the shape of a run id (run.id, run.rerun_of).
func ValidRunID(id string) bool { return runIDRE.MatchString(id) }

// CheckPredicate checks that a predicate is internally consistent and agrees with its subjects:
// the rules of attest/PREDICATE.md, "Consistency". It returns a *VerificationFailure with reason
// "predicate" naming the first rule broken.
func CheckPredicate(p *Predicate, subjects []Subject) error {
	if err := checkIdentity(p); err != nil {
		return err
	}
	dur, err := checkBudget(p)
	if err != nil {
		return err
	}
	// The result agrees with its subjects.
	r := p.Result
	if p.Task != nil {
		if err := checkTaskResult(r, subjects); err != nil {
			return err
		}
	} else if err := checkExamResult(p, r, subjects); err != nil {
		return err
	}
	if err := checkTimeline(p, dur); err != nil {
		return err
	}
	if err := checkSubmissions(p, subjects); err != nil {
		return err
	}
	if err := checkAirGap(p); err != nil {
		return err
	}
	if err := checkBuild(p.Build); err != nil {
		return err
	}
	if err := checkUsage(p); err != nil {
		return err
	}
	if err := checkHuman(p); err != nil {
		return err
	}
	if err := checkTPM(p); err != nil {
		return err
	}
	if p.Audit.Entries < 0 {
		return bad("audit.entries", "is negative")
	}
	return nil
}

var (
	accountRe     = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
	peerAccountRe = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31} \(uid [0-9]{1,10}\)$`)
	keyFPRe       = regexp.MustCompile(`^SHA256:[A-Za-z0-9+/]{43}$`)
)

// checkHuman checks a human run's people: only a human run has them; the person an account
// (and a key's fingerprint); every attach by a role, within the run's timeline; the person's
// attaches the person's account (and key); a terminal taken by no one else but an operator who
// said why.
func checkHuman(p *Predicate) error {
	h := p.Human
	if h == nil {
		return nil // an agent's run, or a human run attested before people were bound to runs
	}
	if !strings.HasPrefix(p.Agent.Model, "human/") {
		return bad("human", "an agent's run (%s) has no person", p.Agent.Model)
	}
	if !accountRe.MatchString(h.Person.Account) {
		return bad("human.person.account", "%.40q is not an account name", h.Person.Account)
	}
	if h.Person.Key != "" && !keyFPRe.MatchString(h.Person.Key) {
		return bad("human.person.key", "%.60q is not an ssh key's SHA256 fingerprint", h.Person.Key)
	}
	if len(h.Proctors) > 16 {
		return bad("human.proctors", "%d proctors; at most 16", len(h.Proctors))
	}
	for i, a := range h.Proctors {
		if !accountRe.MatchString(a) {
			return bad(fmt.Sprintf("human.proctors[%d]", i), "%.40q is not an account name", a)
		}
	}
	persons := 0
	for _, a := range h.Attaches {
		if a.Role == RolePerson {
			persons++
		}
	}
	others := len(h.Attaches) - persons
	if persons > MaxHumanAttaches || others > MaxHumanAttaches || h.AttachesOmitted < 0 || h.AttachesOmitted > 0 && persons < MaxHumanAttaches && others < MaxHumanAttaches {
		return bad("human.attaches", "%d of the person's and %d of others listed, %d omitted; the first %d of each are listed, then only counted", persons, others, h.AttachesOmitted, MaxHumanAttaches)
	}
	tl := p.Timeline
	for i, a := range h.Attaches {
		field := fmt.Sprintf("human.attaches[%d]", i)
		name, _, _ := strings.Cut(a.Account, " (")
		switch {
		case !peerAccountRe.MatchString(a.Account):
			return bad(field+".account", "%.60q is not an account as the host names a peer (\"name (uid N)\")", a.Account)
		case len(a.Takeover) > 300 || strings.ContainsFunc(a.Takeover, unicode.IsControl) || !utf8.ValidString(a.Takeover):
			return bad(field+".takeover", "is not one line of at most 300 bytes of text")
		case a.Key != "" && !keyFPRe.MatchString(a.Key):
			return bad(field+".key", "%.60q is not an ssh key's SHA256 fingerprint", a.Key)
		case !slices.Contains(HumanRoles, a.Role):
			return bad(field+".role", "%.20q is not one of %s", a.Role, strings.Join(HumanRoles, ", "))
		case a.End.Before(a.Start) || a.Start.Before(tl.Queued) || a.End.After(tl.Finished):
			return bad(field, "from %s to %s, not within the run (queued %s, finished %s)", a.Start.Format(time.RFC3339), a.End.Format(time.RFC3339), tl.Queued.Format(time.RFC3339), tl.Finished.Format(time.RFC3339))
		case a.Role == "person" && (name != h.Person.Account || h.Person.Key != "" && a.Key != h.Person.Key):
			return bad(field, "attached as the person, but %s is not the run's person (%s)", a.Account, h.Person.Account)
		case a.Role == "proctor" && !(a.Watch && slices.Contains(h.Proctors, name)):
			return bad(field, "attached as a proctor, but %s is not one of the run's proctors, or took the terminal", a.Account)
		case a.Takeover != "" && (a.Role != "operator" || a.Watch):
			return bad(field+".takeover", "only an operator takes the terminal over")
		case a.Role == "operator" && !a.Watch && a.Takeover == "":
			return bad(field, "an operator took the terminal without saying why (takeover)")
		}
	}
	return nil
}

// bad is the failure of one rule of CheckPredicate: the field and what is wrong with it.
func bad(field, format string, args ...any) error {
	return failf(ReasonPredicate, "%s: %s", field, fmt.Sprintf(format, args...))
}

// checkIdentity checks what names the run: the hashes and pins of its track, exam, kit or task,
// images, scaffold and agent, its seed and its run id. It is long because it is one rule per field,
// in attest/PREDICATE.md's order.
func checkIdentity(p *Predicate) error {
	hexes := []struct{ field, v string }{
		{"track.id", p.Track.ID}, {"scaffold.config_sha256", string(p.Scaffold.ConfigSHA256)}, {"audit.head", p.Audit.Head}, {"submissions.head", p.Submissions.Head},
	}
	if p.Task == nil {
		hexes = append(hexes, struct{ field, v string }{"exam.sha256", string(p.Exam.SHA256)}, struct{ field, v string }{"kit.sha256", string(p.Kit.SHA256)})
	} else {
		if p.Exam != (ExamInfo{}) || p.Kit != (KitInfo{}) {
			return bad("task", "a task run has no exam and no kit")
		}
		if p.Task.Kind != policy.TaskAIRS {
			return bad("task.kind", "%q is not %q", p.Task.Kind, policy.TaskAIRS)
		}
		for _, s := range []struct{ field, v string }{{"task.name", p.Task.Name}, {"task.metric", p.Task.Metric}} {
			if strings.TrimSpace(s.v) == "" {
				return bad(s.field, "is empty")
			}
		}
		for _, f := range []struct {
			field string
			v     float64
		}{{"task.sota_score", p.Task.SOTA}, {"task.optimal_score", p.Task.Optimal}, {"task.estimated_worst_score", deref(p.Task.Worst)}} {
			if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
				return bad(f.field, "is %v; expected a finite number", f.v)
			}
		}
		hexes = append(hexes, struct{ field, v string }{"task.sha256", string(p.Task.SHA256)}, struct{ field, v string }{"task.data_sha256", string(p.Task.DataSHA256)})
	}
	for _, h := range hexes {
		if !digest.IsHex(h.v) {
			return bad(h.field, "%q is not 64 lowercase hex", h.v)
		}
	}
	for _, s := range []struct{ field, v string }{{"track.name", p.Track.Name}, {"track.version", p.Track.Version}, {"scaffold.name", p.Scaffold.Name}, {"scaffold.version", p.Scaffold.Version}, {"agent.model", p.Agent.Model}} {
		if strings.TrimSpace(s.v) == "" {
			return bad(s.field, "is empty")
		}
	}
	switch policy.Status(p.Track.Status) {
	case policy.StatusActive, policy.StatusLegacy, policy.StatusWithdrawn:
	default:
		return bad("track.status", "%q is not active, legacy or withdrawn", p.Track.Status)
	}
	for _, im := range []struct{ field, v string }{{"images.controller", p.Images.Controller}, {"images.runner", p.Images.Runner}, {"images.grader", p.Images.Grader}} {
		_, d, ok := strings.Cut(im.v, "@sha256:")
		if !ok || !digest.IsHex(d) {
			return bad(im.field, "%q is not pinned as name@sha256:<64 hex>", im.v)
		}
	}
	if p.Task == nil && p.Exam.Questions < 1 {
		return bad("exam.questions", "is %d; at least 1", p.Exam.Questions)
	}
	if p.Seed < 0 {
		return bad("seed", "is %d; seeds are >= 0", p.Seed)
	}
	if p.Track.SeedsRequired < 1 {
		return bad("track.seeds_required", "is %d; at least 1", p.Track.SeedsRequired)
	}
	if !runIDRE.MatchString(p.Run.ID) {
		return bad("run.id", "%q is not a run id (lowercase letters, digits and '-', 1 to 64, starting with a letter or digit)", p.Run.ID)
	}
	if p.Run.RerunOf != "" && (!runIDRE.MatchString(p.Run.RerunOf) || p.Run.RerunOf == p.Run.ID) {
		return bad("run.rerun_of", "%q is not another run's id", p.Run.RerunOf)
	}
	return nil
}

// checkBudget checks the track's budget and returns its durations by field.
func checkBudget(p *Predicate) (map[string]time.Duration, error) {
	dur := map[string]time.Duration{}
	for _, d := range []struct{ field, v string }{{"wall", p.Budget.Wall}, {"call_limit", p.Budget.CallLimit}, {"reserve", p.Budget.Reserve}, {"grading", p.Budget.Grading}} {
		v, err := time.ParseDuration(d.v)
		if err != nil || v <= 0 {
			return nil, bad("budget."+d.field, "%q is not a positive duration", d.v)
		}
		dur[d.field] = v
	}
	if dur["reserve"] >= dur["wall"] || dur["call_limit"] > dur["wall"]-dur["reserve"] {
		return nil, bad("budget", "reserve must be shorter than wall and call_limit at most wall - reserve")
	}
	if p.Budget.MaxGzipBytes < 1 {
		return nil, bad("budget.max_gzip_bytes", "is %d; at least 1", p.Budget.MaxGzipBytes)
	}
	if p.Budget.MaxTokens < 0 {
		return nil, bad("budget.max_tokens", "is %d; at least 1, or absent", p.Budget.MaxTokens)
	}
	if c := p.Budget.MaxCost; c != "" {
		if _, err := policy.ParseMoney(c); err != nil {
			return nil, bad("budget.max_cost", "%v", err)
		}
	}
	return dur, nil
}

// checkUsage checks the run's usage: counts that add up, and a cost that is its tokens at its
// price, in the currency of the track's cost bound.
func checkUsage(p *Predicate) error {
	u := p.Usage
	if u == nil {
		return nil
	}
	t := u.Tokens
	switch {
	case u.Requests < 0 || t.Input < 0 || t.CachedInput < 0 || t.CacheWrite < 0 || t.Output < 0 || t.Reasoning < 0:
		return bad("usage", "a count is negative")
	case t.CachedInput+t.CacheWrite > t.Input:
		return bad("usage.tokens", "cached_input %d and cache_write %d are parts of input %d, and add up to more", t.CachedInput, t.CacheWrite, t.Input)
	case t.Reasoning > t.Output:
		return bad("usage.tokens.reasoning", "%d is part of output %d, and more", t.Reasoning, t.Output)
	}
	c := u.Cost
	if c == nil {
		return nil
	}
	pr := c.Price
	if !policy.CurrencyRE.MatchString(pr.Currency) {
		return bad("usage.cost.price.currency", "%q is not a currency code", pr.Currency)
	}
	if pr.Input < 0 || pr.CachedInput < 0 || pr.CacheWrite < 0 || pr.Output < 0 {
		return bad("usage.cost.price", "a price is negative")
	}
	if want := pr.Cost(t); math.Abs(c.Amount-want) > 1e-6 {
		return bad("usage.cost.amount", "%v %s, but its tokens at its price cost %v", c.Amount, pr.Currency, want)
	}
	if m, err := policy.ParseMoney(p.Budget.MaxCost); err == nil && m.Currency != pr.Currency {
		return bad("usage.cost.price.currency", "%s, but the track bounds the cost in %s", pr.Currency, m.Currency)
	}
	return nil
}

// checkTimeline checks that the run's times are all there, in order, and within its budget.
func checkTimeline(p *Predicate, dur map[string]time.Duration) error {
	r := p.Result
	t := p.Timeline
	for _, x := range []struct {
		field string
		v     time.Time
	}{{"queued", t.Queued}, {"started", t.Started}, {"deadline", t.Deadline}, {"finished", t.Finished}} {
		if x.v.IsZero() {
			return bad("timeline."+x.field, "is missing")
		}
	}
	if t.Started.Before(t.Queued) {
		return bad("timeline", "started %s is before queued %s", t.Started.Format(time.RFC3339Nano), t.Queued.Format(time.RFC3339Nano))
	}
	if err := checkPauses(p); err != nil {
		return err
	}
	switch {
	case !t.Deadline.Equal(t.Started.Add(dur["wall"] + t.PausedFor())):
		return bad("timeline.deadline", "is %s but started + wall + the pauses (%s) is %s", t.Deadline.Format(time.RFC3339Nano), t.PausedFor(), t.Started.Add(dur["wall"]+t.PausedFor()).Format(time.RFC3339Nano))
	case t.Finished.Before(t.Started):
		return bad("timeline.finished", "is before started")
	case r.Status != outcome.Invalid && t.Finished.After(t.Deadline.Add(dur["grading"])):
		return bad("timeline.finished", "%s is after deadline + grading limit (%s)", t.Finished.Format(time.RFC3339Nano), t.Deadline.Add(dur["grading"]).Format(time.RFC3339Nano))
	}
	return nil
}

// checkPauses checks the pauses: only where the track allows them, each within the run, after
// the one before it, with its reason, and all of them within the allowance.
func checkPauses(p *Predicate) error {
	t := p.Timeline
	if len(t.Pauses) == 0 {
		return nil
	}
	allowed, err := time.ParseDuration(p.Budget.Pauses)
	if p.Budget.Pauses == "" || err != nil || allowed <= 0 {
		return bad("timeline.pauses", "the run has %d pauses but budget.pauses is %q: a track that allows pauses says how long", len(t.Pauses), p.Budget.Pauses)
	}
	prev := t.Started
	for i, x := range t.Pauses {
		field := fmt.Sprintf("timeline.pauses[%d]", i)
		switch {
		case x.Start.Before(prev) || x.Start.After(t.Finished):
			return bad(field+".start", "%s is before the run's start or the pause before it, or after the run's end", x.Start.Format(time.RFC3339Nano))
		case x.End.Before(x.Start) || x.End.After(t.Finished):
			return bad(field+".end", "%s is before its start or after the run's end", x.End.Format(time.RFC3339Nano))
		case strings.TrimSpace(x.Reason) == "" || x.By == "":
			return bad(field, "has no reason or no one who granted it")
		}
		prev = x.End
	}
	// A pause the allowance ended is ended by a timer: a second of slack for it.
	if d := t.PausedFor(); d > allowed+time.Second {
		return bad("timeline.pauses", "last %s in all, more than budget.pauses (%s)", d, allowed)
	}
	return nil
}

// checkSubmissions checks the submission history (append-only, within the run, chained to its
// head) and that a graded bundle was a promoted candidate.
func checkSubmissions(p *Predicate, subjects []Subject) error {
	r, t := p.Result, p.Timeline
	var promoted []string
	for i, s := range p.Submissions.History {
		field := fmt.Sprintf("submissions.history[%d]", i)
		d, ok := strings.CutPrefix(string(s.Digest), "sha256:")
		switch {
		case !ok || !digest.IsHex(d):
			return bad(field+".digest", "%q is not sha256:<64 lowercase hex>", s.Digest)
		case s.Size < 1 || s.Size > p.Budget.MaxGzipBytes:
			return bad(field+".size", "is %d; a candidate is 1 to max_gzip_bytes (%d) bytes", s.Size, p.Budget.MaxGzipBytes)
		case s.Time.Before(t.Started) || s.Time.After(t.Deadline):
			return bad(field+".time", "%s is outside the run (%s to %s)", s.Time.Format(time.RFC3339Nano), t.Started.Format(time.RFC3339Nano), t.Deadline.Format(time.RFC3339Nano))
		case i > 0 && s.Time.Before(p.Submissions.History[i-1].Time):
			return bad(field+".time", "is earlier than the submission before it; the history is append-only")
		case s.ValidationScore < 0 || s.ValidationScore > 100 || math.IsNaN(s.ValidationScore):
			return bad(field+".validation_score", "is %v; expected 0 to 100", s.ValidationScore)
		}
		if s.Promoted {
			promoted = append(promoted, d)
		}
	}
	head, err := HistoryHead(p.Submissions.History)
	if err != nil {
		return bad("submissions", "cannot hash the history: %v", err)
	}
	if head != p.Submissions.Head {
		return bad("submissions.head", "is %s but the history chains to %s", p.Submissions.Head, head)
	}
	if r.Status == outcome.Graded {
		b, _ := subjectDigest(subjects, SubjectBundle)
		found := false
		for _, d := range promoted {
			found = found || d == b
		}
		if !found {
			return bad("subject", "the graded bundle %s is not a promoted candidate in the submission history", b)
		}
	}
	return nil
}

// checkAirGap: a run that counts (graded or failed) must have proven its air gap.
func checkAirGap(p *Predicate) error {
	r := p.Result
	if r.Status != outcome.Invalid {
		if len(p.AirGap.Containers) == 0 {
			return bad("air_gap", "no evidence; a %s run must record each container's network namespace", r.Status)
		}
		for i, c := range p.AirGap.Containers {
			switch c.Role {
			case "controller", "runner", "grader":
			default:
				return bad(fmt.Sprintf("air_gap.containers[%d].role", i), "%q is not controller, runner or grader", c.Role)
			}
			if !c.EgressBlocked {
				return bad(fmt.Sprintf("air_gap.containers[%d]", i), "%s egress was not blocked; such a run is invalid, not %s", c.Role, r.Status)
			}
			// The same rule the network hook enforced before the container started.
			ev := airgap.Evidence{Links: c.Links, Addresses: c.Addresses, Routes: c.Routes, Names: airgap.LinkNames(c.Links)}
			if err := airgap.Check(c.Role, ev); err != nil {
				return bad(fmt.Sprintf("air_gap.containers[%d]", i), "%v; such a run is invalid, not %s", err, r.Status)
			}
		}
	}
	return nil
}

// checkBuild checks the build record, when there is one.
// checkTPM checks the tpm member: a quote's key, its PCRs (sealrund's among them) and a build
// record naming the sealrund measured; or why there is no quote; never both.
func checkTPM(p *Predicate) error {
	t := p.TPM
	switch {
	case t == nil:
		return nil
	case t.None != "":
		if t.AttestationKey != "" || len(t.PCRs) > 0 || t.SealrundPCR != 0 {
			return bad("tpm", "says both that the run has no quote (none) and what its quote is")
		}
		return nil
	case !digest.IsHex(t.AttestationKey):
		return bad("tpm.attestation_key", "%q is not 64 lowercase hex (or give none: why the run has no quote)", t.AttestationKey)
	case p.Build == nil:
		return bad("tpm", "a quote without a build record: the sealrund it measured is named nowhere")
	case len(t.PCRs) == 0 || len(t.PCRs) > 24:
		return bad("tpm.pcrs", "%d PCRs; a quote covers 1 to 24", len(t.PCRs))
	case t.SealrundPCR < 0 || t.SealrundPCR > 23:
		return bad("tpm.sealrund_pcr", "%d is not a PCR", t.SealrundPCR)
	}
	for i, n := range t.PCRs {
		if n < 0 || n > 23 || (i > 0 && n <= t.PCRs[i-1]) {
			return bad("tpm.pcrs", "%v: each 0 to 23, once, in order", t.PCRs)
		}
	}
	if !slices.Contains(t.PCRs, t.SealrundPCR) {
		return bad("tpm.pcrs", "%v leaves out %d, where sealrund measured itself", t.PCRs, t.SealrundPCR)
	}
	return nil
}

func checkBuild(b *Build) error {
	if b == nil {
		return nil
	}
	if strings.TrimSpace(b.Version) == "" || strings.TrimSpace(b.GoVersion) == "" {
		return bad("build", "version and go_version are required")
	}
	if !digest.IsHex(b.DaemonSHA256) {
		return bad("build.sealrund_sha256", "%q is not 64 lowercase hex", b.DaemonSHA256)
	}
	for i, s := range b.SeamsUsed {
		if !slices.Contains(Seams, s) {
			return bad(fmt.Sprintf("build.seams_used[%d]", i), "%q is not one of %s", s, strings.Join(Seams, ", "))
		}
	}
	if len(b.SeamsUsed) > 0 && !b.TestSeams {
		return bad("build.seams_used", "a build without test seams used %s", strings.Join(b.SeamsUsed, ", "))
	}
	if len(b.Toolchain) > 200 || strings.ContainsFunc(b.Toolchain, unicode.IsControl) {
		return bad("build.toolchain", "%q is not a compiler and library name", b.Toolchain)
	}
	for name, h := range b.Helpers {
		if !slices.Contains(Helpers, name) {
			return bad("build.helpers", "%q is not one of %s", name, strings.Join(Helpers, ", "))
		}
		if !digest.IsHex(h) {
			return bad("build.helpers."+name, "%q is not 64 lowercase hex", h)
		}
	}
	return nil
}

// Helpers are the binaries a build record may hash beside sealrund (Build.Helpers).
var Helpers = []string{"runner", "runner-exec", "sealrun-netns-hook", "sealrun-hook-relay"}

// checkTrack compares the predicate with a track file: the id first, then every pin.
func checkTrack(p *Predicate, t *policy.Track) (warnings []string, err error) {
	if p.Track.ID != t.ID {
		return nil, failf(ReasonTrack, "the attestation was made under track id %s (%s %s) but the given track file has id %s (%s %s)", p.Track.ID, p.Track.Name, p.Track.Version, t.ID, t.Name, t.Version)
	}
	pins := []struct{ field, got, want string }{
		{"track.name", p.Track.Name, t.Name},
		{"track.version", p.Track.Version, t.Version},
		{"track.seeds_required", fmt.Sprint(p.Track.SeedsRequired), fmt.Sprint(t.Seeds.Required)},
		{"images.controller", p.Images.Controller, t.Images.Controller.String()},
		{"images.runner", p.Images.Runner, t.Images.Runner.String()},
		{"images.grader", p.Images.Grader, t.Images.Grader.String()},
		{"scaffold.name", p.Scaffold.Name, t.Scaffold.Name},
		{"scaffold.version", p.Scaffold.Version, t.Scaffold.Version},
		{"scaffold.config_sha256", string(p.Scaffold.ConfigSHA256), string(t.Scaffold.ConfigSHA256)},
		{"budget.wall", normDur(p.Budget.Wall), t.Budget.Wall.String()},
		{"budget.call_limit", normDur(p.Budget.CallLimit), t.Budget.CallLimit.String()},
		{"budget.reserve", normDur(p.Budget.Reserve), t.Budget.Reserve.String()},
		{"budget.grading", normDur(p.Budget.Grading), t.Budget.Grading.String()},
		{"budget.max_gzip_bytes", fmt.Sprint(p.Budget.MaxGzipBytes), fmt.Sprint(t.Artifact.MaxGzipBytes)},
		{"budget.max_tokens", fmt.Sprint(p.Budget.MaxTokens), fmt.Sprint(t.Budget.MaxTokens)},
		{"budget.max_cost", p.Budget.MaxCost, maxCost(t.Budget.MaxCost)},
	}
	switch {
	case t.Task == nil && p.Task != nil:
		return nil, failf(ReasonTrack, "the attestation is of a run of task %s, but the given track %s %s is an exam track", p.Task.Name, t.Name, t.Version)
	case t.Task != nil && p.Task == nil:
		return nil, failf(ReasonTrack, "the attestation is of an exam run, but the given track %s %s is a task track (task %s)", t.Name, t.Version, t.Task.Name)
	case t.Task != nil:
		pins = append(pins, []struct{ field, got, want string }{
			{"task.kind", p.Task.Kind, t.Task.Kind},
			{"task.name", p.Task.Name, t.Task.Name},
			{"task.sha256", string(p.Task.SHA256), string(t.Task.SHA256)},
			{"task.data_sha256", string(p.Task.DataSHA256), string(t.Task.DataSHA256)},
		}...)
	default:
		pins = append(pins, []struct{ field, got, want string }{
			{"exam.sha256", string(p.Exam.SHA256), string(t.Exam.SHA256)},
			{"exam.questions", fmt.Sprint(p.Exam.Questions), fmt.Sprint(t.Exam.Questions)},
			{"kit.sha256", string(p.Kit.SHA256), string(t.Kit.SHA256)},
		}...)
	}
	for _, pin := range pins {
		if pin.got != pin.want {
			return nil, failf(ReasonTrack, "%s is %q in the attestation but %q in the track", pin.field, pin.got, pin.want)
		}
	}
	switch t.Status {
	case policy.StatusLegacy:
		warnings = append(warnings, fmt.Sprintf("track %s %s is legacy: the result verifies and must be labelled legacy", t.Name, t.Version))
	case policy.StatusWithdrawn:
		warnings = append(warnings, fmt.Sprintf("track %s %s is withdrawn: the result verifies but must not be ranked", t.Name, t.Version))
	}
	return warnings, nil
}

func normDur(s string) string {
	d, err := time.ParseDuration(s)
	if err != nil {
		return s
	}
	return d.String()
}

// PredicateFromTrack returns a predicate with every field a track pins filled in: track, exam,
// images, kit, scaffold and budget; for a task track, task (its pins only: the caller adds the
// metric and scores from the task's metadata) in place of exam and kit. The caller adds the
// run's own facts.
func PredicateFromTrack(t *policy.Track) *Predicate {
	if t.Task != nil {
		p := PredicateFromTrack(&policy.Track{ID: t.ID, Name: t.Name, Version: t.Version, Status: t.Status, Seeds: t.Seeds,
			Images: t.Images, Scaffold: t.Scaffold, Budget: t.Budget, Artifact: t.Artifact, Human: t.Human})
		p.Exam, p.Kit = ExamInfo{}, KitInfo{}
		p.Task = &TaskInfo{Kind: t.Task.Kind, Name: t.Task.Name, SHA256: t.Task.SHA256, DataSHA256: t.Task.DataSHA256}
		return p
	}
	p := &Predicate{
		Track:    TrackInfo{ID: t.ID, Name: t.Name, Version: t.Version, Status: string(t.Status), SeedsRequired: t.Seeds.Required},
		Exam:     ExamInfo{SHA256: t.Exam.SHA256, Questions: int(t.Exam.Questions)},
		Images:   ImagesInfo{Controller: t.Images.Controller.String(), Runner: t.Images.Runner.String(), Grader: t.Images.Grader.String()},
		Kit:      KitInfo{SHA256: t.Kit.SHA256},
		Scaffold: Scaffold{Name: t.Scaffold.Name, Version: t.Scaffold.Version, ConfigSHA256: t.Scaffold.ConfigSHA256},
		Budget: Budget{Wall: t.Budget.Wall.String(), CallLimit: t.Budget.CallLimit.String(), Reserve: t.Budget.Reserve.String(),
			Grading: t.Budget.Grading.String(), MaxGzipBytes: t.Artifact.MaxGzipBytes, MaxTokens: t.Budget.MaxTokens, MaxCost: maxCost(t.Budget.MaxCost)},
	}
	if t.Human != nil && t.Human.Pauses > 0 {
		p.Budget.Pauses = t.Human.Pauses.String()
	}
	return p
}

func maxCost(m policy.Money) string {
	if m.IsZero() {
		return ""
	}
	return m.String()
}

// checkExamResult checks an exam run's result against its exam and subjects.
func checkExamResult(p *Predicate, r Result, subjects []Subject) error {
	bad := func(field, format string, args ...any) error {
		return failf(ReasonPredicate, "%s: %s", field, fmt.Sprintf(format, args...))
	}
	if r.Value != nil || r.ValidSubmission || r.Invalid != "" {
		return bad("result", "an exam run's result has no value, valid_submission or invalid_submission (those are a task run's)")
	}
	switch r.Status {
	case outcome.Graded:
		if _, ok := subjectDigest(subjects, SubjectBundle); !ok {
			return bad("result.status", "graded, but there is no %q subject binding the graded bundle", SubjectBundle)
		}
		if !digest.IsHex(string(r.PassVectorSHA256)) {
			return bad("result.pass_vector_sha256", "a graded result needs the pass vector's sha256 (64 lowercase hex)")
		}
	case outcome.Failed, outcome.Invalid:
		if strings.TrimSpace(r.Reason) == "" {
			return bad("result.reason", "a %s result must say why", r.Status)
		}
	default:
		return bad("result.status", "%q is not graded, failed or invalid", r.Status)
	}
	if r.Questions != p.Exam.Questions {
		return bad("result.questions", "is %d but the exam has %d", r.Questions, p.Exam.Questions)
	}
	if r.Passed < 0 || r.Passed > r.Questions {
		return bad("result.passed", "is %d; expected 0 to %d", r.Passed, r.Questions)
	}
	if want := 100 * float64(r.Passed) / float64(r.Questions); math.Abs(r.Score-want) > 1e-9 {
		return bad("result.score", "is %v but passed/questions is %d/%d = %v%%", r.Score, r.Passed, r.Questions, want)
	}
	if r.PassVectorSHA256 != "" && !digest.IsHex(string(r.PassVectorSHA256)) {
		return bad("result.pass_vector_sha256", "%q is not 64 lowercase hex", r.PassVectorSHA256)
	}
	if r.BitsPerByte != nil && (*r.BitsPerByte < 0 || math.IsNaN(*r.BitsPerByte) || math.IsInf(*r.BitsPerByte, 0)) {
		return bad("result.bits_per_byte", "is %v; expected a non-negative number or null", *r.BitsPerByte)
	}
	return nil
}

// checkTaskResult checks a task run's result: graded means a promoted submission was evaluated,
// with a finite value exactly when the submission was valid and a reason when it was not.
func checkTaskResult(r Result, subjects []Subject) error {
	bad := func(field, format string, args ...any) error {
		return failf(ReasonPredicate, "%s: %s", field, fmt.Sprintf(format, args...))
	}
	if r.Questions != 0 || r.Passed != 0 || r.Score != 0 || r.PassVectorSHA256 != "" || r.BitsPerByte != nil {
		return bad("result", "a task run's result has no questions, passed, score, pass_vector_sha256 or bits_per_byte (those are an exam run's)")
	}
	switch r.Status {
	case outcome.Graded:
		if _, ok := subjectDigest(subjects, SubjectBundle); !ok {
			return bad("result.status", "graded, but there is no %q subject binding the evaluated submission", SubjectBundle)
		}
	case outcome.Failed, outcome.Invalid:
		if strings.TrimSpace(r.Reason) == "" {
			return bad("result.reason", "a %s result must say why", r.Status)
		}
	default:
		return bad("result.status", "%q is not graded, failed or invalid", r.Status)
	}
	switch {
	case r.Value != nil && (math.IsNaN(*r.Value) || math.IsInf(*r.Value, 0)):
		return bad("result.value", "is %v; a valid submission's metric is a finite number", *r.Value)
	case r.ValidSubmission != (r.Value != nil):
		return bad("result.valid_submission", "is %v but value is %s; a submission is valid exactly when it has a value", r.ValidSubmission, map[bool]string{true: "set", false: "null"}[r.Value != nil])
	case r.ValidSubmission && r.Status != outcome.Graded:
		return bad("result.valid_submission", "is true in a %s result; only a graded run has a value", r.Status)
	case r.Status == outcome.Graded && !r.ValidSubmission && strings.TrimSpace(r.Invalid) == "":
		return bad("result.invalid_submission", "a graded run without a valid submission must say why it is invalid")
	case r.Invalid != "" && r.ValidSubmission:
		return bad("result.invalid_submission", "is set for a valid submission")
	}
	return nil
}

func deref(f *float64) float64 {
	if f == nil {
		return 0
	}
	return *f
}
