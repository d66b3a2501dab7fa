package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/client"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/sandbox"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
)

// A multi-node Slurm cluster on this machine: one slurmctld and munged on the host, and nodes
// that are each a network namespace (its own address on a bridge the test made), a UTS
// namespace (its own hostname) and a mount namespace (its own /run-like socket directory at the
// path every node shares), each running Debian's slurmd and its own sealrund with its own state
// directory, key, ledger, cgroup tree and socket. The results directory is shared, as on a
// cluster's shared file system. Traffic goes only over the bridge and the nodes' veths.
type slurmNodes struct {
	*slurmCluster
	tag     string // this test process's mark on every name it makes (pid)
	bridge  string
	nodes   []*clusterNode
	sockDir string // the admin socket's directory as every node sees it
	results string
	keys    string // every node's public keys, as an operator collects them
	tb      *testbed
	cpus    int // each node's, which is also its sealrund's concurrency
}

// clusterNode is one node of the cluster.
type clusterNode struct {
	c        *slurmNodes
	name     string
	addr     string
	dir      string // the node's own files: sock/, state/, keys/
	netns    string
	veth     string // the host's end
	holder   int    // the process that holds the node's UTS and mount namespaces
	rd       *realDaemon
	cgroup   string // sealrund's cgroup_parent
	keyGen   int    // how many key pairs the node has had
	restarts int
}

const nodesSubnet = "10.77.0"

// startSlurmNodes brings up a cluster of n nodes, each with slurmd and sealrund running, and
// waits until every node is idle.
func startSlurmNodes(t testing.TB, tb *testbed, n, cpus int) *slurmNodes {
	t.Helper()
	for _, tool := range []struct{ name, pkg string }{{"munged", "munge"}, {"slurmctld", "slurmctld"}, {"slurmd", "slurmd"}, {"sbatch", "slurm-client"},
		{"scontrol", "slurm-client"}, {"sinfo", "slurm-client"}, {"ip", "iproute2"}, {"nsenter", "util-linux"}, {"unshare", "util-linux"}} {
		testenv.RequireTool(t, tool.name, tool.pkg)
	}
	reapSlurm(t)
	reapNodes(t)
	dir, err := os.MkdirTemp("", fmt.Sprintf("sealrun-slurm-%d-", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	c := &slurmNodes{slurmCluster: &slurmCluster{t: t, dir: dir, node: host}, tag: strconv.Itoa(os.Getpid()), tb: tb, cpus: cpus}
	c.bridge = "srb" + c.tag
	c.sockDir = filepath.Join(dir, "node-socket")
	c.results = filepath.Join(dir, "results")
	c.keys = filepath.Join(dir, "keys")
	for _, d := range []string{filepath.Join(dir, "state"), filepath.Join(dir, "jobs"), c.sockDir, c.results, c.keys} {
		os.MkdirAll(d, 0o755)
	}
	// Cleanups run last-registered first: the nodes go (their daemons, then their namespaces),
	// then the cluster's daemons, then the bridge and the directory.
	t.Cleanup(func() {
		c.stop()
		ipq("link", "del", c.bridge)
		os.RemoveAll(dir)
	})
	ip(t, "link", "add", c.bridge, "type", "bridge")
	ip(t, "addr", "add", nodesSubnet+".1/24", "dev", c.bridge)
	ip(t, "link", "set", c.bridge, "up")

	key := make([]byte, 1024)
	for i := range key {
		key[i] = byte(i*7 + 3)
	}
	os.WriteFile(filepath.Join(dir, "munge.key"), key, 0o600)
	ports := freePorts(t, 1)
	var nodeLines strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&nodeLines, "NodeName=node%d NodeAddr=%s.%d CPUs=%d State=UNKNOWN\n", i, nodesSubnet, 10+i, cpus)
	}
	conf := fmt.Sprintf(`# sealrun's multi-node Slurm test: %[1]s
ClusterName=sealrun-nodes
SlurmctldHost=%[2]s(%[3]s.1)
SlurmctldPort=%[4]d
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire: also how long a requeued job waits before it starts again (default 120 s)
AuthInfo=socket=%[1]s/munge.sock,cred_expire=10
CredType=cred/munge
StateSaveLocation=%[1]s/state
SlurmdSpoolDir=%[1]s/spool-%%n
SlurmctldPidFile=%[1]s/slurmctld.pid
SlurmdPidFile=%[1]s/slurmd-%%n.pid
SlurmctldLogFile=%[1]s/slurmctld.log
SlurmdLogFile=%[1]s/slurmd-%%n.log
%[6]sReturnToService=2
SlurmdTimeout=30
MinJobAge=600
KillWait=60
PlugStackConfig=%[1]s/plugstack.conf
# the nodes' CPUs are the test's to say (3 nodes share this machine's cores)
SlurmdParameters=config_overrides
%[5]sPartitionName=e2e Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
`, dir, host, nodesSubnet, ports[0], nodeLines.String(), slurmPlugins(dir))
	c.startController(conf)
	p := func(n string) string { return filepath.Join(dir, n) }
	for i := 1; i <= n; i++ {
		node := &clusterNode{c: c, name: fmt.Sprintf("node%d", i), addr: fmt.Sprintf("%s.%d", nodesSubnet, 10+i), dir: p(fmt.Sprintf("node%d", i))}
		node.netns = fmt.Sprintf("sealrun-e2e-%s-%s", c.tag, node.name)
		node.veth = fmt.Sprintf("srv%sn%d", c.tag, i)
		node.cgroup = fmt.Sprintf("/sealrun-e2e-%s-%s", c.tag, node.name)
		c.nodes = append(c.nodes, node)
		t.Cleanup(node.tearDown)
		node.setUp()
	}
	c.waitFor("every node to be idle", func() bool {
		out, _ := c.cmd("sinfo", "-h", "-N", "-o", "%N %t").CombinedOutput()
		return strings.Count(string(out), " idle") == n
	})
	return c
}

