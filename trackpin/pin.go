// Package trackpin fills a track's pins from what a host holds: the hidden exam, kits and AIRS
// task trees in the content store, images in the image store (by digest, or by a name in an
// images.lock). It edits the track file's text in place, so the author's comments and layout
// stay, and it refuses a result that still holds a placeholder or pins what the host lacks: a
// pinned track is one this host can run. `sealrun track pin` and the demo use it.
package trackpin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/exams"
	"github.com/sealrun/sealrun/images"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/internal/opt"
	"github.com/sealrun/sealrun/kits"
	"github.com/sealrun/sealrun/policy"
)

// Pins are the values to fill, each a path or a hash (an image: name@sha256:<hex> or a name in
// Lock); an empty one keeps the track's value. Errors name each by its field (an *opt.Error);
// `sealrun track pin` names them as its flags (--exam, --kit, ...), the way an operator gives them.
type Pins struct {
	Exam       string // the hidden exam file or its sha256: exam.sha256, exam.questions, exam.context_bytes
	Kit        string // a built kit directory or its kit hash: kit.sha256, exam.validation_sha256
	Task       string // an AIRS task directory or its tree hash: task.sha256, task.name
	TaskData   string // the task's raw data directory or its tree hash: task.data_sha256
	Controller string // the controller image: images.controller and [scaffold] from its labels
	Runner     string // the runner image: images.runner
	Grader     string // the grader image: images.grader
	Lock       string // an images.lock to look image names up in
}

// Pinned is a track with its pins filled.
type Pinned struct {
	Text    string        // the pinned file's text
	Track   *policy.Track // Text, parsed
	Was     *policy.Track // the track before
	Changes []string      // each value set: "table.key = value  (where it came from)"
}

// UsageError is a pin the track's kind does not take (an exam pin on a task track, or the
// reverse): the request is wrong, not the host.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Pin fills the pins p gives into the track file path (its contents data) from the stores of the
// state directory state. out is where the caller will write the result (named in messages and
// as the parsed track's file). A track that does not parse is a *policy.InvalidTrackError; a
// pin the track's kind does not take is a *UsageError.
func Pin(state, path string, data []byte, out string, p Pins) (*Pinned, error) {
	old, err := policy.Parse(path, data)
	if err != nil {
		return nil, err
	}
	if old.Task != nil && (p.Exam != "" || p.Kit != "") {
		return nil, &UsageError{opt.New("trackpin.Pins", "", fmt.Sprintf("%s is a task track ([task]): it pins a task and its data, not an exam or a kit", path), "Task", "TaskData")}
	}
	if old.Task == nil && (p.Task != "" || p.TaskData != "") {
		return nil, &UsageError{opt.New("trackpin.Pins", "", fmt.Sprintf("%s is an exam track ([exam] and [kit]): it pins an exam and a kit, not a task or its data", path), "Exam", "Kit")}
	}
	e := &editor{state: state, path: path, text: newTrackText(string(data))}
	for _, step := range []func(Pins) error{e.exam, e.kit, e.task, e.images} {
		if err := step(p); err != nil {
			return nil, err
		}
	}
	text := e.text.String()
	pinned, err := policy.Parse(out, []byte(text))
	if err != nil {
		return nil, err
	}
	if left := Unpinned(pinned); len(left) > 0 {
		keys, options := pinList(left)
		return nil, opt.New("trackpin.Pins", "", fmt.Sprintf("track %s still holds placeholders, so %s was not written: %s", path, out, keys), options...)
	}
	if missing := missingOnHost(state, pinned); len(missing) > 0 {
		keys, options := pinList(missing)
		return nil, opt.New("trackpin.Pins", "", fmt.Sprintf("track %s pins what this host does not hold, so %s was not written: %s; add it (sealrun content add, sealrun images pull|import), or pin what this host holds", path, out, keys), options...)
	}
	return &Pinned{Text: text, Track: pinned, Was: old, Changes: e.changes}, nil
}

