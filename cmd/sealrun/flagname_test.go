package main

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/internal/opt"
)

// A library's option and a field sealrund refused are named as the verb's flag they came from.
func TestFlagNames(t *testing.T) {
	root := newRootCmd(io.Discard, io.Discard)
	verify, _, err := root.Find([]string{"verify"})
	if err != nil {
		t.Fatal(err)
	}
	name := flagName(verify)
	for option, want := range map[string]string{"Key": "--key", "Keys": "--key", "TSAChain": "--tsa-chain", "Witnesses": "--witness",
		"Quorum": "--witnesses", "Export": "--export", "Transcript": "--transcript", "Rebuild": "--rebuild", "NoSuchOption": "no such option"} {
		if got := name(option); got != want {
			t.Errorf("verify: %s is %q; want %q", option, got, want)
		}
	}
	run, _, err := root.Find([]string{"run"})
	if err != nil {
		t.Fatal(err)
	}
	for option, want := range map[string]string{"seed": "--seed", "rerun_of": "--rerun-of", "person.key": "--person-key", "proctors": "--proctor", "gpus": "--gpus"} {
		if got := flagName(run)(option); got != want {
			t.Errorf("run: %s is %q; want %q", option, got, want)
		}
	}
	// Through a chain of wrappings, and sealrund's answer about a field.
	e := fmt.Errorf("ledger: %w", opt.New("verify.RunOptions", "Export", "is recomputed from the run's checked transcript", "Transcript"))
	if got, want := errorText(verify, e), "ledger: --export: is recomputed from the run's checked transcript; give --transcript"; got != want {
		t.Errorf("errorText = %q; want %q", got, want)
	}
	refused := &api.Error{Status: 422, Code: api.CodeRefused, Message: "seed: 1 already has run r-1: give another seed, or run it again; give rerun", Option: "seed", Needs: []string{"rerun"}}
	if got, want := errorText(run, refused), "--seed: 1 already has run r-1: give another seed, or run it again; give --rerun"; got != want {
		t.Errorf("errorText = %q; want %q", got, want)
	}
	if got := errorText(run, errors.New("rerun_of: not an option error")); got != "rerun_of: not an option error" {
		t.Errorf("a plain error changed: %q", got)
	}
}
