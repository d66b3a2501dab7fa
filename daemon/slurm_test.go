package daemon

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/leaderboard"
)

// slurmCluster is a one-node Slurm cluster on this machine (munged, slurmctld, slurmd from
// Debian's packages), configured in a temporary directory and stopped at cleanup.
type slurmCluster struct {
	t    testing.TB
	dir  string
	env  []string // SLURM_CONF for the client commands
	node string
	logs []string
}

// startSlurm starts the cluster and waits until its node is idle.
func startSlurm(t testing.TB) *slurmCluster {
	t.Helper()
	for _, tool := range []struct{ name, pkg string }{{"munged", "munge"}, {"slurmctld", "slurmctld"}, {"slurmd", "slurmd"}, {"sbatch", "slurm-client"}, {"scontrol", "slurm-client"}, {"sinfo", "slurm-client"}} {
		testenv.RequireTool(t, tool.name, tool.pkg)
	}
	reapSlurm(t)
	dir, err := os.MkdirTemp("", fmt.Sprintf("sealrun-slurm-%d-", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	c := &slurmCluster{t: t, dir: dir, node: host}
	t.Cleanup(func() { c.stop(); os.RemoveAll(dir) })
	p := func(n string) string { return filepath.Join(dir, n) }
	for _, d := range []string{"state", "spool", "jobs"} {
		os.MkdirAll(p(d), 0o755)
	}
	key := make([]byte, 1024)
	rand.Read(key)
	if err := os.WriteFile(p("munge.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 2)
	conf := fmt.Sprintf(`# sealrun's Slurm e2e test: a one-node cluster in %[1]s
ClusterName=sealrun-e2e
SlurmctldHost=%[2]s(127.0.0.1)
SlurmctldPort=%[3]d
SlurmdPort=%[4]d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=%[1]s/munge.sock
CredType=cred/munge
StateSaveLocation=%[1]s/state
SlurmdSpoolDir=%[1]s/spool
SlurmctldPidFile=%[1]s/slurmctld.pid
SlurmdPidFile=%[1]s/slurmd.pid
SlurmctldLogFile=%[1]s/slurmctld.log
SlurmdLogFile=%[1]s/slurmd.log
%[6]sReturnToService=2
MinJobAge=600
KillWait=100
PlugStackConfig=%[1]s/plugstack.conf
NodeName=%[2]s NodeAddr=127.0.0.1 CPUs=%[5]d State=UNKNOWN
PartitionName=e2e Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
`, dir, host, ports[0], ports[1], max(2, numCPU()), slurmPlugins(dir))
	c.startController(conf)
	c.daemon("slurmd", "slurmd", "-D", "-f", p("slurm.conf"), "-N", host)
	c.waitFor("the node to be idle", func() bool {
		out, _ := c.cmd("sinfo", "-h", "-N", "-o", "%t").CombinedOutput()
		return strings.TrimSpace(string(out)) == "idle"
	})
	return c
}

// slurmPlugins are the plugin lines every test cluster's slurm.conf shares: no accounting
// daemon, completions logged to dir/jobcomp.txt (read by sacct -c).
func slurmPlugins(dir string) string {
	return fmt.Sprintf(`ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=%s/jobcomp.txt
MpiDefault=none
`, dir)
}

// startController writes conf as the cluster's slurm.conf (with an empty plugstack.conf) and
// starts munged (with c.dir/munge.key) and slurmctld.
func (c *slurmCluster) startController(conf string) {
	c.t.Helper()
	p := func(n string) string { return filepath.Join(c.dir, n) }
	os.WriteFile(p("plugstack.conf"), nil, 0o644)
	if err := os.WriteFile(p("slurm.conf"), []byte(conf), 0o644); err != nil {
		c.t.Fatal(err)
	}
	c.env = append(os.Environ(), "SLURM_CONF="+p("slurm.conf"))
	c.daemon("munged", "munged", "-F", "--force", "--socket="+p("munge.sock"), "--key-file="+p("munge.key"), "--pid-file="+p("munged.pid"),
		"--log-file="+p("munged.log"), "--seed-file="+p("munge.seed"))
	c.waitFor("munged's socket", func() bool { _, err := os.Stat(p("munge.sock")); return err == nil })
	c.daemon("slurmctld", "slurmctld", "-D", "-i", "-f", p("slurm.conf"))
}

// reapSlurm stops the clusters of test processes that were killed before their cleanups ran
// (their daemons run in process groups of their own and outlive them) and removes their
// directories, as testenv.RunDir does for sandbox hosts.
func reapSlurm(t testing.TB) {
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), "sealrun-slurm-*-*"))
	for _, dir := range old {
		pidText, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(dir), "sealrun-slurm-"), "-")
		owner, err := strconv.Atoi(pidText)
		if err != nil || syscall.Kill(owner, 0) != syscall.ESRCH {
			continue
		}
		// Every process of the cluster, its job steps and scripts included, has its SLURM_CONF.
		testenv.KillByEnv("SLURM_CONF=" + filepath.Join(dir, "slurm.conf"))
		time.Sleep(200 * time.Millisecond)
		syscall.Unmount(filepath.Join(dir, "readonly"), syscall.MNT_DETACH)
		t.Logf("removed the Slurm cluster of test process %d, which is gone: %s", owner, dir)
		os.RemoveAll(dir)
	}
}

