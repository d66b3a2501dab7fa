package policy

import (
	"crypto"
	"time"

	"github.com/sealrun/sealrun/digest"
)

// Status is a track's life-cycle state. Only active tracks take new runs; legacy and withdrawn
// tracks still verify, and verifiers report the status next to the result.
type Status string

// The statuses a track may have.
const (
	StatusActive    Status = "active"
	StatusLegacy    Status = "legacy"
	StatusWithdrawn Status = "withdrawn"
)

// Track is a validated track file. Every field was checked by Parse; the zero Track is not valid.
type Track struct {
	// ID is the track id: lowercase hex SHA-256 of the canonical JSON of the file's data.
	ID string

	Name       string
	Version    string
	Status     Status
	Supersedes string // track id of the track this one replaces, or ""

	Budget    Budget
	Artifact  Artifact
	Exam      Exam
	Kit       Kit
	Task      *Task // a task track: nil for an exam track, which has Exam and Kit
	Images    Images
	Scaffold  Scaffold
	Seeds     Seeds
	Resources Resources
	Human     *Human // nil: the track takes no human runs
	// Amendments: nil, an amendment of a run needs the host's signature only.
	Amendments *Amendments

	canonical []byte
}

// Canonical returns the RFC 8785 canonical JSON the track id is the SHA-256 of, so anyone can
// recompute the id with `sha256sum`.
func (t *Track) Canonical() []byte { return append([]byte(nil), t.canonical...) }

// Budget is a run's time policy. See Schedule for the arithmetic.
type Budget struct {
	Wall      time.Duration // whole run, start to deadline
	CallLimit time.Duration // longest single compute call
	Reserve   time.Duration // last part of Wall in which new compute is refused
	Grading   time.Duration // longest hidden-exam grading of one bundle (both phases)
	// QuestionLimit is the longest one answer (or one score) may take during grading; a
	// question over it fails and the entrypoint is restarted (grader/PROTOCOL.md).
	QuestionLimit time.Duration
	// MaxTokens and MaxCost bound the model a run may use (0 and zero: no bound): the gateway
	// refuses every request once the run's tokens (input and output) or their cost at the host's
	// price reach them. The request that crosses a bound completes.
	MaxTokens int64
	MaxCost   Money
}

// Artifact limits the submitted bundle.
type Artifact struct {
	MaxGzipBytes int64 // recomputed by sealrun, never self-reported
}

// Exam pins the hidden exam and the public validation set by hash.
type Exam struct {
	SHA256           digest.Hex
	Questions        int64
	ContextBytes     int64
	ValidationSHA256 digest.Hex
}

// Kit pins the kit seeded into every workspace (the brief, the starter code, the training text,
// the public validation set) by its kit hash: the SHA-256 of its SHA256SUMS (kits/KIT.md).
type Kit struct {
	SHA256 digest.Hex
}

// Images pins the three container images by digest.
type Images struct {
	Controller ImageRef
	Runner     ImageRef
	Grader     ImageRef
}

// ImageRef is an image reference pinned by digest: Name@Digest.
type ImageRef struct {
	Name   string        // repository, for example "ghcr.io/sealrun/controller"
	Digest digest.Digest // "sha256:" + 64 lowercase hex
}

func (r ImageRef) String() string { return r.Name + "@" + string(r.Digest) }

// Scaffold pins the agent scaffold (the program driving the model inside the controller).
type Scaffold struct {
	Name         string
	Version      string
	ConfigSHA256 digest.Hex
}

// Seeds says how many valid seeds an official leaderboard row needs.
type Seeds struct {
	Required int64
}

// Resources are the host resources one run gets.
type Resources struct {
	GPUs      int64 // 0 allowed: a CPU-only track (demos)
	CPUs      int64
	Memory    int64 // bytes
	Workspace int64 // bytes, disk quota on /workspace
}

// Human lets people run the track by hand (agent human/HANDLE): the controller is a shell a
// person attaches to (sealrun attach) instead of a scaffold. The same budget, clock and rules
// hold; the clock starts at the first attach, or when Start has passed without one.
type Human struct {
	// Start is how long the run waits for its person to attach before the clock starts anyway.
	Start time.Duration
	// Image is the human controller image (a shell, an editor, the usual tools; no GPU, no
	// Python); zero: the track's controller image, with its shell.
	Image ImageRef
	// Pauses is how long, in all, the operator may pause one run (sealrun pause): the clock,
	// the person's shell and their compute stop, and the deadline moves by the pause. Zero: the
	// track allows no pauses.
	Pauses time.Duration
}

// TaskAIRS is the kind of an AIRS-Bench task: a directory of metadata.yaml, the description and
// the task's own prepare and evaluate scripts (package airs).
const TaskAIRS = "airs"

// Task pins, in a task track, what replaces the exam and the kit: the task directory and its
// raw data directory, each by its directory hash (airs.TreeHash). The grader image is then the
// task's evaluation image: its evaluate.py runs there.
type Task struct {
	Kind       string     // TaskAIRS
	Name       string     // logging_info.name of the task's metadata.yaml
	SHA256     digest.Hex // the task directory's hash
	DataSHA256 digest.Hex // the raw data directory's hash
}

// MaxReviewers bounds a track's reviewers.
const MaxReviewers = 8

// Amendments is what a track asks of an amendment of one of its runs beyond the host's
// signature (attest/PREDICATE.md, "Amendments"): a second signature, by one of its reviewers.
// The track pins the reviewers' public keys themselves, so a reader trusts them as it trusts the
// track, by its id, which every run's attestation names.
type Amendments struct {
	Reviewers []Reviewer
}

// Reviewer is one reviewer's public key.
type Reviewer struct {
	Key    crypto.PublicKey // ed25519.PublicKey or *ecdsa.PublicKey on P-256
	Base64 string           // as the track file writes it: the base64 of its PKIX DER
	KeyID  string           // lowercase hex SHA-256 of its PKIX DER (attest.KeyID)
}
