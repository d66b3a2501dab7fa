package daemon

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/client"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
)

// TestAttachRole: who may attach to a human run, as what, and what a refusal says (who may,
// and nothing else of the run).
func TestAttachRole(t *testing.T) {
	const key = "SHA256:" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	const other = "SHA256:" + "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
	agent, _ := controller.ParseAgent("human/bob")
	bobRun := RunSpec{ID: "r-1", Agent: agent, Person: &api.Person{Account: "bob"}, Proctors: []string{"carol"}}
	keyRun := RunSpec{ID: "r-2", Agent: agent, Person: &api.Person{Account: "people", Key: key}}
	person := func(name string) peer { return peer{Name: name, Known: true, Person: true} }
	operator := func(name string) peer { return peer{Name: name, Known: true} }
	noneLive := func(string) bool { return false }
	aliceLive := func(a string) bool { return a == "alice" }
	for _, c := range []struct {
		name          string
		spec          RunSpec
		pr            peer
		watch         bool
		key, takeover string
		live          func(string) bool
		role, code    string
		say, never    string
	}{
		{"the person", bobRun, person("bob"), false, "", "", noneLive, RolePerson, "", "", ""},
		{"the person watching their own", bobRun, person("bob"), true, "", "", noneLive, RolePerson, "", "", ""},
		{"another person", bobRun, person("alice"), false, "", "", noneLive, "", api.CodeNotYourRun, "only bob may attach", "take it over"},
		{"another person watching", bobRun, person("alice"), true, "", "", noneLive, "", api.CodeNotProctor, "not a proctor of run r-1", "bob"},
		{"the named proctor", bobRun, person("carol"), true, "", "", noneLive, RoleProctor, "", "", ""},
		{"the named proctor, doing a run of their own", bobRun, person("carol"), true, "", "", func(a string) bool { return a == "carol" }, "", api.CodeNotProctor, "doing a human run of your own", ""},
		{"the proctor typing", bobRun, person("carol"), false, "", "", noneLive, "", api.CodeNotYourRun, "only bob may attach", ""},
		{"an operator watching", bobRun, operator("root"), true, "", "", noneLive, RoleOperator, "", "", ""},
		{"an operator without --take-over", bobRun, operator("root"), false, "", "", noneLive, "", api.CodeNotYourRun, "take it over", ""},
		{"an operator taking over", bobRun, operator("root"), false, "", "fire drill", noneLive, RoleOperator, "", "", ""},
		{"a person taking over", bobRun, person("alice"), false, "", "mine now", noneLive, "", api.CodeNotYourRun, "only an operator", ""},
		{"taking over a watch", bobRun, operator("root"), true, "", "x", noneLive, "", api.CodeNotYourRun, "read-only", ""},
		{"an operator doing their own human run is a person", bobRun, operator("alice"), true, "", "", aliceLive, "", api.CodeNotProctor, "not a proctor", ""},
		{"... and cannot take over", bobRun, operator("alice"), false, "", "x", aliceLive, "", api.CodeNotYourRun, "only an operator", ""},
		{"an unknown peer", bobRun, unknownPeer, true, "", "", noneLive, "", api.CodeNotProctor, "", ""},
		{"the key's person", keyRun, person("people"), false, key, "", noneLive, RolePerson, "", "", ""},
		{"the account with another key", keyRun, person("people"), false, other, "", noneLive, "", api.CodeNotYourRun, "people with key " + key, ""},
		{"the account without a key", keyRun, person("people"), false, "", "", noneLive, "", api.CodeNotYourRun, "--ssh-auth", ""},
	} {
		role, no := attachRole(c.spec.ID, c.spec, c.pr, c.watch, c.key, c.takeover, c.live)
		switch {
		case c.code == "" && (no != nil || role != c.role):
			t.Errorf("%s: got %q, %+v; want %q", c.name, role, no, c.role)
		case c.code != "" && (no == nil || no.code != c.code || !strings.Contains(no.msg, c.say) || c.never != "" && strings.Contains(no.msg, c.never)):
			t.Errorf("%s: got %q, %+v; want a refusal %s saying %q (and not %q)", c.name, role, no, c.code, c.say, c.never)
		}
	}
}

