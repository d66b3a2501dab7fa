package attest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"

	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/policy"
)

// The fixed identifiers of a sealrun attestation.
const (
	// PayloadType is the DSSE payload type of every sealrun envelope.
	PayloadType = "application/vnd.in-toto+json"
	// StatementType is the in-toto Statement v1 type.
	StatementType = "https://in-toto.io/Statement/v1"
	// PredicateTypeV1 is the predicate of a sealed run, version 1 (attest/PREDICATE.md).
	PredicateTypeV1 = "https://sealrun.dev/attestation/sealed-run/v1"
	// PredicateTypeTaskV1 is the predicate of a sealed run of an AIRS task, version 1: the same
	// predicate with task in place of exam and kit, and the task's metric as the result
	// (attest/PREDICATE.md, "Task runs"). A distinct type, so that no verifier that knows only
	// exam runs takes a task run's result for an exam score.
	PredicateTypeTaskV1 = "https://sealrun.dev/attestation/sealed-task-run/v1"
)

// AllowedPredicateTypes are the predicate types this verifier understands.
var AllowedPredicateTypes = []string{PredicateTypeV1, PredicateTypeTaskV1}

// Subject names for the artifacts a run attests.
const (
	SubjectBundle = "bundle.tar.gz" // the graded bundle (absent when nothing was promoted)
	SubjectReport = "report.json"   // the result report
)

// Statement is an in-toto Statement v1 with a sealrun predicate.
type Statement struct {
	Type          string     `json:"_type"`
	Subject       []Subject  `json:"subject"`
	PredicateType string     `json:"predicateType"`
	Predicate     *Predicate `json:"predicate"`
}

// Subject is one attested artifact, by SHA-256.
type Subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// NewSubject returns a subject with a sha256 digest (lowercase hex).
func NewSubject(name, sha256hex string) Subject {
	return Subject{Name: name, Digest: map[string]string{"sha256": sha256hex}}
}

// NewStatement wraps a predicate in a Statement v1.
func NewStatement(p *Predicate, subjects ...Subject) *Statement {
	return &Statement{Type: StatementType, Subject: subjects, PredicateType: p.Type(), Predicate: p}
}

// Type is the predicate type of p: PredicateTypeTaskV1 for a task run, else PredicateTypeV1.
func (p *Predicate) Type() string {
	if p.Task != nil {
		return PredicateTypeTaskV1
	}
	return PredicateTypeV1
}

// Canonical returns the RFC 8785 canonical JSON of the statement: the DSSE payload sealrun signs.
// The same statement always gives the same bytes.
func (s *Statement) Canonical() ([]byte, error) {
	plain, err := json.Marshal(s.normalized())
	if err != nil {
		return nil, fmt.Errorf("encode statement: %w", err)
	}
	canon, err := jsoncanonicalizer.Transform(plain)
	if err != nil {
		return nil, fmt.Errorf("canonicalize statement: %w", err)
	}
	return canon, nil
}

// normalized returns a copy whose absent lists are empty lists, so that they encode as [] and
// never as null.
func (s *Statement) normalized() *Statement {
	c := *s
	if c.Subject == nil {
		c.Subject = []Subject{}
	}
	if s.Predicate == nil {
		return &c
	}
	p := *s.Predicate
	if p.Submissions.History == nil {
		p.Submissions.History = []Submission{}
	}
	containers := make([]AirGapContainer, len(p.AirGap.Containers))
	for i, ct := range p.AirGap.Containers {
		for _, l := range []*[]string{&ct.Links, &ct.Addresses, &ct.Routes} {
			if *l == nil {
				*l = []string{}
			}
		}
		containers[i] = ct
	}
	p.AirGap.Containers = containers
	c.Predicate = &p
	return &c
}