// WriteFile writes the pinned track to path atomically.
func (p *Pinned) WriteFile(path string) error {
	if err := fileio.WriteFile(path, []byte(p.Text), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// editor sets a track's values from a host's stores, one kind of pin at a time.
type editor struct {
	state, path string
	text        *trackText
	changes     []string
}

// set gives table.key the TOML literal lit, noting where it came from.
func (e *editor) set(table, key, lit, from string) error {
	if err := e.text.set(table, key, lit, "# "+from); err != nil {
		return fmt.Errorf("track %s: %w", e.path, err)
	}
	e.changes = append(e.changes, fmt.Sprintf("%s.%s = %s  (%s)", table, key, lit, from))
	return nil
}

// exam pins the hidden exam: its hash and its header's counts.
func (e *editor) exam(p Pins) error {
	if p.Exam == "" {
		return nil
	}
	sha, h, err := pinExam(e.state, p.Exam)
	if err != nil {
		return err
	}
	for _, kv := range [][3]string{{"sha256", strconv.Quote(sha), "sealrun exam hash"}, {"questions", strconv.Itoa(h.Questions), "the exam's header"}, {"context_bytes", strconv.Itoa(h.ContextBytes), "the exam's header"}} {
		if err := e.set("exam", kv[0], kv[1], kv[2]); err != nil {
			return err
		}
	}
	return nil
}

// kit pins the kit and the validation set it carries.
func (e *editor) kit(p Pins) error {
	if p.Kit == "" {
		return nil
	}
	k, err := pinKit(e.state, p.Kit)
	if err != nil {
		return err
	}
	val, ok := k.File(kits.ValidationPath)
	if !ok {
		return fmt.Errorf("kit %s has no %s (the public validation set an exam track pins); build it from a kit.toml that names one (kits/KIT.md)", p.Kit, kits.ValidationPath)
	}
	if err := e.set("kit", "sha256", strconv.Quote(string(k.Hash)), "sealrun kit hash"); err != nil {
		return err
	}
	return e.set("exam", "validation_sha256", strconv.Quote(string(val.SHA256)), "the kit's "+kits.ValidationPath)
}

// task pins an AIRS task's tree and name, and its raw data's tree.
func (e *editor) task(p Pins) error {
	if p.Task != "" {
		t, err := pinTree(e.state, p.Task, "Task", true)
		if err != nil {
			return err
		}
		if err := e.set("task", "sha256", strconv.Quote(string(t.Hash)), "sealrun task validate"); err != nil {
			return err
		}
		if err := e.set("task", "name", strconv.Quote(t.Meta.Info.Name), "the task's metadata.yaml"); err != nil {
			return err
		}
	}
	if p.TaskData != "" {
		t, err := pinTree(e.state, p.TaskData, "TaskData", false)
		if err != nil {
			return err
		}
		return e.set("task", "data_sha256", strconv.Quote(string(t.Hash)), "the raw data's tree hash")
	}
	return nil
}

// images pins the three images, and the scaffold from the controller image's labels.
func (e *editor) images(p Pins) error {
	if p.Controller == "" && p.Runner == "" && p.Grader == "" {
		return nil
	}
	store, err := images.OpenStore(e.state)
	if err != nil {
		return err
	}
	lock := images.Lock{}
	if p.Lock != "" {
		if _, err := os.Stat(p.Lock); err != nil {
			return opt.New("trackpin.Pins", "Lock", fmt.Sprintf("%s: %v; write one with sealrun images pin REF --lock %s or images build-local --lock %s", p.Lock, errors.Unwrap(err), p.Lock, p.Lock))
		}
		if lock, err = images.ReadLock(p.Lock); err != nil {
			return err
		}
	}
	for _, im := range []struct{ option, key, v string }{{"Controller", "controller", p.Controller}, {"Runner", "runner", p.Runner}, {"Grader", "grader", p.Grader}} {
		if im.v == "" {
			continue
		}
		ref, from, err := pinImage(store, e.state, lock, p.Lock, im.option, im.v)
		if err != nil {
			return err
		}
		if err := e.set("images", im.key, strconv.Quote(ref), from); err != nil {
			return err
		}
		if im.key == "controller" {
			if err := e.scaffold(store, im.v, ref); err != nil {
				return err
			}
		}
	}
	return nil
}

// scaffold pins [scaffold] from the controller image's dev.sealrun.scaffold.* labels.
func (e *editor) scaffold(store *images.Store, given, ref string) error {
	cf, err := store.Config(ref[strings.LastIndex(ref, "@")+1:])
	if err != nil {
		return err
	}
	labels := cf.Config.Labels
	for _, l := range []struct{ label, key string }{{images.LabelScaffoldName, "name"}, {images.LabelScaffoldVer, "version"}, {images.LabelScaffoldConfig, "config_sha256"}} {
		v := labels[l.label]
		if v == "" {
			return opt.New("trackpin.Pins", "Controller", fmt.Sprintf("%s: the image has no %s label, so its scaffold cannot be pinned; a scaffold image carries %s, %s and %s (controller/SCAFFOLD.md, \"The image\")",
				given, l.label, images.LabelScaffoldName, images.LabelScaffoldVer, images.LabelScaffoldConfig))
		}
		if err := e.set("scaffold", l.key, strconv.Quote(v), "label "+l.label); err != nil {
			return err
		}
	}
	return nil
}

// pinExam finds the hidden exam in the content store by file or sha256 and reads its header.
func pinExam(state, v string) (string, exams.Header, error) {
	sha := v
	if !digest.IsHex(v) {
		var err error
		if sha, err = fileio.SHA256(v); err != nil {
			return "", exams.Header{}, opt.Wrap("trackpin.Pins", "Exam", err)
		}
	}
	stored := api.ContentPath(state, digest.Hex(sha))
	if _, err := os.Stat(stored); err != nil {
		return "", exams.Header{}, opt.New("trackpin.Pins", "Exam", fmt.Sprintf("%s: exam %s is not in this host's content store (%s); add it: sealrun --state-dir %s content add EXAM", v, sha, stored, state))
	}
	e, err := exams.Open(stored, digest.Hex(sha))
	if err != nil {
		return "", exams.Header{}, &opt.Error{Where: "trackpin.Pins", Option: "Exam", Problem: v, Err: err}
	}
	return sha, e.Header, nil
}

// pinKit opens an installed kit by directory (a built kit, checked) or kit hash.
func pinKit(state, v string) (*kits.Kit, error) {
	hash := v
	if !digest.IsHex(v) {
		k, err := kits.Open(v)
		if err != nil {
			return nil, opt.Wrap("trackpin.Pins", "Kit", err)
		}
		hash = string(k.Hash)
	}
	dir := api.KitPath(state, digest.Hex(hash))
	if _, err := os.Stat(dir); err != nil {
		return nil, opt.New("trackpin.Pins", "Kit", fmt.Sprintf("%s: kit %s is not installed on this host (%s); add it: sealrun --state-dir %s content add KITDIR", v, hash, dir, state))
	}
	return kits.Open(dir)
}

// pinTree finds an AIRS task (task true) or raw data directory in the content store by
// directory or tree hash.
func pinTree(state, v, option string, task bool) (*airs.Task, error) {
	hash := digest.Hex(v)
	if !digest.IsHex(v) {
		var err error
		if task {
			t, err := airs.Open(v)
			if err != nil {
				return nil, opt.Wrap("trackpin.Pins", option, err)
			}
			hash = t.Hash
		} else if _, hash, err = airs.TreeHash(v, airs.MaxDataFiles, airs.MaxDataBytes); err != nil {
			return nil, &opt.Error{Where: "trackpin.Pins", Option: option, Problem: v, Err: err}
		}
	}
	dir := api.TreePath(state, hash)
	if _, err := os.Stat(dir); err != nil {
		return nil, opt.New("trackpin.Pins", option, fmt.Sprintf("%s: %s is not in this host's content store (%s); add it: sealrun --state-dir %s content add DIR", v, hash, dir, state))
	}
	if !task {
		return &airs.Task{Dir: dir, Hash: hash}, nil
	}
	return airs.OpenStored(dir)
}

// pinImage resolves an image pin to name@sha256:<hex> via the lock or as given, and requires
// the image in the store.
func pinImage(store *images.Store, state string, lock images.Lock, lockPath, option, v string) (ref, from string, err error) {
	ref, from = v, "as given"
	if l, ok := lock[v]; ok {
		ref, from = l, lockPath+": "+v
	} else if !strings.Contains(v, "@") {
		if lockPath != "" {
			return "", "", opt.New("trackpin.Pins", option, fmt.Sprintf("%s: not a name in %s and not pinned by digest; pin it: sealrun images pin %s --lock %s", v, lockPath, v, lockPath))
		}
		return "", "", opt.New("trackpin.Pins", option, fmt.Sprintf("%s: not pinned by digest; pin it (sealrun images pin %s --lock images.lock) and give the lock file, or give name@sha256:<hex>", v, v), "Lock")
	}
	d, err := images.ParsePinned(ref)
	if err != nil {
		return "", "", opt.Wrap("trackpin.Pins", option, err)
	}
	if _, err := store.Get(d.DigestStr()); err != nil {
		if errors.Is(err, images.ErrNotFound) {
			return "", "", opt.New("trackpin.Pins", option, fmt.Sprintf("%s: image %s is not in this host's image store (%s); fetch it: sealrun --state-dir %s images pull %s (or images import an OCI layout)", v, ref, filepath.Join(state, "images"), state, ref))
		}
		return "", "", &opt.Error{Where: "trackpin.Pins", Option: option, Problem: v, Err: err}
	}
	return ref, from, nil
}

// missingOnHost lists the pins of t this host's stores lack (each its table.key and the option
// that sets it): a pinned track is one this host can run.
func missingOnHost(state string, t *policy.Track) []Placeholder {
	var out []Placeholder
	have := func(path, key, option string) {
		if _, err := os.Stat(path); err != nil {
			out = append(out, Placeholder{Key: key, Option: option})
		}
	}
	if t.Task != nil {
		have(api.TreePath(state, t.Task.SHA256), "task.sha256", "Task")
		have(api.TreePath(state, t.Task.DataSHA256), "task.data_sha256", "TaskData")
	} else {
		have(api.ContentPath(state, t.Exam.SHA256), "exam.sha256", "Exam")
		have(api.KitPath(state, t.Kit.SHA256), "kit.sha256", "Kit")
	}
	store, err := images.OpenStore(state)
	for _, im := range []struct {
		ref         policy.ImageRef
		key, option string
	}{{t.Images.Controller, "images.controller", "Controller"}, {t.Images.Runner, "images.runner", "Runner"}, {t.Images.Grader, "images.grader", "Grader"}} {
		if err != nil {
			out = append(out, Placeholder{Key: fmt.Sprintf("%s (%v)", im.key, err), Option: im.option})
			continue
		}
		if _, err := store.Get(string(im.ref.Digest)); err != nil {
			out = append(out, Placeholder{Key: im.key + " " + im.ref.String(), Option: im.option})
		}
	}
	return out
}

// pinList is pins as a list of their keys and the options that set them (each once).
func pinList(pins []Placeholder) (keys string, options []string) {
	ks := make([]string, len(pins))
	for i, p := range pins {
		ks[i] = p.Key
		if !slices.Contains(options, p.Option) {
			options = append(options, p.Option)
		}
	}
	return strings.Join(ks, ", "), options
}
