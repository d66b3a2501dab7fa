#!/bin/bash
# Runs inside the cgroup v2 guest of scripts/cgroup2-guest.sh, as sealrun-guest.service
# (Delegate=yes) under systemd: the root tests of the packages that touch cgroups, devices and
# containers; then sealrund started by systemd from the project's own unit and a whole sealed run
# through it; then, if asked, the container benchmarks. Results go back as a tar stream on
# /dev/vdc; the guest powers off at the end, whatever happened.
set -u
G=/sealrun-guest
out=/tmp/results
mkdir -p "$out"
. "$G/guest.conf"
start=$(date +%s)
say() { echo "guest [$(( $(date +%s) - start ))s]: $*"; }
status=PASS
fail() { say "FAIL: $*"; echo "FAIL $*" >>"$out/summary.txt"; status=FAIL; }
finish() {
	echo "$status" >>"$out/summary.txt"
	cp /proc/cmdline "$out/cmdline" 2>/dev/null
	journalctl -b --no-pager >"$out/journal.txt" 2>/dev/null
	tar -C "$out" -cf /dev/vdc . && sync
	say "results written ($status); powering off"
	systemctl --no-block poweroff
	exit 0
}
trap finish EXIT

# The facts of this host, first: what the tests run on.
{
	echo "kernel $(uname -r)"
	echo "cgroup $(stat -fc %T /sys/fs/cgroup) controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
	echo "pid 1 $(readlink /proc/1/exe)"
	echo "runc $(runc --version | head -n 1)"
	echo "crun $(crun --version | head -n 1)"
	echo "this unit's cgroup $(sed -n 's/^0:://p' /proc/self/cgroup), delegated: $(getfattr -n trusted.delegate --only-values "/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)" 2>/dev/null || echo unknown)"
} >"$out/host.txt"
say "$(tr '\n' ';' <"$out/host.txt")"
[ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] || fail "the guest is not cgroup v2 only"
[ -d /sys/fs/cgroup/memory ] && fail "cgroup v1 hierarchies are mounted"

# Leave the delegated cgroup for a leaf of our own: no process may stay in a cgroup whose
# controllers are enabled for its children (the tests' sandbox hosts create theirs beside it).
D=$(sed -n 's/^0:://p' /proc/self/cgroup)
mkdir -p "/sys/fs/cgroup$D/harness"
echo $$ >"/sys/fs/cgroup$D/harness/cgroup.procs"

