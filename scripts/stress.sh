#!/usr/bin/env bash
# make test-stress: the timing-sensitive tests, STRESS_RUNS times (default 10), beside stress-ng's
# CPU and I/O load on this machine's cores: terminals (a person through tmux, the attach API, the
# session's bounds), pauses (of a human run; hundreds of freezes of busy calls under runc and
# gVisor), kills and restarts (sealrund's kill -9, the witness's), cancels, Slurm, the attack
# suite with its reserve window, and fault injection. A test that waits on a bare sleep or on
# text already on the screen fails here first.
#
#   STRESS_RUNS=10  STRESS_LOAD="--cpu 2 --cpu-load 70 --io 1 --hdd 1 --hdd-bytes 64M"
#   STRESS_GROUPS="daemon runner runner-gvisor sandbox controller cli" (some of them, to look into one)
#
# Needs root and the local images (make test-images). Each group's log of each run is kept in
# ARTIFACTS/stress (default /tmp/sealrun-test-artifacts/stress); the last lines say how many runs
# of each group failed, and which tests.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${STRESS_RUNS:-10}
load=${STRESS_LOAD:---cpu 2 --cpu-load 70 --io 1 --hdd 1 --hdd-bytes 64M}
groups=${STRESS_GROUPS:-daemon runner runner-gvisor sandbox controller cli}
state=${TEST_STATE:-/var/lib/sealrun-test}
cache=${BUILD_CACHE:-/var/cache/sealrun/build}
runsc=${RUNSC:-/usr/local/bin/runsc}
logs=${ARTIFACTS:-/tmp/sealrun-test-artifacts}/stress
go=${GO:-go}

if [ "$(id -u)" != 0 ] || [ ! -f "$state/images.lock" ]; then
  echo "make test-stress runs containers as root with the local images: run make test-images first, as root" >&2
  exit 1
fi
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
  echo "STRESS_RUNS=$runs: give a whole number of runs, 1 or more" >&2
  exit 2
fi
command -v stress-ng >/dev/null || { echo "make test-stress needs stress-ng (make deps installs it)" >&2; exit 1; }
mkdir -p "$logs"
tmp=$(mktemp -d /var/tmp/sealrun-stress.XXXXXX)

# group NAME: the package, the tests (a -run pattern) and the environment of each group.
group() {
  case $1 in
    daemon) pkg=./daemon
      pat='^(TestHumanRunThroughTmux|TestPausesOfAHumanRun|TestHumanKill9MidSession|TestKill9AndRestart|TestCancelMidCall|TestCancelWhileGrading|TestFault.*|TestHostileScaffold|TestSlurmArray)$'
      env=() ;;
    runner) pkg=./runner
      pat='^(TestPauseFreezesTheCall|TestPauseCycles|TestLimitAndReserveWindow|TestSecondCallRefusedAndDisconnectKills|TestServeWaitsForCallsUnderWay|TestFaultCallNeverRanIsRetried|TestCallWhoseStartsNeverRunIsTheHosts)$'
      env=() ;;
    runner-gvisor) pkg=./runner
      pat='^(TestPauseFreezesTheCall|TestPauseCycles|TestLimitAndReserveWindow|TestSecondCallRefusedAndDisconnectKills)$'
      env=(SEALRUN_TEST_RUNTIME="$runsc" SEALRUN_TEST_ROLE_RUNTIMES=controller=runc) ;;
    sandbox) pkg=./sandbox
      pat='^(TestTerminal|TestKillSignalFreezeThaw)$'
      env=() ;;
    controller) pkg=./controller
      pat='^(TestSession.*|TestRecording.*)$'
      env=() ;;
    cli) pkg=./cmd/sealrun
      pat='^(TestWitnessSurvivesKill9|TestAttach.*)$'
      env=() ;;
    *) echo "STRESS_GROUPS: no group $1 (daemon, runner, runner-gvisor, sandbox, controller, cli)" >&2; return 1 ;;
  esac
}
for g in $groups; do group "$g" || exit 2; done

# The load, in its own process group, for the whole of the stress run.
setsid stress-ng $load --temp-path "$tmp" --timeout 0 --quiet &
stress=$!
cleanup() { kill -- -"$stress" 2>/dev/null; wait "$stress" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
echo "make test-stress: $runs run(s) of [$groups] beside stress-ng $load (logs in $logs)"

declare -A failed=() which=()
t0=$SECONDS
for ((i = 1; i <= runs; i++)); do
  for g in $groups; do
    group "$g"
    log="$logs/run-$i-$g.log"
    s=$SECONDS
    # Each test's start and end as it comes: progress at least as often as tests end.
    env "${env[@]}" SEALRUN_TEST_STATE="$state" SEALRUN_TEST_BUILD_CACHE="$cache" SEALRUN_TEST_ARTIFACTS="$logs/artifacts" \
      GOFLAGS=-tags=sealrun_testseams GOTOOLCHAIN=local "$go" test -count=1 -timeout 30m -v -run "$pat" "$pkg" >"$log" 2>&1 &
    pid=$!
    seen=0
    while kill -0 "$pid" 2>/dev/null; do
      sleep 5
      n=$(grep -c -- '^--- ' "$log" 2>/dev/null || true)
      if [ "$n" != "$seen" ] || [ $(((SECONDS - s) % 30)) -lt 5 ]; then
        echo "stress run $i/$runs $g: $(grep -- '^--- ' "$log" | tail -n 1 | sed 's/^--- //') ($n tests ended, $((SECONDS - s)) s)"
        seen=$n
      fi
    done
    wait "$pid"
    rc=$?
    if [ "$rc" = 0 ]; then
      echo "stress run $i/$runs $g: ok in $((SECONDS - s)) s"
    else
      failed[$g]=$((${failed[$g]:-0} + 1))
      names=$(grep -- '^--- FAIL' "$log" | awk '{print $3}' | sort -u | tr '\n' ' ')
      which[$g]="${which[$g]:-}run $i: ${names:-exit $rc (see the log)}; "
      echo "stress run $i/$runs $g: FAILED in $((SECONDS - s)) s: ${names:-exit $rc}(log: $log)"
    fi
  done
done
bad=0
for g in $groups; do
  echo "stress $g: $runs run(s), ${failed[$g]:-0} failed${which[$g]:+: ${which[$g]}}"
  bad=$((bad + ${failed[$g]:-0}))
done
echo "make test-stress: $((runs * $(wc -w <<<"$groups"))) group runs in $((SECONDS - t0)) s, $bad failed"
[ "$bad" = 0 ]
