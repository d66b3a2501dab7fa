package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/renameio/v2"
	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/daemon"
	"github.com/sealrun/sealrun/exams"
	"github.com/sealrun/sealrun/images"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/kits"
	"github.com/sealrun/sealrun/policy"
	"github.com/spf13/cobra"
)

type pinFlags struct {
	out, lock                  string
	exam, kit, task, taskData  string
	controller, runner, grader string
}

func newTrackPinCmd(g *globals) *cobra.Command {
	var f pinFlags
	cmd := &cobra.Command{
		Use:   "pin TRACK.toml --out PINNED.toml [--exam EXAM] [--kit KITDIR] [--task DIR] [--task-data DIR] [--controller REF] [--runner REF] [--grader REF] [--lock images.lock]",
		Short: "Fill a track's pins from what this host holds (content store, kits, image store); print the new track id",
		Long: `Pin writes a copy of TRACK.toml with its pins filled from this host's stores, keeping the file's
comments and layout, then checks it and prints the new track id. Each value must already be on
this host, so a pinned track is one this host can run:

  --exam EXAM        the hidden exam file (or its sha256), added with sealrun content add:
                     exam.sha256, exam.questions, exam.context_bytes
  --kit KITDIR       a built kit (or its kit hash), added with sealrun content add:
                     kit.sha256 and exam.validation_sha256 (the kit's validation set)
  --task DIR         an AIRS task directory (or its tree hash), added with sealrun content add:
                     task.sha256 and task.name
  --task-data DIR    the task's raw data directory (or its tree hash): task.data_sha256
  --controller REF   the controller image: images.controller, and [scaffold] from its
                     dev.sealrun.scaffold.* labels
  --runner REF       the runner image (on a GPU host: a CUDA PyTorch image pinned by digest)
  --grader REF       the grader image

An image REF is name@sha256:<hex>, or a name in the --lock file (what sealrun images pin --lock
and images build-local write); it must be in the image store (sealrun images pull|import).
Pins not given keep their values. Pin refuses to write a track that still holds a placeholder
and names each with the flag that fills it. The track id changes with every pin: publish results
under the id printed.`,
		Example: `  sealrun content add exam.jsonl kit/
  sealrun images pin registry.example/lab/pytorch-cuda:2.5 --lock images.lock
  sealrun images pull registry.example/lab/pytorch-cuda@sha256:...
  sealrun track pin tracks/ari-v1.toml --out /etc/sealrun/tracks/ari-v1.toml \
      --exam exam.jsonl --kit kit/ --lock images.lock \
      --controller controller-opencode --runner registry.example/lab/pytorch-cuda:2.5 --grader python`,
		Args: exactArgs(1, "one track file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.out == "" {
				return usage(errors.New("--out is required: the pinned track's path (it may be TRACK.toml itself)"))
			}
			return pinTrack(cmd, g.stateDir, args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "", "write the pinned track here (atomically)")
	fl.StringVar(&f.lock, "lock", "", "images.lock to look image names up in")
	fl.StringVar(&f.exam, "exam", "", "hidden exam file or its sha256 (in the content store)")
	fl.StringVar(&f.kit, "kit", "", "built kit directory or its kit hash (installed)")
	fl.StringVar(&f.task, "task", "", "AIRS task directory or its tree hash (in the content store)")
	fl.StringVar(&f.taskData, "task-data", "", "AIRS raw data directory or its tree hash (in the content store)")
	fl.StringVar(&f.controller, "controller", "", "controller image: name@sha256:<hex> or a --lock name")
	fl.StringVar(&f.runner, "runner", "", "runner image: name@sha256:<hex> or a --lock name")
	fl.StringVar(&f.grader, "grader", "", "grader image: name@sha256:<hex> or a --lock name")
	return cmd
}

func pinTrack(cmd *cobra.Command, state, path string, f pinFlags) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("track %s: %w", path, errors.Unwrap(err))
	}
	old, err := policy.Parse(path, data)
	if err != nil {
		return reportProblems(cmd.ErrOrStderr(), err)
	}
	if old.Task != nil && (f.exam != "" || f.kit != "") {
		return usage(fmt.Errorf("%s is a task track ([task]): it pins --task and --task-data, not --exam or --kit", path))
	}
	if old.Task == nil && (f.task != "" || f.taskData != "") {
		return usage(fmt.Errorf("%s is an exam track ([exam] and [kit]): it pins --exam and --kit, not --task or --task-data", path))
	}
	text := newTrackText(string(data))
	var changes []string
	set := func(table, key, lit, from string) error {
		if err := text.set(table, key, lit, "# "+from); err != nil {
			return fmt.Errorf("track %s: %w", path, err)
		}
		changes = append(changes, fmt.Sprintf("%s.%s = %s  (%s)", table, key, lit, from))
		return nil
	}
	q := strconv.Quote

	if f.exam != "" {
		sha, e, err := pinExam(state, f.exam)
		if err != nil {
			return err
		}
		for _, kv := range [][3]string{{"sha256", q(sha), "sealrun exam hash"}, {"questions", strconv.Itoa(e.Questions), "the exam's header"}, {"context_bytes", strconv.Itoa(e.ContextBytes), "the exam's header"}} {
			if err := set("exam", kv[0], kv[1], kv[2]); err != nil {
				return err
			}
		}
	}
	if f.kit != "" {
		k, err := pinKit(state, f.kit)
		if err != nil {
			return err
		}
		val, ok := k.File(kits.ValidationPath)
		if !ok {
			return fmt.Errorf("kit %s has no %s (the public validation set an exam track pins); build it from a kit.toml that names one (kits/KIT.md)", f.kit, kits.ValidationPath)
		}
		if err := set("kit", "sha256", q(k.Hash), "sealrun kit hash"); err != nil {
			return err
		}
		if err := set("exam", "validation_sha256", q(val.SHA256), "the kit's "+kits.ValidationPath); err != nil {
			return err
		}
	}
	if f.task != "" {
		t, err := pinTree(state, f.task, "--task", true)
		if err != nil {
			return err
		}
		if err := set("task", "sha256", q(t.Hash), "sealrun task validate"); err != nil {
			return err
		}
		if err := set("task", "name", q(t.Meta.Info.Name), "the task's metadata.yaml"); err != nil {
			return err
		}
	}
	if f.taskData != "" {
		t, err := pinTree(state, f.taskData, "--task-data", false)
		if err != nil {
			return err
		}
		if err := set("task", "data_sha256", q(t.Hash), "the raw data's tree hash"); err != nil {
			return err
		}
	}
	if f.controller != "" || f.runner != "" || f.grader != "" {
		store, err := images.OpenStore(state)
		if err != nil {
			return err
		}
		lock := images.Lock{}
		if f.lock != "" {
			if _, err := os.Stat(f.lock); err != nil {
				return fmt.Errorf("--lock %s: %w; write one with sealrun images pin REF --lock %s or images build-local --lock %s", f.lock, errors.Unwrap(err), f.lock, f.lock)
			}
			if lock, err = images.ReadLock(f.lock); err != nil {
				return err
			}
		}
		for _, im := range []struct{ flag, key, v string }{{"--controller", "controller", f.controller}, {"--runner", "runner", f.runner}, {"--grader", "grader", f.grader}} {
			if im.v == "" {
				continue
			}
			ref, from, err := pinImage(store, state, lock, f.lock, im.flag, im.v)
			if err != nil {
				return err
			}
			if err := set("images", im.key, q(ref), from); err != nil {
				return err
			}
			if im.key != "controller" {
				continue
			}
			cf, err := store.Config(ref[strings.LastIndex(ref, "@")+1:])
			if err != nil {
				return err
			}
			labels := cf.Config.Labels
			for _, l := range []struct{ label, key string }{{images.LabelScaffoldName, "name"}, {images.LabelScaffoldVer, "version"}, {images.LabelScaffoldConfig, "config_sha256"}} {
				v := labels[l.label]
				if v == "" {
					return fmt.Errorf("--controller %s: the image has no %s label, so its scaffold cannot be pinned; a scaffold image carries %s, %s and %s (README.md, \"Your own scaffold\")",
						im.v, l.label, images.LabelScaffoldName, images.LabelScaffoldVer, images.LabelScaffoldConfig)
				}
				if err := set("scaffold", l.key, q(v), "label "+l.label); err != nil {
					return err
				}
			}
		}
	}

	pinned, err := policy.Parse(f.out, []byte(text.String()))
	if err != nil {
		return reportProblems(cmd.ErrOrStderr(), err)
	}
	if left := unpinned(pinned); len(left) > 0 {
		return fmt.Errorf("track %s still holds placeholders, so %s was not written: %s; give those flags (sealrun track pin --help)", path, f.out, strings.Join(left, ", "))
	}
	if missing := missingOnHost(state, pinned); len(missing) > 0 {
		return fmt.Errorf("track %s pins what this host does not hold, so %s was not written: %s; give those flags with what this host holds, or add it (sealrun content add, sealrun images pull|import)", path, f.out, strings.Join(missing, ", "))
	}
	if err := renameio.WriteFile(f.out, []byte(text.String()), 0o644); err != nil {
		return ioError(fmt.Errorf("write %s: %w", f.out, err))
	}
	w := cmd.OutOrStdout()
	for _, c := range changes {
		fmt.Fprintf(w, "  %s\n", c)
	}
	if old.ID == pinned.ID {
		fmt.Fprintf(w, "%s: track id %s (unchanged: every pin already held these values)\n", f.out, pinned.ID)
	} else {
		fmt.Fprintf(w, "%s: track id %s (was %s)\n", f.out, pinned.ID, old.ID)
	}
	return nil
}