func numCPU() int {
	n := 0
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "processor") {
			n++
		}
	}
	return n
}

func freePorts(t testing.TB, n int) []int {
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// daemon starts a cluster daemon in the foreground, its output into its log.
func (c *slurmCluster) daemon(name string, args ...string) {
	c.t.Helper()
	log := filepath.Join(c.dir, name+".out")
	f, err := os.Create(log)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = c.env, f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	go cmd.Wait()
	c.logs = append(c.logs, log, filepath.Join(c.dir, name+".log"))
	c.t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		for i := 0; i < 100 && syscall.Kill(cmd.Process.Pid, 0) == nil; i++ {
			time.Sleep(50 * time.Millisecond)
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})
}

func (c *slurmCluster) cmd(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env, cmd.Dir = c.env, filepath.Join(c.dir, "jobs")
	return cmd
}

func (c *slurmCluster) waitFor(what string, ok func() bool) {
	c.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			c.t.Fatalf("Slurm: timed out waiting for %s\n%s", what, c.logText())
		}
	}
}

func (c *slurmCluster) logText() string {
	var b strings.Builder
	for _, l := range c.logs {
		if data, err := os.ReadFile(l); err == nil {
			fmt.Fprintf(&b, "--- %s\n%s", l, data)
		}
	}
	return b.String()
}

// stop shuts the controller down; the cleanups of daemon() stop every process.
func (c *slurmCluster) stop() {
	c.cmd("scontrol", "shutdown").Run()
	if c.t.Failed() {
		c.t.Logf("Slurm logs:\n%s", c.logText())
	}
}

// sbatch submits and waits for every task of the job; it returns the job id.
func (c *slurmCluster) sbatch(env []string, args ...string) string {
	return c.submit(env, append([]string{"--wait"}, args...)...)
}

// submit is sbatch without waiting.
func (c *slurmCluster) submit(env []string, args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sbatch", append([]string{"--parsable"}, args...)...)
	cmd.Env, cmd.Dir = append(append([]string(nil), c.env...), env...), filepath.Join(c.dir, "jobs")
	out, _ := cmd.CombinedOutput() // --wait exits with the job's highest exit code
	id := strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	if _, err := strconv.Atoi(strings.SplitN(id, ";", 2)[0]); err != nil {
		c.t.Fatalf("sbatch %v: %s", args, out)
	}
	return strings.SplitN(id, ";", 2)[0]
}

// tasks are the job's array tasks: index -> "STATE EXIT:SIGNAL" (scontrol keeps ended jobs
// for MinJobAge). A task still COMPLETING (its end being cleaned up after sbatch --wait
// returned, which a loaded machine makes last) is read again until it has its final state,
// 30 s at most.
func (c *slurmCluster) tasks(job string) map[string]string {
	c.t.Helper()
	re := regexp.MustCompile(`JobId=\d+ (?:ArrayJobId=\d+ ArrayTaskId=(\d+) )?.*?JobState=(\S+) .*?ExitCode=(\S+)`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, err := c.cmd("scontrol", "show", "job", "-o", job).CombinedOutput()
		if err != nil {
			c.t.Fatalf("scontrol show job %s: %v %s", job, err, out)
		}
		m, completing := map[string]string{}, false
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if s := re.FindStringSubmatch(l); s != nil {
				m[s[1]] = s[2] + " " + s[3]
				completing = completing || s[2] == "COMPLETING"
			}
		}
		if !completing || time.Now().After(deadline) {
			return m
		}
	}
}