// TestCheckPeople: a human run's person and proctors are accounts of this host; an agent's run
// has neither; hostile names are refused before any lookup.
func TestCheckPeople(t *testing.T) {
	human, _ := controller.ParseAgent("human/root")
	nobody, _ := controller.ParseAgent("human/no-such-account-here")
	model, _ := controller.ParseAgent("scripted/m")
	if p, err := checkPeople(human, api.RunRequest{}); err != nil || p == nil || p.Account != "root" {
		t.Fatalf("human/root without --person: %+v, %v (want the account root)", p, err)
	}
	for _, c := range []struct {
		agent controller.Agent
		req   api.RunRequest
		say   string
	}{
		{nobody, api.RunRequest{}, "person: none given, and this host has no account"},
		{human, api.RunRequest{Person: &api.Person{Account: "no-such-account-here"}}, "this host has no such account"},
		{human, api.RunRequest{Person: &api.Person{Account: "Root; rm -rf /"}}, "is not an account name"},
		{human, api.RunRequest{Person: &api.Person{Account: "root", Key: "MD5:aa:bb"}}, "not an ssh key's fingerprint"},
		{human, api.RunRequest{Proctors: []string{"root"}}, "the run's own person"},
		{human, api.RunRequest{Person: &api.Person{Account: "root"}, Proctors: []string{"no-such-account-here"}}, "no such account"},
		{human, api.RunRequest{Proctors: []string{"daemon", "daemon"}}, "named twice"},
		{human, api.RunRequest{Proctors: make([]string, api.MaxProctors+1)}, "at most 16"},
		{human, api.RunRequest{Proctors: []string{strings.Repeat("a", 33)}}, "not an account name"},
		{model, api.RunRequest{Person: &api.Person{Account: "root"}}, "a human run's"},
		{model, api.RunRequest{Proctors: []string{"root"}}, "a human run's"},
	} {
		if _, err := checkPeople(c.agent, c.req); err == nil || !strings.Contains(err.Error(), c.say) {
			t.Errorf("%s %+v: %v; want an error saying %q", c.agent, c.req, err, c.say)
		}
	}
}

// accounts makes real accounts on this host for a test, members of PeopleGroup (made if the
// host has none) and of nogroup, and removes them (and a group it made) after. It returns each
// account's uid and the people group's gid.
func accounts(t *testing.T, names ...string) (map[string]uint32, uint32) {
	t.Helper()
	for _, tool := range []string{"useradd", "userdel", "groupadd", "groupdel", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing (passwd, util-linux: make deps): %v", tool, err)
		}
	}
	if _, err := user.LookupGroup(PeopleGroup); err != nil {
		if out, err := exec.Command("groupadd", PeopleGroup).CombinedOutput(); err != nil {
			t.Fatalf("groupadd %s: %v %s", PeopleGroup, err, out)
		}
		t.Cleanup(func() { exec.Command("groupdel", PeopleGroup).Run() })
	}
	g, err := user.LookupGroup(PeopleGroup)
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := strconv.Atoi(g.Gid)
	uids := map[string]uint32{}
	for _, n := range names {
		exec.Command("userdel", n).Run() // a killed earlier run's
		if out, err := exec.Command("useradd", "-M", "-N", "-g", "nogroup", "-G", PeopleGroup, "-d", "/nonexistent", "-s", "/bin/sh", n).CombinedOutput(); err != nil {
			t.Fatalf("useradd %s: %v %s", n, err, out)
		}
		t.Cleanup(func() { exec.Command("userdel", n).Run() })
		u, err := user.Lookup(n)
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		uids[n] = uint32(uid)
	}
	return uids, uint32(gid)
}

