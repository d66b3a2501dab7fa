package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/internal/testenv"
)

func TestFlagsAndConfig(t *testing.T) {
	// A price table with a model key that is not PROVIDER/MODEL, a negative price and an entry in
	// another currency: --check names each key.
	deploy, err := os.ReadFile("../../deploy/sealrun.toml")
	if err != nil {
		t.Fatal(err)
	}
	prices := filepath.Join(t.TempDir(), "prices.toml")
	os.WriteFile(prices, append(deploy, []byte(`
[prices]
currency = "USD"
taken = "2026-11-20"
[prices.models.openai]
input = 1
output = 1
[prices.models."openai/gpt-x"]
input = -1.25
output = 10
currency = "EUR"
`)...), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--help"}, 0, "Usage: sealrund"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"--bogus"}, 2, "flag provided but not defined"},
		{[]string{"--config", filepath.Join(t.TempDir(), "none.toml")}, 1, "the configuration is not valid; nothing was started"},
		{[]string{"--config", "../../deploy/sealrun.toml", "--check"}, 1, "keys.signing"},
		{[]string{"--config", prices, "--check"}, 1, `prices.models."openai": "openai" does not name a model`},
		{[]string{"--config", prices, "--check"}, 1, `prices.models."openai/gpt-x".input: -1.25; give a price per million tokens from 0`},
		{[]string{"--config", prices, "--check"}, 1, `prices.models."openai/gpt-x".currency: "EUR", but [prices] is in "USD"`},
	} {
		var errb bytes.Buffer
		if code := run(c.args, &errb); code != c.code || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d %q; want %d %q", c.args, code, errb.String(), c.code, c.want)
		}
	}
}

// The unit file is one systemd accepts (checked offline: CI runs no systemd as PID 1), pointing
// at this build's daemon.
func TestUnitFileVerifies(t *testing.T) {
	analyze := testenv.RequireTool(t, "systemd-analyze", "systemd")
	self, err := filepath.Abs("../../bin/sealrund")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(self); err != nil {
		testenv.Missing(t, "bin/sealrund is not built: make build (make test does)")
	}
	unit, err := os.ReadFile("../../deploy/sealrund.service")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "sealrund.service")
	os.WriteFile(p, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/sealrund", self)), 0o644)
	out, err := exec.Command(analyze, "verify", p).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// A release build (make build: no -tags sealrun_testseams) has no test seams: set at run time,
// each is refused before anything starts, never honoured nor silently ignored. The test build
// these tests run as has them.
func TestReleaseBuildRefusesSeams(t *testing.T) {
	goBin := testenv.RequireTool(t, "go", "Go")
	bin := filepath.Join(t.TempDir(), "sealrund")
	build := exec.Command(goBin, "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=") // no tags: as make build makes it
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, env := range []string{"SEALRUND_TEST_ENTRYPOINT=sh /evil.sh", "SEALRUND_TEST_OVERLAY=/tmp/x", "SEALRUND_TEST_HOLD=sign", "SEALRUND_TEST_KILL_AFTER=sealed"} {
		cmd := exec.Command(bin, "--config", "../../deploy/sealrun.toml")
		cmd.Env = append(os.Environ(), env)
		out, err := cmd.CombinedOutput()
		name, _, _ := strings.Cut(env, "=")
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), name+" set, but this sealrund is a release build") {
			t.Errorf("%s on a release build: %v\n%s", env, err, out)
		}
	}
}