// reapNodes removes what a killed test process's cluster left in the kernel: its nodes'
// network namespaces, its bridge and its nodes' cgroup trees.
func reapNodes(t testing.TB) {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, l := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(l, " ")
		var pid int
		var node string
		if _, err := fmt.Sscanf(name, "sealrun-e2e-%d-%s", &pid, &node); err != nil || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		killNamespace("/run/netns/" + name)
		ipq("netns", "del", name)
		ipq("link", "del", fmt.Sprintf("srb%d", pid))
		for _, h := range cgroupHierarchies() {
			removeCgroupTree(filepath.Join(h, fmt.Sprintf("sealrun-e2e-%d-%s", pid, node)))
		}
		t.Logf("removed node %s of test process %d, which is gone", node, pid)
	}
}

func ip(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
	}
}

// ipq is ip without caring how it went (teardown).
func ipq(args ...string) { exec.Command("ip", args...).Run() }

// setUp gives the node its network (a veth on the bridge, its address, a route to the
// controller's), its namespaces, its slurmd and its sealrund.
func (n *clusterNode) setUp() {
	t := n.c.t
	t.Helper()
	for _, d := range []string{"sock", "state", "keys"} {
		os.MkdirAll(filepath.Join(n.dir, d), 0o755)
	}
	ip(t, "netns", "add", n.netns)
	ip(t, "link", "add", n.veth, "type", "veth", "peer", "name", "eth0", "netns", n.netns)
	ip(t, "link", "set", n.veth, "master", n.c.bridge, "up")
	ip(t, "-n", n.netns, "addr", "add", n.addr+"/24", "dev", "eth0")
	ip(t, "-n", n.netns, "link", "set", "eth0", "up")
	ip(t, "-n", n.netns, "link", "set", "lo", "up")
	ip(t, "-n", n.netns, "route", "add", "default", "via", nodesSubnet+".1")
	// The holder: in the node's network namespace, a new UTS namespace (the node's hostname)
	// and a private mount namespace in which the node's own socket directory is at the path
	// every node's jobs use.
	pidFile := filepath.Join(n.dir, "holder.pid")
	os.Remove(pidFile)
	holder := exec.Command("nsenter", "--net=/run/netns/"+n.netns, "--", "unshare", "--uts", "--mount", "--propagation", "private", "--fork", "--",
		"sh", "-c", `hostname "$1" && mount --bind "$2" "$3" && echo $$ > "$4" && exec sleep infinity`, "holder", n.name, filepath.Join(n.dir, "sock"), n.c.sockDir, pidFile)
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var holderOut bytes.Buffer
	holder.Stdout, holder.Stderr = &holderOut, &holderOut
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- holder.Wait() }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(pidFile)
		if n.holder, _ = strconv.Atoi(strings.TrimSpace(string(b))); n.holder > 0 {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("%s's namespaces: the holder exited: %v %s", n.name, err, holderOut.String())
		default:
		}
		if time.Now().After(deadline) {
			holder.Process.Kill()
			<-exited
			t.Fatalf("%s's namespaces: no holder after 30 s: %s", n.name, holderOut.String())
		}
	}
	enter := []string{"nsenter", "-t", strconv.Itoa(n.holder), "--net", "--uts", "--mount", "--"}
	tag := n.name
	if n.restarts > 0 {
		tag = fmt.Sprintf("%s-back%d", n.name, n.restarts)
	}
	n.c.daemon("slurmd-"+tag, append(enter, "slurmd", "-D", "-f", filepath.Join(n.c.dir, "slurm.conf"), "-N", n.name)...)
	n.startSealrund(enter)
}