// pinExam finds the hidden exam in the content store by file or sha256 and reads its header.
func pinExam(state, v string) (string, exams.Header, error) {
	sha := v
	if !hexSHA256.MatchString(v) {
		var err error
		if sha, err = fileio.SHA256(v); err != nil {
			return "", exams.Header{}, fmt.Errorf("--exam: %w", err)
		}
	}
	stored := daemon.ContentPath(state, sha)
	if _, err := os.Stat(stored); err != nil {
		return "", exams.Header{}, fmt.Errorf("--exam %s: exam %s is not in this host's content store (%s); add it: sealrun --state-dir %s content add EXAM", v, sha, stored, state)
	}
	e, err := exams.Open(stored, sha)
	if err != nil {
		return "", exams.Header{}, fmt.Errorf("--exam %s: %w", v, err)
	}
	return sha, e.Header, nil
}

// pinKit opens an installed kit by directory (a built kit, checked) or kit hash.
func pinKit(state, v string) (*kits.Kit, error) {
	hash := v
	if !hexSHA256.MatchString(v) {
		k, err := kits.Open(v)
		if err != nil {
			return nil, fmt.Errorf("--kit: %w", err)
		}
		hash = k.Hash
	}
	dir := daemon.KitPath(state, hash)
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("--kit %s: kit %s is not installed on this host (%s); add it: sealrun --state-dir %s content add KITDIR", v, hash, dir, state)
	}
	return kits.Open(dir)
}

