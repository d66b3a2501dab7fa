package daemon

// Phase 1 of a run, admit: before anything is created, every pin of the track is verified on
// this host (Check), and the run gets its directory and audit log.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/exams"
	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/images"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/kits"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/scaffolds"
	"github.com/sealrun/sealrun/transcript"
)

// admit verifies the run's inputs and opens its directory and audit log. It returns the run's
// state, or (nil, outcome, err) when the run ends here: refused (err) or cancelled while it
// waited at the preparing failpoint (attested invalid).
func (x *Executor) admit(ctx context.Context, spec RunSpec) (*runState, *Outcome, error) {
	if err := x.checkSeams(); err != nil {
		return nil, nil, err
	}
	x.state(spec.ID, api.StatePreparing, "")
	x.hold(ctx, spec.ID, "preparing")
	if ctx.Err() != nil {
		out, err := x.Invalidate(context.WithoutCancel(ctx), spec, "cancelled", time.Time{})
		return nil, out, err
	}
	p, err := x.Check(spec)
	if err != nil {
		return nil, nil, err
	}
	for _, n := range p.notes {
		x.event(spec.ID, api.EventCheckNote, n)
	}
	dir := filepath.Join(x.Cfg.StateDir, "runs", spec.ID)
	for _, d := range []string{x.Cfg.StateDir, filepath.Join(x.Cfg.StateDir, "runs")} {
		os.MkdirAll(d, 0o711)
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, nil, fmt.Errorf("run directory: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "audit.jsonl")); err == nil {
		return nil, nil, fmt.Errorf("run %s has run before (its audit log exists); a run id is executed once", spec.ID)
	}
	rio := &runIO{dir: dir, exam: p.exam, task: p.task, infraCh: make(chan struct{})}
	if rio.log, err = audit.Open(filepath.Join(dir, "audit.jsonl")); err != nil {
		return nil, nil, err
	}
	rio.log.OnAppend(func(kind string, line []byte) {
		// Live only: the audit log itself is the durable record.
		if x.onEvent != nil {
			if s := transcript.Activity(kind, line); s != "" {
				x.onEvent(api.Event{Time: time.Now().UTC(), Run: spec.ID, Kind: api.EventActivity, Reason: s})
			}
		}
	})
	rs := x.newRunState(spec, rio)
	rs.pins = p
	rs.onClose(func() { rio.log.Close() })
	return rs, nil, nil
}

// pins are a run's verified inputs.
type pins struct {
	controller, runner, grader string   // rootfs paths
	entrypoint                 []string // the scaffold's command (the controller image's)
	imageEnv                   []string // the controller image's own environment (its ENV)
	scaffold                   string   // the scaffold's name (the controller image's label)
	scaffoldEnv                []string // its per-run configuration (a shipped scaffold's rendered config: scaffolds.Render)
	exam, validation           *exams.Exam
	kit                        *kits.Kit
	provider                   controller.ProviderConfig
	price                      *policy.Price // the host's price of the agent's model, or nil
	task                       *airs.Task    // a task run's task, verified
	taskData                   string        // and its raw data directory, verified
	notes                      []string      // what Check noticed but does not refuse (versions)
}

// Check verifies every pin of the track for this host before anything is created: the three
// images in the store, the scaffold pin against the controller image's labels, the exam by
// SHA-256, the kit by its hash (every file) and the validation set in it (or, for a task track,
// the task and its raw data by their tree hashes), the provider of the agent. The error names
// the mismatch, the file and the fix.
func (x *Executor) Check(spec RunSpec) (*pins, error) {
	t := spec.Track
	var p pins
	var errs []error
	for _, im := range []struct {
		role string
		ref  policy.ImageRef
		dst  *string
	}{{"controller", t.Images.Controller, &p.controller}, {"runner", t.Images.Runner, &p.runner}, {"grader", t.Images.Grader, &p.grader}} {
		root, err := x.Store.Rootfs(string(im.ref.Digest))
		if err != nil {
			errs = append(errs, fmt.Errorf("track %s pins the %s image %s, which is not in the image store (%v); pull or import it (sealrun images pull %s)", t.Name, im.role, im.ref, err, im.ref))
			continue
		}
		*im.dst = root
	}
	human := hostconfig.IsHuman(spec.Agent.String())
	switch {
	case human:
		errs = append(errs, x.checkHuman(t, &p, spec.Agent)...)
	case p.controller != "":
		ep, name, env, err := x.scaffold(t)
		if err != nil {
			errs = append(errs, err)
		}
		p.entrypoint, p.scaffold, p.imageEnv = ep, name, env
	}
	if t.Task != nil {
		errs = append(errs, x.checkTask(t, &p)...)
	} else {
		errs = append(errs, x.checkExam(t, &p)...)
	}
	prov, ok := x.Cfg.Providers[spec.Agent.Provider]
	switch {
	case spec.Agent.Provider == hostconfig.NoProvider:
		prov, ok = controller.NoProvider, true
	case human:
		prov, ok = controller.ProviderConfig{Name: hostconfig.HumanProvider, Kind: controller.KindNone}, true // a person has no model
	}
	if !ok {
		errs = append(errs, fmt.Errorf("the agent's provider %q is not configured in %s; add [providers.%s]", spec.Agent.Provider, x.Cfg.File, spec.Agent.Provider))
	}
	p.provider = prov
	p.price = x.Cfg.Prices.Price(spec.Agent)
	if m := t.Budget.MaxCost; !m.IsZero() && ok && prov.Kind != controller.KindNone {
		switch {
		case p.price == nil:
			errs = append(errs, fmt.Errorf("track %s bounds each run's cost (max_cost %s), and %s has no price for %s/%s; add [prices.models.%q] (input and output per million tokens) to it",
				t.Name, m, x.Cfg.File, spec.Agent.Provider, spec.Agent.Model, spec.Agent.Provider+"/"+spec.Agent.Model))
		case p.price.Currency != m.Currency:
			errs = append(errs, fmt.Errorf("track %s bounds each run's cost in %s (max_cost %s), and %s prices in %s; the bound cannot be checked in another currency", t.Name, m.Currency, m, x.Cfg.File, p.price.Currency))
		}
	}
	if sc, known := scaffolds.Lookup(p.scaffold); ok && known && string(t.Scaffold.ConfigSHA256) == sc.ConfigSHA256() {
		// A scaffold sealrun ships (scaffolds/NAME), with its config template: the config is
		// rendered now, so that a provider or model it cannot take is refused before anything
		// is created.
		env, err := sc.Render(scaffolds.Run{Kind: providerKind(prov), Gateway: controller.GatewayURL(0), Model: spec.Agent.Model, Effort: spec.Agent.Effort})
		if err != nil {
			errs = append(errs, fmt.Errorf("track %s pins the %s scaffold: %v", t.Name, sc.Name, err))
		}
		p.scaffoldEnv = env
		mem := x.Limits.MemoryBytes
		if mem == 0 {
			mem = t.Resources.Memory
		}
		if mem < sc.MemoryBytes {
			errs = append(errs, fmt.Errorf("track %s gives each container %s of memory ([resources] memory), and the %s scaffold %s it pins needs at least %s (scaffolds/%s/scaffold.toml, measured): below that the kernel's OOM killer ends it mid-run; raise memory to %s or more",
				t.Name, policy.FormatBytes(mem), sc.Name, sc.Version, sc.Memory, sc.Name, sc.Memory))
		}
	}
	if t.Status != policy.StatusActive {
		errs = append(errs, fmt.Errorf("track %s %s is %s: it takes no new runs", t.Name, t.Version, t.Status))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &p, nil
}

// checkExam verifies an exam track's exam, kit and validation set.
func (x *Executor) checkExam(t *policy.Track, p *pins) []error {
	var errs []error
	var err error
	if p.exam, err = exams.Open(api.ContentPath(x.Cfg.StateDir, t.Exam.SHA256), t.Exam.SHA256); err != nil {
		errs = append(errs, fmt.Errorf("the hidden exam %s: %v; add it with sealrun content add EXAM", t.Exam.SHA256, err))
	} else if int64(len(p.exam.Questions)) != t.Exam.Questions || int64(p.exam.Header.ContextBytes) != t.Exam.ContextBytes {
		errs = append(errs, fmt.Errorf("the hidden exam has %d questions and %d bytes of context; the track says %d and %d", len(p.exam.Questions), p.exam.Header.ContextBytes, t.Exam.Questions, t.Exam.ContextBytes))
	}
	kitDir := api.KitPath(x.Cfg.StateDir, t.Kit.SHA256)
	if _, err := os.Stat(kitDir); err != nil {
		errs = append(errs, fmt.Errorf("track %s pins kit %s, which is not in this host's kit store (%v); add it with sealrun content add KITDIR (sealrun kit build makes one)", t.Name, t.Kit.SHA256, fileio.Cause(err)))
	} else if p.kit, err = kits.Open(kitDir); err != nil {
		errs = append(errs, fmt.Errorf("track %s: %w", t.Name, err))
	} else if err := p.kit.Check(t.Kit.SHA256, t.Name); err != nil {
		errs = append(errs, err)
	} else if f, ok := p.kit.File(kits.ValidationPath); !ok || f.SHA256 != t.Exam.ValidationSHA256 {
		errs = append(errs, fmt.Errorf("kit %s: %s has sha256 %s, track %s pins the validation set %s; the track and its kit disagree: rebuild the track from the kit", t.Kit.SHA256, kits.ValidationPath, f.SHA256, t.Name, t.Exam.ValidationSHA256))
	} else if p.validation, err = exams.Open(filepath.Join(p.kit.Dir, kits.ValidationPath), t.Exam.ValidationSHA256); err != nil {
		errs = append(errs, fmt.Errorf("kit %s: the validation set: %v", t.Kit.SHA256, err))
	}
	return errs
}

func providerKind(p controller.ProviderConfig) string {
	if p.Kind != "" {
		return p.Kind
	}
	return p.Name
}

// scaffold checks the track's scaffold pin against the controller image's labels and returns
// the scaffold's command (the image's entrypoint and command, or Executor.Entrypoint), its name
// and the image's own environment (controller/SCAFFOLD.md).
func (x *Executor) scaffold(t *policy.Track) ([]string, string, []string, error) {
	cf, err := x.Store.Config(string(t.Images.Controller.Digest))
	if err != nil {
		return nil, "", nil, fmt.Errorf("the controller image %s: %v", t.Images.Controller, err)
	}
	if err := controller.CheckImageEnv(cf.Config.Env); err != nil {
		return nil, "", nil, fmt.Errorf("the controller image %s: %w", t.Images.Controller, err)
	}
	labels := cf.Config.Labels
	var bad []string
	for _, l := range []struct{ key, want string }{
		{images.LabelScaffoldName, t.Scaffold.Name}, {images.LabelScaffoldVer, t.Scaffold.Version}, {images.LabelScaffoldConfig, string(t.Scaffold.ConfigSHA256)},
	} {
		if got := labels[l.key]; got != l.want {
			bad = append(bad, fmt.Sprintf("label %s is %q, the track says %q", l.key, got, l.want))
		}
	}
	if len(bad) > 0 {
		return nil, "", nil, fmt.Errorf("track %s pins scaffold %s %s (config %s), but its controller image %s is not that scaffold: %s; use the image the scaffold was released in, or a track that pins this one",
			t.Name, t.Scaffold.Name, t.Scaffold.Version, t.Scaffold.ConfigSHA256, t.Images.Controller, strings.Join(bad, "; "))
	}
	name := labels[images.LabelScaffoldName]
	if len(x.Entrypoint) > 0 {
		return x.Entrypoint, name, cf.Config.Env, nil
	}
	cmd := append(append([]string(nil), cf.Config.Entrypoint...), cf.Config.Cmd...)
	if len(cmd) == 0 {
		return nil, "", nil, fmt.Errorf("the controller image %s has no command (entrypoint or cmd): it carries no scaffold; give it an ENTRYPOINT or CMD", t.Images.Controller)
	}
	return cmd, name, cf.Config.Env, nil
}