// output is a task's Slurm output file.
func (c *slurmCluster) output(job, task string) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "jobs", fmt.Sprintf("sealrun-seed-%s_%s.out", job, task)))
	return string(b)
}

// runningSeed waits until a run of seed is running and returns it.
func (rd *realDaemon) runningSeed(seed int64) api.Record {
	rd.t.Helper()
	var run api.Record
	rd.waitFor(fmt.Sprintf("seed %d running", seed), func() bool {
		var recs []api.Record
		json.Unmarshal([]byte(rd.sealrun("ps", "-a", "--json")), &recs)
		for _, r := range recs {
			if r.Seed == seed && r.State == api.StateRunning {
				run = r
				return true
			}
		}
		return false
	})
	return run
}

// slurmBed is a real sealrund on a testbed whose scripted agent does promote, a one-node Slurm
// cluster, the job script, a results directory and the job environment that ties them.
func slurmBed(t testing.TB, promote string) (tb *testbed, rd *realDaemon, c *slurmCluster, script, results string, env []string) {
	tb = newTestbed(t)
	tb.cfg.Resources.Concurrency = 3
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(strings.Replace(agentScript, "PROMOTE", promote, 1)), 0o755)
	rd = newRealDaemon(t, tb)
	rd.start()
	c = startSlurm(t)
	script, _ = filepath.Abs("../deploy/slurm/sealrun-seed.sbatch")
	results = filepath.Join(c.dir, "results")
	os.Mkdir(results, 0o755)
	return tb, rd, c, script, results, []string{"SEALRUN_RESULTS=" + results, "SEALRUN_SOCKET=" + rd.sock, "SEALRUN=" + rd.cli,
		// A cancelled run's end took more than the default 25 s under make test's load (its
		// sandbox package runs stress-ng beside): the jobs wait up to 85 s, under KillWait=100.
		"SEALRUN_CANCEL_WAIT=85"}
}