// pinTree finds an AIRS task (task true) or raw data directory in the content store by
// directory or tree hash.
func pinTree(state, v, flag string, task bool) (*airs.Task, error) {
	hash := v
	if !hexSHA256.MatchString(v) {
		var err error
		if task {
			t, err := airs.Open(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", flag, err)
			}
			hash = t.Hash
		} else if _, hash, err = airs.TreeHash(v, airs.MaxDataFiles, airs.MaxDataBytes); err != nil {
			return nil, fmt.Errorf("%s %s: %w", flag, v, err)
		}
	}
	dir := daemon.TreePath(state, hash)
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("%s %s: %s is not in this host's content store (%s); add it: sealrun --state-dir %s content add DIR", flag, v, hash, dir, state)
	}
	if !task {
		return &airs.Task{Dir: dir, Hash: hash}, nil
	}
	return airs.OpenStored(dir)
}

// pinImage resolves an image flag to name@sha256:<hex> via the lock or as given, and requires
// the image in the store.
func pinImage(store *images.Store, state string, lock images.Lock, lockPath, flag, v string) (ref, from string, err error) {
	ref, from = v, "as given"
	if l, ok := lock[v]; ok {
		ref, from = l, lockPath+": "+v
	} else if !strings.Contains(v, "@") {
		if lockPath != "" {
			return "", "", fmt.Errorf("%s %s: not a name in %s and not pinned by digest; pin it: sealrun images pin %s --lock %s", flag, v, lockPath, v, lockPath)
		}
		return "", "", fmt.Errorf("%s %s: not pinned by digest; pin it (sealrun images pin %s --lock images.lock) and give --lock images.lock, or give name@sha256:<hex>", flag, v, v)
	}
	d, err := images.ParsePinned(ref)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", flag, err)
	}
	if _, err := store.Get(d.DigestStr()); err != nil {
		if errors.Is(err, images.ErrNotFound) {
			return "", "", fmt.Errorf("%s %s: image %s is not in this host's image store (%s); fetch it: sealrun --state-dir %s images pull %s (or images import an OCI layout)", flag, v, ref, filepath.Join(state, "images"), state, ref)
		}
		return "", "", fmt.Errorf("%s %s: %w", flag, v, err)
	}
	return ref, from, nil
}

// missingOnHost lists the pins of t this host's stores lack (each as table.key and the flag of
// `sealrun track pin` that sets it): a pinned track is one this host can run.
func missingOnHost(state string, t *policy.Track) []string {
	var out []string
	have := func(path, key, flag string) {
		if _, err := os.Stat(path); err != nil {
			out = append(out, fmt.Sprintf("%s (%s)", key, flag))
		}
	}
	if t.Task != nil {
		have(daemon.TreePath(state, t.Task.SHA256), "task.sha256", "--task")
		have(daemon.TreePath(state, t.Task.DataSHA256), "task.data_sha256", "--task-data")
	} else {
		have(daemon.ContentPath(state, t.Exam.SHA256), "exam.sha256", "--exam")
		have(daemon.KitPath(state, t.Kit.SHA256), "kit.sha256", "--kit")
	}
	store, err := images.OpenStore(state)
	for _, im := range []struct {
		ref       policy.ImageRef
		key, flag string
	}{{t.Images.Controller, "images.controller", "--controller"}, {t.Images.Runner, "images.runner", "--runner"}, {t.Images.Grader, "images.grader", "--grader"}} {
		if err != nil {
			out = append(out, fmt.Sprintf("%s (%s: %v)", im.key, im.flag, err))
			continue
		}
		if _, err := store.Get(im.ref.Digest); err != nil {
			out = append(out, fmt.Sprintf("%s %s (%s)", im.key, im.ref, im.flag))
		}
	}
	return out
}
