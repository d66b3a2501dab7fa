package daemon

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/outcome"
)

// ledgerOrigin names this host's ledger: [ledger] origin, else "sealrun.ledger/<hostname>". An
// existing ledger keeps the origin it was made with.
func ledgerOrigin(cfg *hostconfig.Config) string {
	if cfg.Ledger.Origin != "" {
		return cfg.Ledger.Origin
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "localhost"
	}
	return "sealrun.ledger/" + strings.Map(func(r rune) rune {
		if r <= ' ' || r == '+' || r > '~' {
			return '-'
		}
		return r
	}, h)
}

// queuedEntry is a run's queued entry, from its spec.
func queuedEntry(s RunSpec) *ledger.Entry {
	agent := s.Agent.Provider + "/" + s.Agent.Model
	if s.Agent.Effort != "" {
		agent += "@" + s.Agent.Effort
	}
	return &ledger.Entry{Kind: ledger.KindQueued, Run: s.ID, Time: s.Queued.UTC(), Track: s.Track.ID, TrackName: s.Track.Name + " " + s.Track.Version,
		Scaffold: s.Track.Scaffold.Name + " " + s.Track.Scaffold.Version, Agent: agent, Seed: s.Seed, RerunOf: s.RerunOf}
}

// ledgerQueued appends run id's queued entry; a failure stops the daemon taking runs.
func (d *Daemon) ledgerQueued(id string) error {
	if d.ledger == nil {
		return nil
	}
	d.mu.Lock()
	s := d.spec[id]
	d.mu.Unlock()
	if _, err := d.ledger.Append(queuedEntry(s)); err != nil {
		d.fail("ledger", err)
		return err
	}
	return nil
}

// ledgerEnded appends run's ended entry: how it ended and the SHA-256 of its signed statement
// ("" when it could not be attested). A failure stops the daemon taking runs.
func (x *Executor) ledgerEnded(run string, state outcome.Outcome, reason, statement string) error {
	if x.Ledger == nil || x.Ledger.Has(run, ledger.KindEnded) {
		return nil
	}
	if len(reason) > 1000 {
		reason = reason[:1000]
	}
	e := &ledger.Entry{Kind: ledger.KindEnded, Run: run, Time: time.Now().UTC(), State: state, Reason: strings.ToValidUTF8(reason, "?"), Attestation: digest.Hex(statement)}
	if _, err := x.Ledger.Append(e); err != nil {
		if x.onFail != nil {
			x.onFail("ledger", err)
		}
		return err
	}
	return nil
}

// StatementDigest is the SHA-256 (hex) of an attestation's signed statement (the DSSE payload):
// what a ledger's ended entry names.
func StatementDigest(envelope []byte) (string, error) {
	var e struct {
		Payload string `json:"payload"`
	}
	if err := json.Unmarshal(envelope, &e); err != nil {
		return "", err
	}
	p, err := base64.StdEncoding.DecodeString(e.Payload)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(p)
	return hex.EncodeToString(sum[:]), nil
}

// reconcileLedger appends what a daemon killed between its journal and its ledger left out:
// the queued entry of each run the journal has, oldest first, and the ended entry of each run
// that has ended (with its attestation's digest).
func (d *Daemon) reconcileLedger() error {
	ids := make([]string, 0, len(d.runs))
	for id := range d.runs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, k int) bool { return d.runs[ids[i]].Queued.Before(d.runs[ids[k]].Queued) })
	n := 0
	for _, id := range ids {
		if s, ok := d.spec[id]; ok && !d.ledger.Has(id, ledger.KindQueued) {
			if _, err := d.ledger.Append(queuedEntry(s)); err != nil {
				return fmt.Errorf("ledger: %w", err)
			}
			n++
		}
	}
	for _, id := range ids {
		r := d.runs[id]
		if !r.Final() || !d.ledger.Has(id, ledger.KindQueued) || d.ledger.Has(id, ledger.KindEnded) {
			continue
		}
		digest := ""
		if b, err := os.ReadFile(filepath.Join(r.Dir, "result.att.json")); err == nil {
			digest, _ = StatementDigest(b)
		}
		state := outcome.Outcome(r.State) // a final record's state is its outcome
		if digest == "" {
			state = outcome.Invalid
		}
		if err := d.x.ledgerEnded(id, state, r.Reason, digest); err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
		n++
	}
	if n > 0 {
		d.log.Info("ledger: appended the entries a previous daemon had not", "entries", n)
	}
	return nil
}

// finishedInLedger completes a run the previous daemon attested and appended to the ledger as
// ended but was killed before journaling its end: the journal gets the ledger's state, and the
// attestation the ledger names stays (re-attesting it invalid would contradict the ledger).
func (d *Daemon) finishedInLedger(r *api.Record) bool {
	if d.ledger == nil {
		return false
	}
	e, ok := d.ledger.EndOf(r.ID)
	if !ok || e.Attestation == "" {
		return false
	}
	b, err := os.ReadFile(filepath.Join(r.Dir, "result.att.json"))
	if err != nil {
		return false
	}
	if digest, err := StatementDigest(b); err != nil || digest != string(e.Attestation) {
		return false
	}
	if err := d.setState(r.ID, string(e.State), e.Reason); err != nil {
		return false
	}
	d.log.Info("a run that had ended and been attested before the restart keeps its result", "run", r.ID, "state", e.State)
	return true
}