// A lab's Slurm cluster dispatches seeds: a real one-node cluster runs a 3-task array of
// deploy/slurm/sealrun-seed.sbatch against a real sealrund. Each task runs one seed with `run
// --wait`, gathers its files into the shared results directory and exits by the result; the
// three attestations verify and the leaderboard has one row of three seeds. A requeued task
// does not run its seed again; bad input fails at once with the reason in the job's output.
func TestSlurmArray(t *testing.T) {
	tb, rd, c, script, results, env := slurmBed(t, `if [ -f /workspace/slow ]; then sleep 600; fi; runner finalize "$id"`)
	agent := "openai/gpt-x@high"

	submitted := time.Now()
	job := c.sbatch(env, "--array=1-3", script, rd.trackF, agent)
	tasks := c.tasks(job)
	for _, i := range []string{"1", "2", "3"} {
		if tasks[i] != "COMPLETED 0:0" {
			t.Errorf("array task %s: %q; want COMPLETED 0:0\n%s", i, tasks[i], c.output(job, i))
		}
	}
	t.Logf("task 2's output:\n%s", c.output(job, "2"))

	// Three gathered runs whose attestations verify, with their files; one leaderboard row.
	entries, _ := os.ReadDir(results)
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.Name())
	}
	if len(ids) != 3 {
		t.Fatalf("results directory holds %v; want three runs", ids)
	}
	var toQueued, toStarted, toGathered []time.Duration
	for _, id := range ids {
		rec := rd.show(id)
		if rec.State != api.StateGraded || !strings.HasPrefix(rec.Dispatcher, "slurm job "+job+"_") {
			t.Errorf("run %s: %s, dispatcher %q", id, rec.State, rec.Dispatcher)
		}
		gathered := filepath.Join(results, id)
		af, _ := os.Open(filepath.Join(gathered, "audit.jsonl"))
		_, err := attest.Verify(mustRead(t, filepath.Join(gathered, "result.att.json")), rd.verifier,
			attest.WithReportDigest(sha(mustRead(t, filepath.Join(gathered, "report.json")))), attest.WithAuditLog(af), attest.WithTrack(tb.track))
		af.Close()
		if err != nil {
			t.Errorf("gathered run %s: %v", id, err)
		}
		var st syscall.Stat_t
		syscall.Stat(gathered, &st)
		toQueued = append(toQueued, rec.Queued.Sub(submitted))
		toStarted = append(toStarted, rec.Started.Sub(submitted))
		toGathered = append(toGathered, time.Unix(st.Ctim.Sec, st.Ctim.Nsec).Sub(rec.Finished))
	}
	for _, d := range [][]time.Duration{toQueued, toStarted, toGathered} {
		sort.Slice(d, func(i, k int) bool { return d[i] < d[k] })
	}
	t.Logf("dispatch through Slurm, 3 seeds: submit → queued at sealrund %v; submit → run started %v; run ended → results gathered %v", toQueued, toStarted, toGathered)
	keys, err := leaderboard.LoadKeys([]string{"../attest/testdata/ed25519.pub"})
	if err != nil {
		t.Fatal(err)
	}
	in, err := leaderboard.Load([]string{results}, keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := leaderboard.Build(in, keys)
	if len(b.Tables) != 1 || len(b.Tables[0].Rows) != 1 || b.Tables[0].Rows[0].N != 3 || len(b.Rejected) != 0 {
		var out bytes.Buffer
		b.Render(&out, "text")
		t.Errorf("leaderboard: want one table, one row of 3 valid seeds:\n%s", out.String())
	}

	// A requeued (here: resubmitted) task whose seed has a result does not run it again.
	job2 := c.sbatch(env, "--array=2", script, rd.trackF, agent)
	if got := c.tasks(job2)["2"]; got != "COMPLETED 0:0" || !strings.Contains(c.output(job2, "2"), "already has a graded run") {
		t.Errorf("resubmitted seed 2: %s\n%s", got, c.output(job2, "2"))
	}
	if entries, _ := os.ReadDir(results); len(entries) != 3 {
		t.Errorf("after the resubmission the results directory holds %d entries; want 3", len(entries))
	}

	// An invalid run (here cancelled while it runs) fails its task with exit 4; the task's
	// resubmission reruns it, linked in the rerun's attestation, and the board shows the link.
	os.WriteFile(filepath.Join(tb.kit, "slow"), nil, 0o644)
	job3 := c.submit(env, "--array=5", script, rd.trackF, agent)
	slow := rd.runningSeed(5)
	rd.sealrun("cancel", slow.ID)
	rd.waitFor("seed 5's task to end", func() bool {
		s := c.tasks(job3)["5"]
		return strings.HasPrefix(s, "FAILED") || strings.HasPrefix(s, "COMPLETED")
	})
	if got, out := c.tasks(job3)["5"], c.output(job3, "5"); got != "FAILED 4:0" || !strings.Contains(out, "invalid (the infrastructure's fault): resubmit with sbatch --array=5") {
		t.Errorf("cancelled seed 5: %s\n%s", got, out)
	}
	os.Remove(filepath.Join(tb.kit, "slow"))
	job4 := c.sbatch(env, "--array=5", script, rd.trackF, agent)
	if got, out := c.tasks(job4)["5"], c.output(job4, "5"); got != "COMPLETED 0:0" || !strings.Contains(out, "seed 5: rerunning invalid run "+slow.ID) {
		t.Errorf("resubmitted seed 5: %s\n%s", got, out)
	}
	in, err = leaderboard.Load([]string{results}, keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	b = leaderboard.Build(in, keys)
	if row := b.Tables[0].Rows[0]; row.N != 4 || len(row.Invalid) != 1 || row.Invalid[0].ID != slow.ID || len(row.Invalid[0].Reruns) != 1 {
		t.Errorf("leaderboard after the rerun: %d valid, invalid %+v; want 4 and %s rerun once", row.N, row.Invalid, slow.ID)
	}

	// A job Slurm stops (scancel; a time limit likewise) cancels its run on sealrund, which
	// ends invalid and is gathered: the job's GPUs are not used after the job.
	os.WriteFile(filepath.Join(tb.kit, "slow"), nil, 0o644)
	job5 := c.submit(env, "--array=6", script, rd.trackF, agent)
	stopped := rd.runningSeed(6)
	os.Remove(filepath.Join(tb.kit, "slow"))
	if out, err := c.cmd("scancel", job5).CombinedOutput(); err != nil {
		t.Fatalf("scancel: %v %s", err, out)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(results, stopped.ID, "result.att.json")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			r := rd.show(stopped.ID)
			t.Fatalf("seed 6's run %s was not gathered in 2 min: it is %s (%s), ended %s; the task is %q, its output:\n%s\nsealrund:\n%s",
				stopped.ID, r.State, r.Reason, r.Finished.Format(time.RFC3339Nano), c.tasks(job5)["6"], c.output(job5, "6"), rd.logs.String())
		}
	}
	if r := rd.show(stopped.ID); r.State != api.StateInvalid || r.Reason != "cancelled" {
		t.Errorf("the run of the scancelled job: %s (%s); want invalid, cancelled", r.State, r.Reason)
	}
	rd.waitFor("seed 6's task to end", func() bool { return strings.HasPrefix(c.tasks(job5)["6"], "CANCELLED") })
	if out := c.output(job5, "6"); !strings.Contains(out, "stopped by Slurm (scancel or the time limit): cancelling run "+stopped.ID) {
		t.Errorf("scancelled seed 6: %s\n%s", c.tasks(job5)["6"], out)
	}

	// Bad input: the job fails at once, the reason in its output.
	ro := filepath.Join(c.dir, "readonly")
	os.Mkdir(ro, 0o755)
	if err := syscall.Mount("tmpfs", ro, "tmpfs", syscall.MS_RDONLY, "size=1m"); err != nil {
		t.Fatal(err)
	}
	defer syscall.Unmount(ro, syscall.MNT_DETACH)
	for _, bad := range []struct {
		name   string
		env    []string
		args   []string
		task   string // "4294967294": Slurm's %a of a job that is not an array
		exit   string
		reason string
	}{
		{"no sealrund on the node", []string{"SEALRUN_SOCKET=" + filepath.Join(c.dir, "nosuch.sock")}, []string{"--array=4", script, rd.trackF, agent}, "4", "1:0",
			"no sealrund here (no socket " + filepath.Join(c.dir, "nosuch.sock") + ")"},
		{"results not writable", []string{"SEALRUN_RESULTS=" + ro}, []string{"--array=4", script, rd.trackF, agent}, "4", "1:0", "results directory " + ro + " is not writable"},
		{"results missing", []string{"SEALRUN_RESULTS=" + filepath.Join(c.dir, "nowhere")}, []string{"--array=4", script, rd.trackF, agent}, "4", "1:0", "does not exist on node"},
		{"not an array", nil, []string{script, rd.trackF, agent}, "4294967294", "2:0", "not an array task (SLURM_ARRAY_TASK_ID is unset)"},
		{"wrong arguments", nil, []string{"--array=4", script, rd.trackF}, "4", "2:0", "usage: sbatch --array=SEEDS"},
	} {
		start := time.Now()
		j := c.sbatch(append(append([]string(nil), env...), bad.env...), bad.args...)
		key := bad.task
		if key == "4294967294" {
			key = ""
		}
		got, out := c.tasks(j)[key], c.output(j, bad.task)
		if got != "FAILED "+bad.exit || !strings.Contains(out, bad.reason) {
			t.Errorf("%s: %q, output %q; want FAILED %s and %q", bad.name, got, out, bad.exit, bad.reason)
		}
		t.Logf("%s: %s in %v: %s", bad.name, got, time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
	}
	// sacct shows which seeds need rerunning (here from the job completion log: this cluster
	// has no slurmdbd, and that log names each array task by its own job id).
	out, err := c.cmd("sacct", "-c", "-n", "-P", "-o", "JobID,State,ExitCode").Output()
	for _, want := range []string{job3 + "|FAILED|4:0", job4 + "|COMPLETED|0:0"} {
		if !strings.Contains("\n"+string(out), "\n"+want+"\n") {
			t.Errorf("sacct -c: no %q in\n%s (%v)", want, out, err)
		}
	}
	if entries, _ := os.ReadDir(results); len(entries) != 6 {
		t.Errorf("after the bad jobs the results directory holds %d entries; want 6 (3 seeds, seed 5 invalid and rerun, seed 6 cancelled)", len(entries))
	}
}

// The job script alone, with a stub sealrun: Slurm's allocation becomes the run's flags (GPU
// indices as CDI names, CPUs, memory, the job), the results directory's word on the seed
// decides whether it runs and what it reruns, and the run's end becomes the exit status.
func TestSeedScriptMapsAllocation(t *testing.T) {
	dir := t.TempDir()
	script, _ := filepath.Abs("../deploy/slurm/sealrun-seed.sbatch")
	stub := filepath.Join(dir, "sealrun")
	os.WriteFile(stub, []byte(`#!/bin/sh
echo "$@" >>"$STUB_LOG"
case "$1" in
  ps) exit 0 ;;
  results) [ "$2" = seed ] && echo "${STUB_SEED:-none }"; exit 0 ;;
  run) echo r-20261122-000000-abcdef; echo "graded"; exit "${STUB_RUN_EXIT:-0}" ;;
esac
`), 0o755)
	sock := filepath.Join(dir, "sealrun.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	results := filepath.Join(dir, "results")
	os.Mkdir(results, 0o755)
	track := filepath.Join(dir, "track.toml")
	os.WriteFile(track, []byte("# a track\n"), 0o644)
	base := []string{"PATH=/usr/bin:/bin", "SEALRUN=" + stub, "SEALRUN_SOCKET=" + sock, "SEALRUN_RESULTS=" + results, "SLURM_ARRAY_JOB_ID=812", "SLURMD_NODENAME=gpu07"}
	for _, c := range []struct {
		name string
		env  []string
		code int
		run  string // in the run call's arguments ("-" for no run call)
		out  string
	}{
		{"allocation", []string{"SLURM_ARRAY_TASK_ID=3", "SLURM_JOB_GPUS=0,2", "SLURM_CPUS_PER_TASK=8", "SLURM_MEM_PER_NODE=65536"}, 0,
			"--seed 3 --wait --dispatcher slurm job 812_3 on gpu07 --gpus nvidia.com/gpu=0,nvidia.com/gpu=2 --cpus 8 --memory 65536MiB", "run r-20261122-000000-abcdef graded"},
		{"CDI prefix, leading zeros", []string{"SLURM_ARRAY_TASK_ID=007", "SLURM_JOB_GPUS=1", "SEALRUN_CDI_PREFIX=example.com/gpu="}, 0, "--seed 7 --wait --dispatcher slurm job 812_7 on gpu07 --gpus example.com/gpu=1", ""},
		// deploy/kubernetes/seeds-job.yaml runs the script with Kubernetes' values in Slurm's
		// names: the Job's name, the completion index, the device plugin's GPU UUIDs.
		{"Kubernetes", []string{"SLURM_ARRAY_TASK_ID=3", "SLURM_ARRAY_JOB_ID=sealrun-seeds-ari-v1", "SLURM_JOB_GPUS=GPU-8f3c2a1e-5b7d-4c9e-a1f0-6d2b3c4e5f60", "SLURM_CPUS_PER_TASK=8", "SLURM_MEM_PER_NODE=65536", "SEALRUN_DISPATCHER_KIND=kubernetes job"}, 0,
			"--seed 3 --wait --dispatcher kubernetes job sealrun-seeds-ari-v1_3 on gpu07 --gpus nvidia.com/gpu=GPU-8f3c2a1e-5b7d-4c9e-a1f0-6d2b3c4e5f60 --cpus 8 --memory 65536MiB", "run r-20261122-000000-abcdef graded"},
		{"no GPUs", []string{"SLURM_ARRAY_TASK_ID=1"}, 0, "--seed 1 --wait --dispatcher slurm job 812_1 on gpu07", ""},
		{"all memory", []string{"SLURM_ARRAY_TASK_ID=1", "SLURM_MEM_PER_NODE=0", "SLURM_CPUS_ON_NODE=4"}, 0, "--seed 1 --wait --dispatcher slurm job 812_1 on gpu07 --cpus 4", ""},
		{"rerun", []string{"SLURM_ARRAY_TASK_ID=2", "STUB_SEED=invalid r-20261121-000000-0000aa"}, 0, "--rerun-of r-20261121-000000-0000aa", "rerunning invalid run r-20261121-000000-0000aa"},
		{"already graded", []string{"SLURM_ARRAY_TASK_ID=2", "STUB_SEED=graded r-20261121-000000-0000bb"}, 0, "-", "already has a graded run in " + results + ": r-20261121-000000-0000bb; nothing to do"},
		{"failed run", []string{"SLURM_ARRAY_TASK_ID=2", "STUB_RUN_EXIT=3"}, 0, "--seed 2", "failed (the agent's fault; a valid result)"},
		{"invalid run", []string{"SLURM_ARRAY_TASK_ID=2", "STUB_RUN_EXIT=4"}, 4, "--seed 2", "resubmit with sbatch --array=2"},
		{"refused", []string{"SLURM_ARRAY_TASK_ID=2", "STUB_RUN_EXIT=9"}, 1, "--seed 2", "sealrun run exited 9 before the run ended"},
		{"not a seed", []string{"SLURM_ARRAY_TASK_ID=abc"}, 2, "-", "array index 'abc' is not a seed number"},
		{"huge seed", []string{"SLURM_ARRAY_TASK_ID=12345678901"}, 2, "-", "is not a seed number"},
		{"hostile GPU", []string{"SLURM_ARRAY_TASK_ID=1", "SLURM_JOB_GPUS=0,$(reboot)"}, 1, "-", "GPU '$(reboot)' in SLURM_JOB_GPUS=0,$(reboot) is not a GPU index"},
		{"track unreadable", []string{"SLURM_ARRAY_TASK_ID=1", "TRACK=" + filepath.Join(dir, "nope.toml")}, 1, "-", "track file " + filepath.Join(dir, "nope.toml") + " is not readable"},
	} {
		log := filepath.Join(dir, "calls-"+strings.ReplaceAll(c.name, " ", "-"))
		tr := track
		for _, e := range c.env {
			if v, ok := strings.CutPrefix(e, "TRACK="); ok {
				tr = v
			}
		}
		cmd := exec.Command("bash", script, tr, "openai/gpt-x@high")
		cmd.Env = append(append(append([]string(nil), base...), c.env...), "STUB_LOG="+log)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		calls, _ := os.ReadFile(log)
		var run string
		for _, l := range strings.Split(string(calls), "\n") {
			if strings.HasPrefix(l, "run ") {
				run = l
			}
		}
		switch {
		case code != c.code || !strings.Contains(string(out), c.out):
			t.Errorf("%s: exit %d, output %q; want %d and %q", c.name, code, out, c.code, c.out)
		case c.run == "-" && run != "":
			t.Errorf("%s: it ran %q", c.name, run)
		case c.run != "-" && !strings.Contains(run, c.run):
			t.Errorf("%s: run call %q; want %q in it", c.name, run, c.run)
		case c.name == "all memory" && strings.Contains(run, "--memory"):
			t.Errorf("%s: run call %q; SLURM_MEM_PER_NODE=0 is the whole node, not a limit", c.name, run)
		}
	}
}

// The overhead of dispatching a seed through Slurm (target: at most 5 s each): from sbatch to
// the run started on the node's sealrund, and from the run's end to its files gathered into
// the results directory. One-seed jobs, one after another, on the one-node cluster.
func BenchmarkSlurmDispatch(b *testing.B) {
	_, rd, c, script, results, env := slurmBed(b, `runner finalize "$id"`)
	var in, out time.Duration
	b.ResetTimer()
	for i := range b.N {
		submitted := time.Now()
		job := c.sbatch(env, fmt.Sprintf("--array=%d", i+1), script, rd.trackF, "openai/gpt-x@high")
		entries, _ := os.ReadDir(results)
		found := false
		for _, e := range entries {
			rec := rd.show(e.Name())
			if rec.Seed != int64(i+1) {
				continue
			}
			var st syscall.Stat_t
			syscall.Stat(filepath.Join(results, e.Name()), &st)
			in += rec.Started.Sub(submitted)
			out += time.Unix(st.Ctim.Sec, st.Ctim.Nsec).Sub(rec.Finished)
			found = true
		}
		if !found {
			b.Fatalf("seed %d was not gathered\n%s", i+1, c.output(job, strconv.Itoa(i+1)))
		}
	}
	b.ReportMetric(in.Seconds()/float64(b.N), "s-submit-to-started")
	b.ReportMetric(out.Seconds()/float64(b.N), "s-ended-to-gathered")
}