// Predicate is what a sealed run attests (PredicateTypeV1), or a sealed run of an AIRS task
// (PredicateTypeTaskV1: Task set, Exam and Kit zero and absent). attest/PREDICATE.md documents
// every field; attest/predicate.schema.json and attest/task-predicate.schema.json are their
// JSON Schemas.
type Predicate struct {
	Track       TrackInfo   `json:"track"`
	Exam        ExamInfo    `json:"exam,omitzero"`
	Task        *TaskInfo   `json:"task,omitempty"`
	Images      ImagesInfo  `json:"images"`
	Kit         KitInfo     `json:"kit,omitzero"`
	Scaffold    Scaffold    `json:"scaffold"`
	Agent       Agent       `json:"agent"`
	Budget      Budget      `json:"budget"`
	Host        Host        `json:"host"`
	AirGap      AirGap      `json:"air_gap"`
	Timeline    Timeline    `json:"timeline"`
	Submissions Submissions `json:"submissions"`
	Audit       Audit       `json:"audit"`
	Result      Result      `json:"result"`
	Seed        int64       `json:"seed"`
	Run         RunInfo     `json:"run"`
	// Build is the sealrun that made the run (absent in attestations from before it existed).
	Build *Build `json:"build,omitempty"`
	// Ledger is the run's queued entry in the host's run ledger, the signed head it is included
	// under and the inclusion proof (absent in attestations from before the ledger).
	Ledger *ledger.Ref `json:"ledger,omitempty"`
	// Usage is what the run's model requests used, summed from its audit log, and what that cost
	// at the host's price (absent in attestations from before it existed).
	Usage *Usage `json:"usage,omitempty"`
	// Human is a human run's people: who it was for and who attached to its terminal, as the
	// host authenticated them (absent for an agent's run, and in human runs' attestations from
	// before people were bound to their runs).
	Human *Human `json:"human,omitempty"`
	// TPM is what the host's TPM says of the run: the attestation key whose quote binds this
	// statement (beside the attestation, result.tpm.json), or why there is none (absent in
	// attestations from before hosts said so).
	TPM *TPMInfo `json:"tpm,omitempty"`
}

// TPMInfo is a run's hardware root, or why it has none. Where AttestationKey is set, the host's
// TPM quoted PCRs (its SHA-256 bank) with the SHA-256 of this statement's bytes (the envelope's
// payload) as qualifying data, after sealrund had measured its binary into SealrundPCR; the
// quote and sealrund's event log are the run's result.tpm.json (package tpm, docs/TPM.md).
type TPMInfo struct {
	AttestationKey string `json:"attestation_key,omitempty"` // SHA-256 of its PKIX DER, hex
	PCRs           []int  `json:"pcrs,omitempty"`
	SealrundPCR    int    `json:"sealrund_pcr,omitempty"`
	// None says why the run has no quote ("this host has no [tpm]"): no hardware root.
	None string `json:"none,omitempty"`
}

// TPMNone is what a host without [tpm] says in its attestations.
const TPMNone = "this host quotes no run with a TPM ([tpm] is not configured): no hardware root"

// Human is who a human run was for, who was named to watch it and every terminal attached to
// it: the person's, the proctors' and the operators'.
type Human struct {
	Person   Person        `json:"person"`
	Proctors []string      `json:"proctors,omitempty"`
	Attaches []HumanAttach `json:"attaches"`
	// AttachesOmitted counts those past MaxHumanAttaches of a kind (the audit log has them all).
	AttachesOmitted int `json:"attaches_omitted,omitempty"`
}

// Person is the account (and, for people sharing an account over ssh, the key's SHA-256
// fingerprint) a human run was queued for.
type Person struct {
	Account string `json:"account"`
	Key     string `json:"key,omitempty"`
}