// startSealrund starts the node's sealrund in its namespaces: its own state directory (the
// testbed's exam and kit, the local images), key, cgroup tree and run directory; its socket at
// the path every node shares, which is its own sock/ directory.
func (n *clusterNode) startSealrund(enter []string) {
	t := n.c.t
	tb := n.c.tb
	state := filepath.Join(n.dir, "state")
	if n.rd == nil {
		// The testbed's content (the exam, the kit), copied: each node holds its own.
		if out, err := exec.Command("cp", "-a", tb.state+"/.", state).CombinedOutput(); err != nil {
			t.Fatalf("copy the testbed's state: %v %s", err, out)
		}
		for _, f := range []string{"journal.jsonl", "images", "ledger.jsonl"} {
			os.RemoveAll(filepath.Join(state, f))
		}
		os.Symlink(filepath.Join(testenv.LocalImages(t).State, "images"), filepath.Join(state, "images"))
		n.rd = &realDaemon{t: t, tb: tb, bin: sandboxtest.Static(t, "cmd/sealrund"), cli: sandboxtest.Static(t, "cmd/sealrun")}
		n.rd.runDir = testenv.RunDir(t, sandbox.ReapRunDir)
		n.rd.sock = filepath.Join(n.dir, "sock", "sealrun.sock")
		n.rd.trackF = filepath.Join(n.c.dir, "track.toml")
		os.WriteFile(n.rd.trackF, []byte(tb.trackTOML), 0o644)
		n.rotateKey()
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s's sealrund logs:\n%s", n.name, n.rd.logs.String())
			}
		})
	}
	n.rd.wrap = enter
	n.rd.start()
}

// rotateKey gives the node a new key pair (its first at set-up) and sealrund a config that signs
// with it; the operator's key directory gets its public half as NODE-N.pub. sealrund reads the
// key when it starts.
func (n *clusterNode) rotateKey() {
	t := n.c.t
	n.keyGen++
	dir := filepath.Join(n.dir, "keys", strconv.Itoa(n.keyGen))
	if out, err := exec.Command(n.rd.cli, "keys", "generate", "--out", dir).CombinedOutput(); err != nil {
		t.Fatalf("%s: keys generate: %v %s", n.name, err, out)
	}
	pub := mustRead(t, filepath.Join(dir, "sealrun.pub"))
	os.WriteFile(filepath.Join(n.c.keys, fmt.Sprintf("%s-%d.pub", n.name, n.keyGen)), pub, 0o644)
	prov := n.c.tb.cfg.Providers["openai"]
	n.rd.cfgFile = filepath.Join(n.dir, "sealrun.toml")
	os.WriteFile(n.rd.cfgFile, []byte(fmt.Sprintf(`state_dir = %q
run_dir = %q
socket = %q
group = "root"
runner = %q
hook = %q
cgroup_parent = %q
[keys]
signing = %q
public = %q
[resources]
concurrency = %d
[providers.openai]
kind = "openai"
base_url = %q
key_file = %q
`, filepath.Join(n.dir, "state"), n.rd.runDir, filepath.Join(n.c.sockDir, "sealrun.sock"), n.c.tb.cfg.Runner, sandboxtest.Static(t, "cmd/sealrun-netns-hook"),
		n.cgroup, filepath.Join(dir, "sealrun.key"), filepath.Join(dir, "sealrun.pub"), max(2, n.c.cpus), prov.BaseURL, prov.KeyFile)), 0o644)
}