// TestPeopleBoundToRuns: with real accounts in the documented groups, driven as people would:
// bob's run is bob's. Alice's attach is refused (and her watch, and her take-over), each with a
// message naming who may and nothing of the run; carol, named proctor, watches and sees what bob
// types; root takes the terminal over only explicitly, with a reason; the audit log, the
// recording and the attestation say who was there, as what, from when to when.
func TestPeopleBoundToRuns(t *testing.T) {
	uids, people := accounts(t, "srt-alice", "srt-bob", "srt-carol")
	tb := newTestbed(t)
	sockDir, err := os.MkdirTemp("/run", "sealrun-people-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	os.Chmod(sockDir, 0o755)
	tb.cfg.Socket = filepath.Join(sockDir, "sealrun.sock")
	tb.cfg.Group = "nogroup"
	tb.trackTOML += "\n[human]\nstart = \"2m\"\n"
	trackFile := filepath.Join(tb.base, "track.toml")
	os.WriteFile(trackFile, []byte(tb.trackTOML), 0o644)
	d := startDaemon(t, tb, tb.executor())
	c := serveAPI(t, tb, d)
	cli := sandboxtest.Static(t, "cmd/sealrun")
	out, err := exec.Command(cli, "run", "--track", trackFile, "--agent", "human/bob", "--person", "srt-bob", "--proctor", "srt-carol", "--seed", "1", "--detach", "--socket", tb.cfg.Socket).CombinedOutput()
	if err != nil {
		t.Fatalf("sealrun run --person srt-bob: %v\n%s", err, out)
	}
	id := strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	as := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(cli, append(args, "--socket", tb.cfg.Socket)...)
		cmd.Dir, cmd.Env = "/", []string{"PATH=/usr/bin:/bin", "HOME=/"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uids[name], Gid: 65534, Groups: []uint32{65534, people}}}
		return cmd
	}
	refused := func(name, say string, args ...string) time.Duration {
		t.Helper()
		t0 := time.Now()
		out, err := as(name, args...).CombinedOutput()
		took := time.Since(t0)
		if err == nil || !strings.Contains(string(out), say) {
			t.Errorf("%s: sealrun %s: %v; want a refusal saying %q:\n%s", name, strings.Join(args, " "), err, say, out)
		}
		for _, never := range []string{"running", "queued", "preparing", "waiting", "srt-carol"} {
			if strings.Contains(string(out), never) {
				t.Errorf("%s's refusal tells of the run (%q):\n%s", name, never, out)
			}
		}
		return took
	}
	// Before bob has attached, and while the run is still being prepared: refused at once.
	refused("srt-alice", "run "+id+" is not yours: only srt-bob may attach", "attach", id)
	refused("srt-alice", "not a proctor of run "+id, "attach", "--watch", id)
	refused("srt-alice", "only an operator takes a run's terminal over", "attach", "--take-over", "--reason", "mine now", id)
	// A run that does not exist, or an agent's, is as closed to her as bob's: nothing of it told.
	refused("srt-alice", "run r-20260101-000000-abcdef is not yours: a person attaches to their own human run only", "attach", "r-20260101-000000-abcdef")
	// Nor anything else of sealrund: a person's account attaches, nothing more.
	aliceTrack := filepath.Join(sockDir, "track.toml")
	os.WriteFile(aliceTrack, []byte(tb.trackTOML), 0o644)
	for _, args := range [][]string{{"ps", "-a"}, {"show", id}, {"cancel", id}, {"logs", id}, {"pause", id, "--reason", "x"}, {"amend", id, "--note", "--reason", "mine to say"}, {"run", "--track", aliceTrack, "--agent", "human/srt-alice", "--seed", "2", "--detach"}} {
		refused("srt-alice", "srt-alice is a person's account (a member of "+PeopleGroup, args...)
	}

	// A uid the account database does not name is no one's: it is given a person's least.
	anon := exec.Command(cli, "ps", "--socket", tb.cfg.Socket)
	anon.Dir = "/"
	anon.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 54321, Gid: 65534}}
	if out, err := anon.CombinedOutput(); err == nil || !strings.Contains(string(out), "54321 is a person's account") {
		t.Errorf("an unnamed uid's sealrun ps: %v\n%s", err, out)
	}

	// Bob, in his own terminal (tmux), as his own account.
	m := newTmux(t)
	attached := `sealrun: attached to ` + regexp.QuoteMeta(id)
	m.run("new-session", "-d", "-s", "bob", "-x", "120", "-y", "40", "sh")
	bobAttach := fmt.Sprintf("setpriv --reuid=%d --regid=65534 --groups=65534,%d -- %s attach %s --socket %s", uids["srt-bob"], people, cli, id, tb.cfg.Socket)
	t0 := time.Now()
	m.typeLine("bob", bobAttach)
	m.waitForNth("bob", attached, 1, 120*time.Second)
	t.Logf("bob attached after %v", time.Since(t0))
	m.after("bob", attached, 1, `\[sealrun\] ~ \$`, 60*time.Second)

	// Carol watches, as her own account; what she is sent is what her terminal gets.
	var carolOut syncBuffer
	carol := as("srt-carol", "attach", "--watch", id)
	carol.Stdout, carol.Stderr = &carolOut, &carolOut
	if err := carol.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { carol.Process.Kill(); carol.Wait() })
	waitOutput(t, &carolOut, "watching "+id+" read-only", 30*time.Second)
	m.typeLine("bob", "echo BOB-$((40+2))")
	m.waitFor("bob", `BOB-42`, 10*time.Second)
	waitOutput(t, &carolOut, "BOB-42", 10*time.Second)
	// Bob's hostile bytes (a clipboard write, a title, a DCS, an APC, a window operation) reach
	// carol's terminal as nothing: what her watch client writes has none of them.
	m.typeLine("bob", `printf '\033]52;c;aGk=\007\033]0;pwned\007\033Pq#0;2;0;0;0\033\\\033_apc\033\\\033[8;1;1tHOSTILE-%s\n' DONE`)
	waitOutput(t, &carolOut, "HOSTILE-DONE", 10*time.Second)
	for _, raw := range []string{"\x1b]52", "\x1b]0;", "\x1bP", "\x1b_", "\x1b[8;1;1t"} {
		if strings.Contains(carolOut.String(), raw) {
			t.Errorf("carol's terminal was written %q", raw)
		}
	}

	// While bob is at it: alice is refused still, every time, as fast.
	var lat []time.Duration
	for range 20 {
		lat = append(lat, refused("srt-alice", "only srt-bob may attach", "attach", id))
	}
	slices.Sort(lat)
	t.Logf("refusal, a whole sealrun attach process as alice: p50 %v, max %v", lat[len(lat)/2], lat[len(lat)-1])

	// Root without --take-over is refused; with it, the terminal is taken, recorded with the reason.
	if _, err := c.Attach(t.Context(), id, false, 80, 24); !api.IsCode(err, api.CodeNotYourRun) || !strings.Contains(err.Error(), "--take-over") {
		t.Fatalf("root's attach without --take-over: %v", err)
	}
	op, err := c.AttachWith(t.Context(), id, client.AttachOptions{Takeover: "proctor check", Cols: 80, Rows: 24})
	if err != nil {
		t.Fatalf("root's take-over: %v", err)
	}
	m.waitFor("bob", `another attach took the terminal`, 10*time.Second)
	op.Input([]byte("echo OPERATOR-$((1+1))\r"))
	waitOutput(t, &carolOut, "OPERATOR-2", 10*time.Second)
	op.Detach()
	op.Close()

	// Bob comes back and finalizes with nothing submitted: his run fails, his own doing.
	m.typeLine("bob", bobAttach)
	m.waitForNth("bob", attached, 2, 30*time.Second)
	t1 := time.Now()
	m.typeLine("bob", "runner finalize")
	rec := waitState(t, d, id, api.StateFailed)
	t.Logf("finalized to failed in %v", time.Since(t1))
	waitOutput(t, &carolOut, "the run ended", 30*time.Second)
	carol.Wait()

	// The audit log and the recording: who, as what.
	_, attaches := readHumanRun(t, rec.Dir)
	log := string(mustRead(t, filepath.Join(rec.Dir, "audit.jsonl")))
	for _, want := range []string{"srt-bob (uid ", ", the person", "srt-carol (uid ", ", a proctor", ", an operator taking the terminal over: proctor check"} {
		if !strings.Contains(log, want) {
			t.Errorf("the audit log's attaches have no %q (%v)", want, attaches)
		}
	}
	if strings.Contains(log, "srt-alice") {
		t.Error("alice, refused, is in the run's audit log")
	}
	// The attestation: the person, the proctors, every attach, each one the audit log's.
	v, err := attest.Verify(mustRead(t, filepath.Join(rec.Dir, "result.att.json")), tb.verifier, attest.WithAuditLog(strings.NewReader(log)))
	if err != nil || !slices.Contains(v.Checks, "attaches") {
		t.Fatalf("verify with the audit log: %v (checks %v)", err, v.Checks)
	}
	h := v.Statement.Predicate.Human
	if h == nil || h.Person.Account != "srt-bob" || !slices.Equal(h.Proctors, []string{"srt-carol"}) {
		t.Fatalf("the attestation's people: %+v", h)
	}
	roles := map[string]int{}
	for _, a := range h.Attaches {
		roles[a.Role]++
		if a.Role == RoleOperator && (a.Takeover != "proctor check" || a.Watch) || a.Role == RoleProctor && !strings.HasPrefix(a.Account, "srt-carol (uid ") {
			t.Errorf("attach %+v", a)
		}
	}
	if roles[RolePerson] != 2 || roles[RoleProctor] != 1 || roles[RoleOperator] != 1 {
		t.Errorf("the attestation's attaches by role: %v; want 2 of the person, 1 proctor, 1 operator", roles)
	}
}