// HumanAttach is one terminal attached to a human run, from Start to End: whose (the account as
// the admin socket's peer credentials give it, "bob (uid 1001)", and the ssh key it said it
// authenticated with), as what (HumanRoles), read-only or not, and an operator's reason for
// taking the terminal over.
type HumanAttach struct {
	Account  string    `json:"account"`
	Key      string    `json:"key,omitempty"`
	Role     string    `json:"role"`
	Watch    bool      `json:"watch"`
	Takeover string    `json:"takeover,omitempty"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
}

// The roles a HumanAttach has.
const (
	RolePerson   = "person"
	RoleProctor  = "proctor"
	RoleOperator = "operator"
)

// HumanRoles are the roles a HumanAttach has.
var HumanRoles = []string{RolePerson, RoleProctor, RoleOperator}

// MaxHumanAttaches bounds the attaches an attestation lists: as many of the person's, and as
// many of everyone else's (proctors', operators'); the rest are counted (AttachesOmitted).
const MaxHumanAttaches = 256

// Usage is a run's model use (policy.Usage), summed from its audit log by UsageFromAudit.
type Usage = policy.Usage

// Cost is a run's tokens priced (policy.Cost).
type Cost = policy.Cost

// Build says exactly which sealrun built a run: the daemon's version and commit, whether its
// tree had uncommitted changes, the Go that compiled it, the SHA-256 of the sealrund binary,
// whether test seams were compiled in (a test build: never a release) and the seams this run
// used (its scaffold's command or files were not the pinned image's).
type Build struct {
	Version      string   `json:"version"`
	Commit       string   `json:"commit"`
	Modified     bool     `json:"modified"`
	GoVersion    string   `json:"go_version"`
	DaemonSHA256 string   `json:"sealrund_sha256"`
	TestSeams    bool     `json:"test_seams"`
	SeamsUsed    []string `json:"seams_used,omitempty"`
	// Toolchain is the C compiler and C library make build built the static helpers with
	// ("gcc-14.2.0,glibc-2.41"): what a rebuild needs beside the Go version.
	Toolchain string `json:"toolchain,omitempty"`
	// Helpers is the SHA-256 of each binary this sealrund runs beside it (runner, runner-exec,
	// sealrun-netns-hook, sealrun-hook-relay; those installed), by name.
	Helpers map[string]string `json:"helpers,omitempty"`
}

// Seams are the test seams a test build may use (Build.SeamsUsed).
var Seams = []string{"entrypoint", "overlay", "hold", "kill_after"}

// LedgerAgent is the agent as a ledger entry names it: provider/model[@effort].
func (p *Predicate) LedgerAgent() string {
	if p.Agent.ReasoningEffort == "" {
		return p.Agent.Model
	}
	return p.Agent.Model + "@" + p.Agent.ReasoningEffort
}

// LedgerScaffold is the scaffold as a ledger entry names it: "name version".
func (p *Predicate) LedgerScaffold() string { return p.Scaffold.Name + " " + p.Scaffold.Version }

// RunInfo names the run, so that two attestations of one run count once, and links a rerun to
// the invalid run it replaces.
type RunInfo struct {
	ID      string `json:"id"`
	RerunOf string `json:"rerun_of"` // "" unless this run reruns an invalid one
}

// TrackInfo identifies the track the run was judged under.
type TrackInfo struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Version string `json:"version"`
	Status  string `json:"status"`
	// SeedsRequired is the track's [seeds] required: valid seeds an official row needs.
	SeedsRequired int64 `json:"seeds_required"`
}

// ExamInfo pins the hidden exam.
type ExamInfo struct {
	SHA256    digest.Hex `json:"sha256"`
	Questions int        `json:"questions"`
}

// ImagesInfo pins the three images, each name@sha256:<hex>.
type ImagesInfo struct {
	Controller string `json:"controller"`
	Runner     string `json:"runner"`
	Grader     string `json:"grader"`
}

// KitInfo pins the kit seeded into the workspace (brief, starter code, training text, validation
// set) by its kit hash, the SHA-256 of the kit's SHA256SUMS.
type KitInfo struct {
	SHA256 digest.Hex `json:"sha256"`
}

// Scaffold pins the agent scaffold.
type Scaffold struct {
	Name         string     `json:"name"`
	Version      string     `json:"version"`
	ConfigSHA256 digest.Hex `json:"config_sha256"`
}

// Agent is the row identity on a leaderboard (with the scaffold).
type Agent struct {
	Model           string `json:"model"`
	ReasoningEffort string `json:"reasoning_effort"`
}

// Budget is the budget policy the run had, durations as Go duration strings.
type Budget struct {
	Wall         string `json:"wall"`
	CallLimit    string `json:"call_limit"`
	Reserve      string `json:"reserve"`
	Grading      string `json:"grading"`
	MaxGzipBytes int64  `json:"max_gzip_bytes"`
	// MaxTokens and MaxCost are the track's bounds on the model (absent when it has none).
	MaxTokens int64  `json:"max_tokens,omitempty"`
	MaxCost   string `json:"max_cost,omitempty"`
	// Pauses is how long, in all, the operator may pause a human run (the track's human.pauses;
	// absent when it allows none).
	Pauses string `json:"pauses,omitempty"`
}

// Host describes the machine and software the run used.
type Host struct {
	GPUModel       string `json:"gpu_model"`
	GPUDriver      string `json:"gpu_driver"`
	Runtime        string `json:"runtime"`
	RuntimeVersion string `json:"runtime_version"`
	Kernel         string `json:"kernel"`
	SealrunVersion string `json:"sealrun_version"`
	SealrunCommit  string `json:"sealrun_commit"`
	// Runtimes names the runtime that ran each role ("crun version 1.8.1"), where the host
	// gives roles runtimes of their own or the run recorded it (absent in older attestations).
	Runtimes map[string]string `json:"runtimes,omitempty"`
}

// AirGap is the evidence, read with netlink from the host, that each container's network
// namespace had only what its role allows.
type AirGap struct {
	Containers []AirGapContainer `json:"containers"`
}

// AirGapContainer is one container's network namespace as seen from the host.
type AirGapContainer struct {
	Role          string   `json:"role"`
	Links         []string `json:"links"`
	Addresses     []string `json:"addresses"`
	Routes        []string `json:"routes"`
	EgressBlocked bool     `json:"egress_blocked"`
}

// Timeline of the run, UTC.
type Timeline struct {
	Queued   time.Time `json:"queued"`
	Started  time.Time `json:"started"`
	Deadline time.Time `json:"deadline"` // started + wall + the pauses' lengths
	Finished time.Time `json:"finished"`
	// Pauses are the pauses the operator granted a human run, in order (absent: none).
	Pauses []Pause `json:"pauses,omitempty"`
}

// Pause is one pause of a run: from Start to End its clock, its shell and its compute stood still.
type Pause struct {
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
}

// PausedFor is the pauses' lengths in all.
func (t Timeline) PausedFor() time.Duration {
	var d time.Duration
	for _, p := range t.Pauses {
		d += p.End.Sub(p.Start)
	}
	return d
}

// Submissions is the append-only history of candidates and the head of its hash chain.
type Submissions struct {
	History []Submission `json:"history"`
	Head    string       `json:"head"`
}

// Submission is one candidate bundle.
type Submission struct {
	Digest          digest.Digest `json:"digest"` // sha256:<hex> of the gzipped bundle
	Size            int64         `json:"size"`   // gzipped bytes, recomputed by sealrun
	Time            time.Time     `json:"time"`
	ValidationScore float64       `json:"validation_score"` // percent on the public validation set
	Promoted        bool          `json:"promoted"`
}

// Audit summarises the run's audit log.
type Audit struct {
	Head    string `json:"head"`
	Entries int    `json:"entries"`
}

// Result is the outcome. An exam run's has the exam fields; a task run's (the predicate has
// Task) has status, reason and the task fields: the metric's value, whether the submission was
// valid and why not. A predicate encodes its result with only its kind's fields
// (Predicate.ResultJSON).
type Result struct {
	Status           outcome.Outcome `json:"status"`
	Reason           string          `json:"reason"`
	Questions        int             `json:"questions"`
	Passed           int             `json:"passed"`
	Score            float64         `json:"score"` // percent: 100 * passed / questions
	PassVectorSHA256 digest.Hex      `json:"pass_vector_sha256"`
	BitsPerByte      *float64        `json:"bits_per_byte"` // null when not measured

	// Task runs only.
	Value           *float64 `json:"value,omitempty"`            // the task's metric; null: no valid submission
	ValidSubmission bool     `json:"valid_submission,omitempty"` // evaluate.py gave a finite number
	Invalid         string   `json:"invalid_submission,omitempty"`
}

// ResultJSON is the predicate's result as it is encoded: an exam run's with its exam fields, a
// task run's with its task fields (value always present, null when there is none).
func (p *Predicate) ResultJSON() any {
	r := p.Result
	if p.Task == nil {
		return struct {
			Status           outcome.Outcome `json:"status"`
			Reason           string          `json:"reason"`
			Questions        int             `json:"questions"`
			Passed           int             `json:"passed"`
			Score            float64         `json:"score"`
			PassVectorSHA256 digest.Hex      `json:"pass_vector_sha256"`
			BitsPerByte      *float64        `json:"bits_per_byte"`
		}{r.Status, r.Reason, r.Questions, r.Passed, r.Score, r.PassVectorSHA256, r.BitsPerByte}
	}
	return struct {
		Status          outcome.Outcome `json:"status"`
		Reason          string          `json:"reason"`
		Value           *float64        `json:"value"`
		ValidSubmission bool            `json:"valid_submission"`
		Invalid         string          `json:"invalid_submission"`
	}{r.Status, r.Reason, r.Value, r.ValidSubmission, r.Invalid}
}

// MarshalJSON encodes the predicate with its result in its kind's shape (ResultJSON).
func (p Predicate) MarshalJSON() ([]byte, error) {
	type plain Predicate
	return json.Marshal(struct {
		plain
		Result any `json:"result"` // shadows plain's
	}{plain(p), p.ResultJSON()})
}

// MetricText is a task run's result in words: "Accuracy = 0.88", "Accuracy: none, invalid
// submission (why)" or "Accuracy: none"; "" for an exam run.
func (p *Predicate) MetricText() string {
	switch {
	case p.Task == nil:
		return ""
	case p.Result.Value != nil:
		return fmt.Sprintf("%s = %g", p.Task.Metric, *p.Result.Value)
	case p.Result.Invalid != "":
		return fmt.Sprintf("%s: none, invalid submission (%s)", p.Task.Metric, p.Result.Invalid)
	}
	return p.Task.Metric + ": none"
}

// TaskInfo is, in a task run's predicate, the AIRS task that replaces the exam and the kit: the
// track's pins (name, directory hash, raw data hash) and, from the task's metadata.yaml that
// the hash binds, what a leaderboard needs to normalize its metric without the directory.
type TaskInfo struct {
	Kind          string     `json:"kind"` // airs
	Name          string     `json:"name"`
	SHA256        digest.Hex `json:"sha256"`      // the task directory's tree hash
	DataSHA256    digest.Hex `json:"data_sha256"` // the raw data directory's tree hash
	Metric        string     `json:"metric"`
	LowerIsBetter bool       `json:"metric_lower_is_better"`
	SOTA          float64    `json:"sota_score"`
	Optimal       float64    `json:"optimal_score"`
	Worst         *float64   `json:"estimated_worst_score,omitempty"` // the task's, when it gives one
}
