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
		cmd.Env = append(os.Environ(), "SSH_ORIGINAL_COMMAND="+c.cmd, "SSH_USER_AUTH=")
		out, _ := cmd.CombinedOutput()
		code := cmd.ProcessState.ExitCode()
		if code != c.code || !strings.Contains(string(out), c.want) || (c.code != 0 && strings.Contains(string(out), "sealrun ")) {
			t.Errorf("SSH_ORIGINAL_COMMAND=%q: exit %d %q; want %d %q", c.cmd, code, out, c.code, c.want)
		}
	}
	// With sshd's ExposeAuthInfo, the key the person logged in with goes with the attach.
	for cmdline, want := range map[string]string{
		"attach r-20261128-121633-278104": "sealrun attach r-20261128-121633-278104 --ssh-auth /tmp/sshauth.AbC\n",
		"watch r-20261128-121633-278104":  "sealrun attach --watch r-20261128-121633-278104 --ssh-auth /tmp/sshauth.AbC\n",
	} {
		cmd := exec.Command(script)
		cmd.Env = append(os.Environ(), "SSH_ORIGINAL_COMMAND="+cmdline, "SSH_USER_AUTH=/tmp/sshauth.AbC")
		if out, err := cmd.CombinedOutput(); err != nil || string(out) != want {
			t.Errorf("SSH_ORIGINAL_COMMAND=%q with SSH_USER_AUTH: %v %q; want %q", cmdline, err, out, want)
		}
	}
}

// TestSSHAuthKey: the key in sshd's ExposeAuthInfo file, fingerprinted as ssh-keygen -lf does
// (keys made by ssh-keygen); files that are not it are refused, each saying why.
func TestSSHAuthKey(t *testing.T) {
	keygen, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Fatalf("ssh-keygen is missing (openssh-client: make deps): %v", err)
	}
	dir := t.TempDir()
	var keys, fps []string
	for _, typ := range []string{"ed25519", "ecdsa"} {
		k := filepath.Join(dir, typ)
		if out, err := exec.Command(keygen, "-q", "-t", typ, "-N", "", "-f", k).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v %s", err, out)
		}
		out, err := exec.Command(keygen, "-lf", k+".pub").Output()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := os.ReadFile(k + ".pub")
		keys = append(keys, strings.TrimSpace(string(pub)))
		fps = append(fps, strings.Fields(string(out))[1])
	}
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o600)
		return p
	}
	for i, k := range keys {
		got, err := sshAuthKey(write("auth", "publickey "+k+"\n"))
		if err != nil || got != fps[i] {
			t.Errorf("key %d: %q, %v; ssh-keygen -lf says %q", i, got, err, fps[i])
		}
	}
	// A password first, then the key (AuthenticationMethods password,publickey): the key.
	if got, err := sshAuthKey(write("two", "password\npublickey "+keys[0]+"\n")); err != nil || got != fps[0] {
		t.Errorf("password then key: %q, %v", got, err)
	}
	for _, c := range []struct{ name, text, want string }{
		{"empty", "", "no publickey line"},
		{"a password only", "password\n", "no publickey line"},
		{"two keys", "publickey " + keys[0] + "\npublickey " + keys[1] + "\n", "more than one key"},
		{"no key", "publickey ssh-ed25519\n", "without its key"},
		{"not base64", "publickey ssh-ed25519 %%%%\n", "not base64"},
		{"oversized", strings.Repeat("x", MaxSSHAuthBytes+1), "over 65536 bytes"},
	} {
		if _, err := sshAuthKey(write(c.name, c.text)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
	if _, err := sshAuthKey(filepath.Join(dir, "absent")); err == nil || !strings.Contains(err.Error(), "ExposeAuthInfo") {
		t.Errorf("absent: %v", err)
	}
}

// The people flags of run and attach are checked before anything is asked of sealrund.
func TestPeopleFlags(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	track := filepath.Join(t.TempDir(), "t.toml")
	os.WriteFile(track, []byte("x"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"attach", "r-1", "--take-over"}, "--take-over needs --reason"},
		{[]string{"attach", "r-1", "--reason", "x"}, "--reason goes with --take-over"},
		{[]string{"attach", "r-1", "--take-over", "--reason", "x", "--watch"}, "read-only"},
		{[]string{"attach", "r-1", "--take-over", "--reason", "two\nlines"}, "control character"},
		{[]string{"attach", "r-1", "--ssh-auth", "/nonexistent/auth"}, "--ssh-auth"},
		{[]string{"run", "--track", track, "--agent", "human/bob", "--seed", "1", "--person-key", "SHA256:x"}, "--person-key needs --person"},
		{[]string{"run", "--track", track, "--agent", "human/bob", "--seed", "1", "--person", "Bob;rm"}, "not an account name"},
		{[]string{"run", "--track", track, "--agent", "human/bob", "--seed", "1", "--person", "bob", "--person-key", "MD5:aa"}, "not an ssh key's fingerprint"},
		{[]string{"run", "--track", track, "--agent", "human/bob", "--seed", "1", "--proctor", "carol,carol"}, "named twice"},
	} {
		r := sealrun(t, append(c.args, "--socket", sock)...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("sealrun %q: exit %d, %q; want %q", c.args, r.code, r.stderr, c.want)
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
		{[]string{"pause", "r-1"}, "--reason: none given: a pause is published with its reason"},
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