// kill takes the node down as a power cut would: every process in its network namespace
// (slurmd, sealrund, the job scripts, its namespaces' holder) and every process of its runs'
// containers, by SIGKILL; then its network is cut.
func (n *clusterNode) kill() {
	for i := 0; i < 50; i++ {
		left := killNamespace("/run/netns/"+n.netns) + killCgroupTree(n.cgroup)
		if left == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n.rd != nil {
		n.rd.cmd = nil
	}
	ipq("link", "del", n.veth)
	ipq("netns", "del", n.netns)
	// Its runs' gateway namespaces were mounted in the node's own mount namespace, gone with it;
	// the files they were mounted on are in the host's /run, which a real node's reboot empties.
	runs, _ := os.ReadDir(filepath.Join(n.dir, "state", "runs"))
	for _, r := range runs {
		p := filepath.Join(sandbox.DefaultNetnsDir, sandbox.Prefix+r.Name()+"-gw")
		var st, parent syscall.Stat_t
		if syscall.Stat(p, &st) == nil && syscall.Stat(sandbox.DefaultNetnsDir, &parent) == nil && st.Dev == parent.Dev {
			os.Remove(p) // not a mount: nothing holds a namespace there
		}
	}
}

// back brings a killed node up again, as a reboot would: new namespaces and network, the same
// disk (state directory, keys, run directory), slurmd and sealrund started anew.
func (n *clusterNode) back() {
	n.restarts++
	n.setUp()
}

// tearDown stops the node's daemons and removes its namespaces, network and cgroups.
func (n *clusterNode) tearDown() {
	if n.rd != nil {
		n.rd.stop()
	}
	n.kill()
	for _, h := range cgroupHierarchies() {
		removeCgroupTree(filepath.Join(h, n.cgroup))
	}
	if n.rd != nil {
		sandbox.ReapRunDir(context.Background(), n.rd.runDir)
	}
}

// killNamespace SIGKILLs every process whose network namespace is the one at path, and says how
// many it found.
func killNamespace(path string) int {
	var want syscall.Stat_t
	if syscall.Stat(path, &want) != nil {
		return 0
	}
	n := 0
	procs, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	for _, p := range procs {
		var st syscall.Stat_t
		if syscall.Stat(p, &st) == nil && st.Ino == want.Ino && st.Dev == want.Dev {
			if pid, err := strconv.Atoi(strings.Split(p, "/")[2]); err == nil && pid != os.Getpid() {
				syscall.Kill(pid, syscall.SIGKILL)
				n++
			}
		}
	}
	return n
}

// killCgroupTree SIGKILLs every process in the cgroup tree rel of every hierarchy.
func killCgroupTree(rel string) int {
	n := 0
	for _, h := range cgroupHierarchies() {
		filepath.Walk(filepath.Join(h, rel), func(p string, fi os.FileInfo, err error) error {
			if err != nil || !fi.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
					n++
				}
			}
			return nil
		})
	}
	return n
}

func cgroupHierarchies() []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{"/sys/fs/cgroup"}
	}
	hs, _ := filepath.Glob("/sys/fs/cgroup/*")
	return hs
}

// removeCgroupTree removes a cgroup directory and everything below it, deepest first.
func removeCgroupTree(dir string) {
	var dirs []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		os.Remove(dirs[i])
	}
}

// waitLong is waitFor with its own bound: what takes a sealed run or two, on a loaded machine.
func (c *slurmNodes) waitLong(what string, d time.Duration, ok func() bool) {
	c.t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			c.t.Fatalf("Slurm: timed out after %s waiting for %s\n%s", d, what, c.logText())
		}
	}
}

// ledger exports the node's ledger into the operator's directory.
func (n *clusterNode) ledger(into string) string {
	out := filepath.Join(into, n.name+".ledger.jsonl")
	if b, err := exec.Command(n.rd.cli, "ledger", "export", "--state-dir", filepath.Join(n.dir, "state"), "--out", out).CombinedOutput(); err != nil {
		n.c.t.Fatalf("%s: ledger export: %v %s", n.name, err, b)
	}
	return out
}

// runsOf are the node's runs, as its sealrund lists them.
func (n *clusterNode) runs() []api.Record {
	var recs []api.Record
	json.Unmarshal([]byte(n.rd.sealrun("ps", "-a", "--json")), &recs)
	return recs
}