export CI=true GOTOOLCHAIN=local SEALRUN_TEST_STATE=$G/state SEALRUN_TEST_BIN_DIR=$G/testbin
export SEALRUN_TEST_OUTPUT_CALLS=${output_calls:-300} SEALRUN_TEST_SLOW=2
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
echo "test binaries and their time:" >>"$out/summary.txt"
# Each package's root tests, in its own directory (tests read testdata and ../ relative to it).
# The tests that need the Go toolchain itself (schema lookup, package lists) run on the host only,
# and so do those that drive runc, crun and gVisor themselves beside stress-ng (the guest has
# neither gVisor nor stress-ng; what they prove is the runtimes', not the cgroup version's).
hostOnly='TestSpecGoldenAndSchema|TestLayout|TestCLI.*Golden|TestStartsUnderLoad|TestStartFaultsNeverRan'
declare -A select=(
	[sandbox]='.'
	[runner]='.'
	[grader]='.'
	[controller]='.'
	[daemon]='TestExecuteSealedRun|TestFaultGraderOOM|TestQueueOneGPU|TestCancelWhileGrading|TestKill9AndRestart|TestHostileScaffold|TestUserScaffoldFromRegistry'
	[cmd_sealrun]='TestSandbox|TestDoctor|TestGrade'
)
for name in sandbox runner grader controller daemon cmd_sealrun; do
	[ "${bench:-0}" = only ] && break
	[ -n "${run:-}" ] && ! [[ $name =~ $run ]] && continue
	dir=$G/repo/${name//_//}
	say "go test ${name//_//} (-run '${select[$name]}')"
	t0=$(date +%s)
	# The whole log goes to the results; the console shows each test as it ends.
	(cd "$dir" && timeout 1800 "$G/tests/$name.test" -test.v -test.count=1 -test.timeout 28m -test.run "${select[$name]}" -test.skip "$hostOnly") 2>&1 |
		tee "$out/$name.log" | grep --line-buffered -E '^(--- |=== RUN|ok|FAIL|panic)' | sed -u 's/^/    /'
	rc=${PIPESTATUS[0]}
	took=$(( $(date +%s) - t0 ))
	passed=$(grep -c '^--- PASS' "$out/$name.log")
	failed=$(grep -c '^--- FAIL' "$out/$name.log")
	skipped=$(grep -c '^--- SKIP' "$out/$name.log")
	echo "  ${name//_//}: exit $rc, $passed passed, $failed failed, $skipped skipped, ${took}s" >>"$out/summary.txt"
	say "  ${name//_//}: exit $rc, $passed passed, $failed failed, $skipped skipped, ${took}s"
	if [ $rc != 0 ]; then
		fail "go test ${name//_//}"
		grep -E '^(--- FAIL|    .*_test.go:[0-9]+:)' "$out/$name.log" | head -n 30
	fi
done

# The sandbox's root tests again under crun, which on cgroup v2 manages the cgroup and its
# device filter its own way: every role's posture, the limits, OOM, output drained whole.
if [ "${bench:-0}" != only ] && { [ -z "${run:-}" ] || [[ sandbox-crun =~ $run ]]; }; then
	say "go test sandbox under crun"
	t0=$(date +%s)
	(cd "$G/repo/sandbox" && SEALRUN_TEST_RUNTIME=crun timeout 1200 "$G/tests/sandbox.test" -test.v -test.count=1 -test.timeout 18m -test.skip "$hostOnly") 2>&1 |
		tee "$out/sandbox-crun.log" | grep --line-buffered -E '^(--- |ok|FAIL|panic)' | sed -u 's/^/    /'
	rc=${PIPESTATUS[0]}
	echo "  sandbox under crun: exit $rc, $(grep -c '^--- PASS' "$out/sandbox-crun.log") passed, $(grep -c '^--- FAIL' "$out/sandbox-crun.log") failed, $(( $(date +%s) - t0 ))s" >>"$out/summary.txt"
	[ $rc = 0 ] || { fail "go test sandbox under crun"; grep -E '^(--- FAIL|    .*_test.go:[0-9]+:)' "$out/sandbox-crun.log" | head -n 30; }
fi

# sealrund under systemd, from the project's own unit, and a whole sealed run through it.
if [ "${bench:-0}" != only ] && { [ -z "${run:-}" ] || [[ daemon-unit =~ $run ]]; }; then
	say "sealrund under systemd: install, keys, exam, kit, track, a sealed run"
	bash "$G/repo/scripts/cgroup2-guest/sealed-run.sh" "$out" 2>&1 | tee "$out/sealed-run.log" | sed -u 's/^/    /'
	rc=${PIPESTATUS[0]}
	echo "  sealed run through sealrund.service: exit $rc" >>"$out/summary.txt"
	[ $rc = 0 ] || fail "the sealed run through sealrund.service"
fi

if [ "${bench:-0}" != 0 ]; then
	# The same benchmarks make bench runs on the host: a sealed container and runner true, each
	# against a bare runc run of the same image in the same run.
	say "benchmarks: a sealed container and runner true vs bare runc run"
	(cd "$G/repo/sandbox" && "$G/tests/sandbox.test" -test.run '^$' -test.bench 'ContainerVsBareRunc|RunLayout' -test.benchtime 20x) >"$out/bench.txt" 2>&1 || fail "sandbox benchmarks"
	(cd "$G/repo/runner" && "$G/tests/runner.test" -test.run '^$' -test.bench 'RunnerTrueVsBareRunc' -test.benchtime 20x) >>"$out/bench.txt" 2>&1 || fail "runner benchmarks"
	grep -E '^Benchmark' "$out/bench.txt"
fi
say "done: $status"