// syncBuffer is a process's output, read while it is written.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitOutput waits for want in what a process wrote (its own step's marker).
func waitOutput(t *testing.T, b *syncBuffer, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(time.Duration(testenv.Slow()) * timeout)
	for !strings.Contains(b.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in %s of output:\n%s", want, timeout, b.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPeopleThroughSSH: people who share one account, each with their own key, reach their run
// through a real sshd on loopback, configured as deploy/ssh documents (its ForceCommand, its
// Match block), and the run queued for p1's key is p1's: p2, logging in to the same account with
// another key, is refused; p1 gets the terminal; the attestation names p1's key.
func TestPeopleThroughSSH(t *testing.T) {
	for _, tool := range []string{"sshd", "ssh", "ssh-keygen", "usermod"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing (openssh-server, openssh-client, passwd: make deps): %v", tool, err)
		}
	}
	uids, people := accounts(t, "srt-pool")
	// sshd without PAM refuses a locked account ("!" in shadow): the pool's password is "*",
	// which no password matches, so that keys alone log in.
	if out, err := exec.Command("usermod", "-p", "*", "srt-pool").CombinedOutput(); err != nil {
		t.Fatalf("usermod: %v %s", err, out)
	}
	tb := newTestbed(t)
	sockDir, err := os.MkdirTemp("/run", "sealrun-ssh-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	os.Chmod(sockDir, 0o755)
	tb.cfg.Socket = filepath.Join(sockDir, "sealrun.sock")
	tb.cfg.Group = PeopleGroup
	tb.trackTOML += "\n[human]\nstart = \"2m\"\n"
	trackFile := filepath.Join(tb.base, "track.toml")
	os.WriteFile(trackFile, []byte(tb.trackTOML), 0o644)
	d := startDaemon(t, tb, tb.executor())
	serveAPI(t, tb, d)
	cli := sandboxtest.Static(t, "cmd/sealrun")

	// Two people's keys, both in the pool account's authorized keys; sshd's own host key.
	dir := filepath.Join(sockDir, "ssh")
	os.Mkdir(dir, 0o755)
	fp := map[string]string{}
	var authorized bytes.Buffer
	for _, k := range []string{"p1", "p2", "host"} {
		key := filepath.Join(dir, k)
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", k, "-f", key).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v %s", err, out)
		}
		out, _ := exec.Command("ssh-keygen", "-lf", key+".pub").Output()
		fp[k] = strings.Fields(string(out))[1]
		if k != "host" {
			pub, _ := os.ReadFile(key + ".pub")
			authorized.Write(pub)
		}
	}
	os.WriteFile(filepath.Join(dir, "srt-pool.keys"), authorized.Bytes(), 0o644)
	// The ForceCommand as deploy/ssh ships it, its sealrun this test's (on this test's socket).
	wrapper := filepath.Join(dir, "sealrun")
	os.WriteFile(wrapper, []byte("#!/bin/sh\nexec "+cli+" \"$@\" --socket "+tb.cfg.Socket+"\n"), 0o755)
	force, err := os.ReadFile("../deploy/ssh/sealrun-attach-ssh")
	if err != nil {
		t.Fatal(err)
	}
	forceCmd := filepath.Join(dir, "sealrun-attach-ssh")
	os.WriteFile(forceCmd, []byte(strings.Replace(string(force), "SEALRUN=/usr/local/bin/sealrun", "SEALRUN="+wrapper, 1)), 0o755)
	match, err := os.ReadFile("../deploy/ssh/sealrun-attach.conf")
	if err != nil {
		t.Fatal(err)
	}
	port := freeLoopbackPort(t)
	conf := fmt.Sprintf("ListenAddress 127.0.0.1:%d\nHostKey %s\nPidFile none\nUsePAM no\nStrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nAuthorizedKeysFile %s/%%u.keys\nAllowUsers srt-pool\n", port, filepath.Join(dir, "host"), dir) +
		strings.Replace(string(match), "/usr/local/bin/sealrun-attach-ssh", forceCmd, 1)
	confPath := filepath.Join(dir, "sshd_config")
	os.WriteFile(confPath, []byte(conf), 0o600)
	if _, err := os.Stat("/run/sshd"); err != nil { // sshd's privilege separation directory
		os.Mkdir("/run/sshd", 0o755)
		t.Cleanup(func() { os.Remove("/run/sshd") })
	}
	if out, err := exec.Command("/usr/sbin/sshd", "-t", "-f", confPath).CombinedOutput(); err != nil {
		t.Fatalf("sshd -t: the configuration deploy/ssh documents does not load: %v\n%s", err, out)
	}
	var sshdLog syncBuffer
	sshd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", confPath)
	sshd.Stdout, sshd.Stderr = &sshdLog, &sshdLog
	if err := sshd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sshd.Process.Kill(); sshd.Wait() })
	waitOutput(t, &sshdLog, "Server listening on 127.0.0.1", 10*time.Second)
	ssh := func(key string, tty bool, words ...string) []string {
		args := []string{"-i", filepath.Join(dir, key), "-p", strconv.Itoa(port), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR", "-o", "BatchMode=yes"}
		if tty {
			args = append(args, "-tt")
		} else {
			args = append(args, "-T")
		}
		return append(append(args, "srt-pool@127.0.0.1"), words...)
	}

	out, err := exec.Command(cli, "run", "--track", trackFile, "--agent", "human/p1", "--person", "srt-pool", "--person-key", fp["p1"], "--seed", "1", "--detach", "--socket", tb.cfg.Socket).CombinedOutput()
	if err != nil {
		t.Fatalf("sealrun run --person-key: %v\n%s", err, out)
	}
	id := strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	_ = uids

	// p2, the same account with another key: refused, naming whose the run is.
	out, err = exec.Command("ssh", ssh("p2", false, "attach", id)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "only srt-pool with key "+fp["p1"]+" may attach") {
		t.Fatalf("p2's attach through ssh: %v; want a refusal naming p1's key:\n%s\nsshd:\n%s", err, out, sshdLog.String())
	}
	// Anything but attach and watch: the ForceCommand's usage.
	if out, err := exec.Command("ssh", ssh("p2", false, "sealrun", "cancel", id)...).CombinedOutput(); err == nil || !strings.Contains(string(out), "usage: ssh -t") {
		t.Errorf("another command through ssh: %v\n%s", err, out)
	}

	// p1, in a terminal: the run's terminal.
	m := newTmux(t)
	m.run("new-session", "-d", "-s", "p1", "-x", "120", "-y", "40", "sh")
	m.typeLine("p1", "ssh "+strings.Join(ssh("p1", true, "attach", id), " "))
	attached := `sealrun: attached to ` + regexp.QuoteMeta(id)
	m.waitForNth("p1", attached, 1, 120*time.Second)
	m.after("p1", attached, 1, `\[sealrun\] ~ \$`, 60*time.Second)
	m.typeLine("p1", "echo P1-$((2+3))")
	m.waitFor("p1", `P1-5`, 10*time.Second)
	m.typeLine("p1", "runner finalize")
	rec := waitState(t, d, id, api.StateFailed)

	v, err := attest.Verify(mustRead(t, filepath.Join(rec.Dir, "result.att.json")), tb.verifier)
	if err != nil {
		t.Fatal(err)
	}
	h := v.Statement.Predicate.Human
	if h == nil || h.Person != (attest.Person{Account: "srt-pool", Key: fp["p1"]}) || len(h.Attaches) != 1 || h.Attaches[0].Key != fp["p1"] || h.Attaches[0].Role != RolePerson {
		t.Fatalf("the attestation's people: %+v", h)
	}
	if log := string(mustRead(t, filepath.Join(rec.Dir, "audit.jsonl"))); !strings.Contains(log, "srt-pool (uid "+strconv.Itoa(int(uids["srt-pool"]))) || !strings.Contains(log, "with key "+fp["p1"]+", the person") || strings.Contains(log, fp["p2"]) {
		t.Errorf("the audit log's attaches: want p1's key as the person's, and nothing of p2")
	}
	_ = people
}