// A lab's cluster: three nodes, each with its own slurmd, sealrund, key and ledger, take a
// track's seeds as an array; the runs land on more than one node, meet in one results directory,
// and publish as one publication whose board accounts for every run of every node's ledger.
// Then a node is lost with a run on it (every process of the node killed, its network cut):
// Slurm requeues the job onto another node, which runs the seed; the node comes back, its
// sealrund ends the lost run invalid with the reason, the operator gathers it, and the
// publication accounts for both. A node's key is rotated between the arrays: the publication
// names which key signed which run.
func TestSlurmNodes(t *testing.T) {
	tb := newTestbed(t)
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(strings.Replace(agentScript, "PROMOTE",
		`if [ -f /workspace/slow ]; then sleep 25; fi; runner finalize "$id"`, 1)), 0o755)
	c := startSlurmNodes(t, tb, 3, 1)
	script, _ := filepath.Abs("../deploy/slurm/sealrun-seed.sbatch")
	agent := "openai/gpt-x@high"
	trackF := c.nodes[0].rd.trackF
	env := []string{"SEALRUN_RESULTS=" + c.results, "SEALRUN_SOCKET=" + filepath.Join(c.sockDir, "sealrun.sock"), "SEALRUN=" + c.nodes[0].rd.cli}

	// Six seeds over three one-CPU nodes.
	began := time.Now()
	job := c.sbatch(env, "--array=1-6", script, trackF, agent)
	for i := 1; i <= 6; i++ {
		if got := c.tasks(job)[strconv.Itoa(i)]; got != "COMPLETED 0:0" {
			t.Errorf("array task %d: %q; want COMPLETED 0:0\n%s", i, got, c.output(job, strconv.Itoa(i)))
		}
	}
	t.Logf("6 seeds over 3 nodes: %s", time.Since(began).Round(time.Second))
	byNode := map[string][]string{}
	for _, n := range c.nodes {
		for _, r := range n.runs() {
			byNode[n.name] = append(byNode[n.name], r.ID)
			if !strings.HasSuffix(r.Dispatcher, " on "+n.name) {
				t.Errorf("%s ran %s, dispatched as %q", n.name, r.ID, r.Dispatcher)
			}
		}
	}
	if len(byNode) < 2 {
		t.Errorf("the array's runs all landed on one node: %v", byNode)
	}
	t.Logf("runs by node: %v", byNode)

	// node3's key is rotated: its later runs are signed by its second key.
	n3 := c.nodes[2]
	n3.rd.stop()
	n3.rotateKey()
	n3.rd.start()

	// A node is lost with a run on it. The second array's runs take 25 s more (the kit's "slow"
	// file, in each run's workspace from its start), long enough to lose a node under one.
	os.WriteFile(filepath.Join(tb.kit, "slow"), nil, 0o644)
	job2 := c.submit(env, "--array=7-9", script, trackF, agent)
	var lost *clusterNode
	var lostRun api.Record
	c.waitLong("a run of the second array running", 3*time.Minute, func() bool {
		for _, n := range c.nodes {
			for _, r := range n.runs() {
				if r.Seed >= 7 && r.State == api.StateRunning {
					lost, lostRun = n, r
					return true
				}
			}
		}
		return false
	})
	t.Logf("losing %s with run %s (seed %d) on it", lost.name, lostRun.ID, lostRun.Seed)
	lost.kill()
	// What a cluster's health check does for a node that stopped answering: Slurm then requeues
	// its jobs (the script asks for --requeue) onto the nodes left.
	if out, err := c.cmd("scontrol", "update", "nodename="+lost.name, "state=down", "reason=lost in the test").CombinedOutput(); err != nil {
		t.Fatalf("scontrol update: %v %s", err, out)
	}
	os.Remove(filepath.Join(tb.kit, "slow"))
	seed := strconv.FormatInt(lostRun.Seed, 10)
	var rerunNode *clusterNode
	var rerun api.Record
	deadline := time.Now().Add(4 * time.Minute)
	for rerunNode == nil {
		if time.Now().After(deadline) {
			t.Fatalf("seed %s was not run again on another node; Slurm: %v\n%s", seed, c.tasks(job2), c.logText())
		}
		time.Sleep(time.Second)
		for _, n := range c.nodes {
			if n == lost {
				continue
			}
			for _, r := range n.runs() {
				if r.Seed == lostRun.Seed && r.State == api.StateGraded {
					rerunNode, rerun = n, r
				}
			}
		}
	}
	t.Logf("seed %s ran again on %s: %s", seed, rerunNode.name, rerun.ID)
	c.waitLong("the second array to end", 5*time.Minute, func() bool {
		tasks := c.tasks(job2)
		done := 0
		for _, s := range tasks {
			if strings.HasPrefix(s, "COMPLETED") || strings.HasPrefix(s, "FAILED") {
				done++
			}
		}
		return done == 3
	})

	// The node comes back: its sealrund finds the run it was running when it went, and ends it
	// invalid, the host's fault; the operator gathers it into the results.
	lost.back()
	// Slurm returns the node to service when its slurmd registers (ReturnToService=2); an
	// operator resumes it where it does not.
	c.waitFor(lost.name+" back in service", func() bool {
		out, _ := c.cmd("sinfo", "-h", "-n", lost.name, "-o", "%t").CombinedOutput()
		st := strings.TrimSpace(string(out))
		if strings.HasPrefix(st, "down") || strings.HasPrefix(st, "drain") {
			c.cmd("scontrol", "update", "nodename="+lost.name, "state=resume").Run()
		}
		return st == "idle" || st == "mix" || st == "alloc"
	})
	var after api.Record
	lost.rd.waitFor("the lost run to end", func() bool { after = lost.rd.show(lostRun.ID); return after.Final() })
	if after.State != api.StateInvalid {
		t.Errorf("the lost node's run %s: %s (%s); want invalid", lostRun.ID, after.State, after.Reason)
	}
	t.Logf("the lost run once its node was back: %s, %q", after.State, after.Reason)
	lost.rd.sealrun("results", "gather", lostRun.ID, c.results)

	// The nodes untouched by the loss ran every other run to its end.
	for _, n := range c.nodes {
		for _, r := range n.runs() {
			if r.ID != lostRun.ID && r.State != api.StateGraded {
				t.Errorf("%s's run %s (seed %d): %s %q; only the lost run may be other than graded", n.name, r.ID, r.Seed, r.State, r.Reason)
			}
		}
	}

	// One publication: every node's ledger, every node's keys; it verifies, and its board
	// accounts for every run, the lost one as invalid beside its rerun.
	ledgers := t.TempDir()
	args := []string{"publish", "--out", filepath.Join(c.dir, "publication"), "--key", c.keys}
	ledgerOf := map[*clusterNode]string{}
	for _, n := range c.nodes {
		ledgerOf[n] = n.ledger(ledgers)
		args = append(args, "--ledger", ledgerOf[n])
	}
	// From the ledgers: the first array landed on more than one node, each of its seeds queued
	// on exactly one. The lost node's ledger has the lost run queued and ended invalid; the node
	// that ran the seed again has the rerun; neither has the other's.
	entries := map[*clusterNode]map[string]string{}
	nodesOfSeed := map[int64][]string{}
	for _, n := range c.nodes {
		entries[n] = map[string]string{}
		for _, l := range strings.Split(string(mustRead(t, ledgerOf[n])), "\n") {
			var e struct {
				Entry *struct {
					Kind, Run, State string
					Seed             int64
				} `json:"entry"`
			}
			if json.Unmarshal([]byte(l), &e) != nil || e.Entry == nil {
				continue
			}
			entries[n][e.Entry.Run] += e.Entry.Kind + e.Entry.State + " "
			if e.Entry.Kind == "queued" && e.Entry.Seed <= 6 {
				nodesOfSeed[e.Entry.Seed] = append(nodesOfSeed[e.Entry.Seed], n.name)
			}
		}
	}
	landed := map[string]bool{}
	for seed := int64(1); seed <= 6; seed++ {
		if len(nodesOfSeed[seed]) != 1 {
			t.Errorf("seed %d is queued in the ledgers of %v; want exactly one node's", seed, nodesOfSeed[seed])
		}
		for _, n := range nodesOfSeed[seed] {
			landed[n] = true
		}
	}
	if len(landed) < 2 {
		t.Errorf("by the ledgers, the first array ran on %v only; want more than one node", landed)
	}
	for _, want := range []struct {
		n             *clusterNode
		run, ended    string
		notRun, where string
	}{{lost, lostRun.ID, "invalid", rerun.ID, "the lost node's"}, {rerunNode, rerun.ID, "graded", lostRun.ID, "the rerun node's"}} {
		kinds := entries[want.n]
		if kinds[want.run] != "queued ended"+want.ended+" " || kinds[want.notRun] != "" {
			t.Errorf("%s ledger (%s): run %s %q, run %s %q; want queued, ended %s, and nothing of the other", want.where, want.n.name, want.run, kinds[want.run], want.notRun, kinds[want.notRun], want.ended)
		}
	}
	args = append(args, c.results)
	if out, err := exec.Command(c.nodes[0].rd.cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("sealrun publish: %v\n%s", err, out)
	}
	out, err := exec.Command(c.nodes[0].rd.cli, "verify-publication", filepath.Join(c.dir, "publication"), "--key", c.keys).CombinedOutput()
	if err != nil {
		t.Fatalf("verify-publication: %v\n%s", err, out)
	}
	t.Logf("verify-publication:\n%s", out)
	keys, err := leaderboard.LoadKeys([]string{c.keys})
	if err != nil {
		t.Fatal(err)
	}
	in, err := leaderboard.Load([]string{c.results}, keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := leaderboard.Build(in, keys)
	if len(b.Tables) != 1 || len(b.Tables[0].Rows) != 1 {
		t.Fatalf("leaderboard: %d tables; want one of one row", len(b.Tables))
	}
	row := b.Tables[0].Rows[0]
	if row.N != 9 || len(row.Invalid) != 1 || row.Invalid[0].ID != lostRun.ID {
		t.Errorf("leaderboard row: %d valid, invalid %+v; want 9 and %s", row.N, row.Invalid, lostRun.ID)
	}
	// Which key signed which run: each run's key is its node's, and node3's runs after the
	// rotation are its second key's.
	signedBy := map[string]string{}
	for _, e := range in.Entries {
		signedBy[e.Predicate.Run.ID] = e.Key
	}
	for _, n := range c.nodes {
		for _, r := range n.runs() {
			k := signedBy[r.ID]
			if !strings.HasPrefix(k, n.name+"-") {
				t.Errorf("run %s of %s was verified by key %q; want one of %s's", r.ID, n.name, k, n.name)
			}
			if n == n3 && r.Seed >= 7 && k != "node3-2.pub" {
				t.Errorf("run %s of node3 after its key was rotated: key %q; want node3-2.pub", r.ID, k)
			}
		}
	}
	if !slices.Contains(row.SignedBy, "node3-2.pub") || len(row.SignedBy) < 3 {
		t.Errorf("the row's signed-by keys %v; want every node's, node3's rotated one among them", row.SignedBy)
	}

	// Every node gathers every run it has into one fresh results directory at once, 4 clients a
	// node, each in its own order, while a reader lists it as the leaderboard does: the reader
	// never meets half a run, and the board over it is the board above.
	again := filepath.Join(c.dir, "results-again")
	os.Mkdir(again, 0o755)
	stop := make(chan struct{})
	half := make(chan string, 1)
	go func() {
		defer close(half)
		for {
			select {
			case <-stop:
				return
			default:
			}
			ents, _ := os.ReadDir(again)
			for _, e := range ents {
				for _, f := range []string{"result.att.json", "run.json", "report.json", "audit.jsonl"} {
					if _, err := os.Stat(filepath.Join(again, e.Name(), f)); err != nil && !strings.HasPrefix(e.Name(), ".") {
						half <- e.Name() + " without " + f
						return
					}
				}
			}
		}
	}()
	var wg sync.WaitGroup
	gathers := 0
	for _, n := range c.nodes {
		client, runs := client.New(n.rd.sock), n.runs()
		gathers += 4 * len(runs)
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range runs {
					if _, err := client.Gather(context.Background(), runs[(i*(g+1)+g)%len(runs)], again); err != nil {
						t.Errorf("%s: gather: %v", n.name, err)
					}
				}
			}()
		}
	}
	began = time.Now()
	wg.Wait()
	took := time.Since(began)
	close(stop)
	if h, ok := <-half; ok {
		t.Errorf("a reader of the results directory met %s", h)
	}
	if left, _ := filepath.Glob(filepath.Join(again, ".*")); len(left) > 0 {
		t.Errorf("after the gathers, %v are left", left)
	}
	in2, err := leaderboard.Load([]string{again}, keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b2 := leaderboard.Build(in2, keys); len(b2.Tables) != 1 || b2.Tables[0].Rows[0].N != 9 || len(b2.Tables[0].Rows[0].Invalid) != 1 || len(in2.Rejected) != 0 {
		t.Errorf("the board over the results gathered at once differs: %+v, rejected %v", b2.Tables, in2.Rejected)
	}
	t.Logf("%d gathers from 3 nodes at once into one directory: %s", gathers, took.Round(time.Millisecond))
}

