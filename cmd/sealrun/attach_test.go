package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttachForceCommand runs deploy/ssh/sealrun-attach-ssh, sshd's ForceCommand for people on
// other machines, as sshd would (the person's words in SSH_ORIGINAL_COMMAND), with a sealrun that
// prints what it was given: attach and watch reach sealrun attach with the run alone; anything
// else (another verb, a flag, a second command, a path, extra words) is refused with why.
func TestAttachForceCommand(t *testing.T) {
	src, err := os.ReadFile("../../deploy/ssh/sealrun-attach-ssh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	stub := filepath.Join(dir, "sealrun")
	os.WriteFile(stub, []byte("#!/bin/sh\necho \"sealrun $*\"\n"), 0o755)
	script := filepath.Join(dir, "sealrun-attach-ssh")
	os.WriteFile(script, []byte(strings.Replace(string(src), "SEALRUN=/usr/local/bin/sealrun", "SEALRUN="+stub, 1)), 0o755)
	for _, c := range []struct {
		cmd  string
		code int
		want string
	}{
		{"attach r-20261128-121633-278104", 0, "sealrun attach r-20261128-121633-278104\n"},
		{"watch r-20261128-121633-278104", 0, "sealrun attach --watch r-20261128-121633-278104\n"},
		{"attach r-x;id", 2, "no run r-x..."},
		{"attach r-x$(id)", 2, "no run r-x..."},
		{"attach r-x`id`", 2, "no run r-x..."},
		{"attach r-*", 2, "no run r-..."},
		{"attach ../../etc/shadow", 2, "usage:"},
		{"attach --socket /tmp/evil.sock", 2, "usage:"},
		{"attach r-abc extra", 2, "usage:"},
		{"cancel r-abc", 2, "usage:"},
		{"attach r-", 2, "usage:"},
		{"", 2, "usage:"},
		{"sh", 2, "usage:"},
	} {
		cmd := exec.Command(script)
		cmd.Env = append(os.Environ(), "SSH_ORIGINAL_COMMAND="+c.cmd)
		out, _ := cmd.CombinedOutput()
		code := cmd.ProcessState.ExitCode()
		if code != c.code || !strings.Contains(string(out), c.want) || (c.code != 0 && strings.Contains(string(out), "sealrun ")) {
			t.Errorf("SSH_ORIGINAL_COMMAND=%q: exit %d %q; want %d %q", c.cmd, code, out, c.code, c.want)
		}
	}
}

// Pause's flags are checked before anything is asked of sealrund: a reason is required, text on
// one line; a length is positive.
func TestPauseFlags(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pause", "r-1"}, "--reason: a pause needs its reason"},
		{[]string{"pause", "r-1", "--reason", "two\nlines"}, "control character"},
		{[]string{"pause", "r-1", "--reason", strings.Repeat("x", 301)}, "at most 300"},
		{[]string{"pause", "r-1", "--reason", "ok", "--for", "-5s"}, "give a positive length"},
		{[]string{"pause", "r-1", "--reason", "ok", "--for", "soon"}, "invalid argument \"soon\""},
		{[]string{"pause"}, "one run id"},
		{[]string{"resume"}, "one run id"},
		{[]string{"pause", "r-1", "--reason", "fire alarm"}, "sealrund"}, // well formed: asks the daemon, which is not there
	} {
		r := sealrun(t, append(c.args, "--socket", sock)...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("sealrun %q: exit %d, %q; want %q", c.args, r.code, r.stderr, c.want)
		}
	}
}
