package attest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
)

// The fixed identifiers of a sealrun attestation.
const (
	// PayloadType is the DSSE payload type of every sealrun envelope.
	PayloadType = "application/vnd.in-toto+json"
	// StatementType is the in-toto Statement v1 type.
	StatementType = "https://in-toto.io/Statement/v1"
	// PredicateTypeV1 is the predicate of a sealed run, version 1 (attest/PREDICATE.md).
	PredicateTypeV1 = "https://sealrun.dev/attestation/sealed-run/v1"
)

// AllowedPredicateTypes are the predicate types this verifier understands.
var AllowedPredicateTypes = []string{PredicateTypeV1}

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
	return &Statement{Type: StatementType, Subject: subjects, PredicateType: PredicateTypeV1, Predicate: p}
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

// Predicate is what a sealed run attests (PredicateTypeV1). attest/PREDICATE.md documents every
// field and attest/predicate.schema.json is its JSON Schema.
type Predicate struct {
	Track       TrackInfo   `json:"track"`
	Exam        ExamInfo    `json:"exam"`
	Images      ImagesInfo  `json:"images"`
	Kit         KitInfo     `json:"kit"`
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
}

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
	SHA256    string `json:"sha256"`
	Questions int    `json:"questions"`
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
	SHA256 string `json:"sha256"`
}

// Scaffold pins the agent scaffold.
type Scaffold struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	ConfigSHA256 string `json:"config_sha256"`
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
	Deadline time.Time `json:"deadline"`
	Finished time.Time `json:"finished"`
}

// Submissions is the append-only history of candidates and the head of its hash chain.
type Submissions struct {
	History []Submission `json:"history"`
	Head    string       `json:"head"`
}

// Submission is one candidate bundle.
type Submission struct {
	Digest          string    `json:"digest"` // sha256:<hex> of the gzipped bundle
	Size            int64     `json:"size"`   // gzipped bytes, recomputed by sealrun
	Time            time.Time `json:"time"`
	ValidationScore float64   `json:"validation_score"` // percent on the public validation set
	Promoted        bool      `json:"promoted"`
}

// Audit summarises the run's audit log.
type Audit struct {
	Head    string `json:"head"`
	Entries int    `json:"entries"`
}

// The statuses of a result.
const (
	StatusGraded  = "graded"  // the promoted candidate was graded
	StatusFailed  = "failed"  // the agent's fault; counts as its score (often 0)
	StatusInvalid = "invalid" // the infrastructure's fault; excluded from means and rerun
)

// Result is the outcome.
type Result struct {
	Status           string   `json:"status"`
	Reason           string   `json:"reason"`
	Questions        int      `json:"questions"`
	Passed           int      `json:"passed"`
	Score            float64  `json:"score"` // percent: 100 * passed / questions
	PassVectorSHA256 string   `json:"pass_vector_sha256"`
	BitsPerByte      *float64 `json:"bits_per_byte"` // null when not measured
}