// freeLoopbackPort is a TCP port free on 127.0.0.1 when asked.
func freeLoopbackPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestAttachReconnectLoop: 1,000 attaches in a loop, each detaching or just dropping its
// connection, some while a proctor watches, leave no slot held and the terminal as attachable as
// before; the attestation lists the first 256 attaches and counts the rest.
func TestAttachReconnectLoop(t *testing.T) {
	tb, d, _, _ := humanTestbed(t, "2m")
	c := client.New(tb.cfg.Socket)
	ctx := t.Context()
	rec, err := c.Submit(ctx, api.RunRequest{Track: tb.trackTOML, TrackName: "track.toml", Agent: "human/root", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var a *client.Attachment
	for deadline := time.Now().Add(time.Duration(testenv.Slow()) * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if a, err = c.Attach(ctx, rec.ID, false, 80, 24); err == nil {
			break
		} else if !api.IsCode(err, api.CodeNotYetRunning) || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	a.Detach()
	a.Close()
	t0 := time.Now()
	for i := range 1000 {
		a, err := c.Attach(ctx, rec.ID, i%3 == 0, 80, 24)
		if err != nil {
			t.Fatalf("attach %d: %v", i, err)
		}
		if _, _, err := a.Next(); err != nil { // the first output (the shell's history): attached
			t.Fatalf("attach %d: %v", i, err)
		}
		if i%2 == 0 {
			a.Detach()
		}
		a.Close() // the other half: the connection just drops
	}
	t.Logf("1,000 attaches in %v", time.Since(t0))
	// The slots come back as each connection's handler ends.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d.x.sessions.mu.Lock()
		held, users := d.x.sessions.attaches, len(d.x.sessions.byUser)
		d.x.sessions.mu.Unlock()
		if held == 0 && users == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 1,000 attaches, %d slots are still held (%d accounts)", held, users)
		}
	}
	// Still attachable, by the person and a watcher at once; then the person finalizes.
	w, err := c.Attach(ctx, rec.ID, true, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	p, err := c.Attach(ctx, rec.ID, false, 80, 24)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Input([]byte("runner finalize\r"))
	end := waitState(t, d, rec.ID, api.StateFailed)
	v, err := attest.Verify(mustRead(t, filepath.Join(end.Dir, "result.att.json")), tb.verifier)
	if err != nil {
		t.Fatal(err)
	}
	if h := v.Statement.Predicate.Human; h == nil || len(h.Attaches) != attest.MaxHumanAttaches || h.AttachesOmitted != 1003-attest.MaxHumanAttaches {
		t.Errorf("the attestation's attaches: %d listed, %d omitted; want %d and %d", len(h.Attaches), h.AttachesOmitted, attest.MaxHumanAttaches, 1003-attest.MaxHumanAttaches)
	}
}