// Dispatch over a multi-node cluster: three nodes (10 CPUs each, sealrund concurrency 10) take a
// 30-seed array at once, 10 seeds a node. Reported: sbatch to each run running on its node
// (median and slowest), the whole array's wall time per run, and the leaderboard and the
// publication over the 30 runs (with every node's ledger), per run. The work is the same for
// any b.N: one array, timed once (make bench runs it with -benchtime 1x).
func BenchmarkSlurmNodes(b *testing.B) {
	tb := newTestbed(b)
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(strings.Replace(agentScript, "PROMOTE", `runner finalize "$id"`, 1)), 0o755)
	c := startSlurmNodes(b, tb, 3, 10)
	script, _ := filepath.Abs("../deploy/slurm/sealrun-seed.sbatch")
	env := []string{"SEALRUN_RESULTS=" + c.results, "SEALRUN_SOCKET=" + filepath.Join(c.sockDir, "sealrun.sock"), "SEALRUN=" + c.nodes[0].rd.cli}
	const seeds = 30
	b.ResetTimer()
	submitted := time.Now()
	job := c.sbatch(env, fmt.Sprintf("--array=1-%d", seeds), script, c.nodes[0].rd.trackF, "openai/gpt-x@high")
	wall := time.Since(submitted)
	var toRunning []time.Duration
	perNode := map[string]int{}
	for _, n := range c.nodes {
		for _, r := range n.runs() {
			toRunning = append(toRunning, r.Started.Sub(submitted))
			perNode[n.name]++
		}
	}
	if len(toRunning) != seeds {
		b.Fatalf("%d runs on the nodes (%v); want %d. Slurm: %v", len(toRunning), perNode, seeds, c.tasks(job))
	}
	slices.Sort(toRunning)
	began := time.Now()
	keys, err := leaderboard.LoadKeys([]string{c.keys})
	if err != nil {
		b.Fatal(err)
	}
	in, err := leaderboard.Load([]string{c.results}, keys, nil)
	if err != nil {
		b.Fatal(err)
	}
	if board := leaderboard.Build(in, keys); len(board.Tables) != 1 || board.Tables[0].Rows[0].N != seeds {
		b.Fatalf("leaderboard over %d seeds: %+v", seeds, board.Tables)
	}
	boardTime := time.Since(began)
	ledgers := b.TempDir()
	args := []string{"publish", "--out", filepath.Join(c.dir, "publication"), "--key", c.keys}
	for _, n := range c.nodes {
		args = append(args, "--ledger", n.ledger(ledgers))
	}
	began = time.Now()
	if out, err := exec.Command(c.nodes[0].rd.cli, append(args, c.results)...).CombinedOutput(); err != nil {
		b.Fatalf("sealrun publish: %v\n%s", err, out)
	}
	publishTime := time.Since(began)
	b.StopTimer()
	b.Logf("runs per node %v; sbatch to running: fastest %s, median %s, slowest %s", perNode, toRunning[0].Round(time.Millisecond),
		toRunning[seeds/2].Round(time.Millisecond), toRunning[seeds-1].Round(time.Millisecond))
	b.ReportMetric(toRunning[seeds/2].Seconds(), "s-submit-to-running-p50")
	b.ReportMetric(toRunning[seeds-1].Seconds(), "s-submit-to-running-max")
	b.ReportMetric(wall.Seconds()/seeds, "s-array-wall-per-run")
	b.ReportMetric(float64(boardTime.Microseconds())/1000/seeds, "ms-leaderboard-per-run")
	b.ReportMetric(float64(publishTime.Microseconds())/1000/seeds, "ms-publish-per-run")
}
