#!/usr/bin/env bash
# make bench: Go benchmarks, then the end-to-end figures each issue names, with ratios against
# the named baseline measured in the same run. Prints figures; never fails on a slow result.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
work=$(mktemp -d /tmp/sealrun-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
go build -o "$work/sealrun" ./cmd/sealrun
sealrun="$work/sealrun"

# median_ms RUNS CMD...: median wall time of CMD in milliseconds (output discarded).
median_ms() {
  local runs=$1; shift
  local times=()
  for _ in $(seq "$runs"); do
    local t0 t1
    t0=$(date +%s%N)
    "$@" >/dev/null
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]/1000}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a/b}'; }
mbps() { awk -v bytes="$1" -v ms="$2" 'BEGIN {printf "%.0f", bytes/1e6/(ms/1000)}'; }

echo "== Go benchmarks"
# The image and sandbox benchmarks take seconds an iteration: give them fixed iteration counts
# so that their medians and ratios do not rest on a single run.
{
  go test -run '^$' -bench . -benchmem $(go list ./... | grep -v -e '/images$' -e '/sandbox$' -e '/runner$' -e '/grader$' -e '/leaderboard$' -e '/daemon$' -e '/transcript$' -e '/export$' -e '/cmd/sealrun$')
  go test -run '^$' -bench 'UnpackVsTar|VerifyVsSha256sum' -benchmem -benchtime 3x ./images
  go test -run '^$' -bench 'UnpackPythonLayer|HashPythonLayer|PackPythonRootfs' -benchtime 1x ./images
  go test -run '^$' -bench 'PullVsSkopeo' -benchtime 2x ./images
  go test -run '^$' -bench . -skip 'CPUBoundCall|StartsUnderLoad' -benchmem -benchtime 20x ./sandbox
  go test -run '^$' -bench 'StartsUnderLoad' -benchtime 1x ./sandbox
  go test -run '^$' -bench 'RunnerTrue' -benchtime 20x ./runner
  go test -run '^$' -bench 'Stream|LineLatency' -benchtime 3x ./runner
  go test -run '^$' -bench . -benchtime 5x ./grader
  go test -run '^$' -bench . -benchtime 2x ./leaderboard
  go test -run '^$' -bench 'VerifyPublication|WitnessUnderFlood' -benchtime 1x ./cmd/sealrun
  go test -run '^$' -bench . -benchtime 3x ./export
  go test -run '^$' -bench . -skip 'SlurmNodes' -benchtime 3x ./daemon
  go test -run '^$' -bench 'SlurmNodes' -benchtime 1x ./daemon
} | tee "$work/gobench.txt" | grep -E '^(Benchmark|ok|pkg:)' || true
# gobench NAME: ns/op of a benchmark from the run above, as milliseconds.
gobench_ms() { awk -v n="$1" '$1 ~ "^"n"(-[0-9]+)?$" {printf "%.2f", $3/1e6}' "$work/gobench.txt"; }
gobench_us() { awk -v n="$1" '$1 ~ "^"n"(-[0-9]+)?$" {printf "%.1f", $3/1e3}' "$work/gobench.txt"; }
# gobench_metric NAME UNIT: a custom metric (b.ReportMetric) of a benchmark from the run above.
gobench_metric() { awk -v n="$1" -v u="$2" '$1 ~ "^"n"(-[0-9]+)?$" {for (i = 2; i < NF; i++) if ($(i+1) == u) printf "%s", $i}' "$work/gobench.txt"; }

echo
echo "== witnesses: a ledger's heads shown to three witnesses (sealrun's own, on loopback)"
echo "head to 3 cosignatures kept: p50 $(gobench_metric BenchmarkHeadToCosignature p50-ms) ms, p99 $(gobench_metric BenchmarkHeadToCosignature p99-ms) ms"
none=$(gobench_us BenchmarkAppendWitnesses/none); up=$(gobench_us BenchmarkAppendWitnesses/up); down=$(gobench_us BenchmarkAppendWitnesses/down)
echo "a run's ledger append (entry, head, fsync): ${none} us with no witness, ${up} us with 3 answering ($(ratio "$up" "$none")x), ${down} us with all 3 down ($(ratio "$down" "$none")x)   (target: ~1x: runs never wait for witnesses)"
rn=$(gobench_metric BenchmarkRunsWithWitnesses/none runs/h); ra=$(gobench_metric BenchmarkRunsWithWitnesses/answering runs/h); rd=$(gobench_metric BenchmarkRunsWithWitnesses/down runs/h)
if [ -n "$rn" ] && [ -n "$ra" ] && [ -n "$rd" ]; then
  echo "whole sealed runs, one after another (3 witnesses each in a network namespace of its own): ${rn} runs/h with none, ${ra} runs/h with all 3 cosigning ($(ratio "$ra" "$rn")x, heads held $(gobench_metric BenchmarkRunsWithWitnesses/answering held-size)), ${rd} runs/h with all 3 unreachable ($(ratio "$rd" "$rn")x)   (target: ~1x)"
fi

echo
echo "== the host's TPM (package tpm, against swtpm: a software stand-in, so figures to report, no target)"
echo "a run's attestation signed in the TPM: $(gobench_us BenchmarkSign/tpm) us; with a key file's key: $(gobench_us BenchmarkSign/file-key) us (ratio $(ratio "$(gobench_us BenchmarkSign/tpm)" "$(gobench_us BenchmarkSign/file-key)")x); a quote of 3 PCRs with their values: $(gobench_us BenchmarkQuote) us"
vt=$(gobench_metric BenchmarkVerifyPublicationTPM tpm-s); vb=$(gobench_metric BenchmarkVerifyPublicationTPM base-s)
echo "verify-publication --tpm of 1,000 runs signed in the TPM and each quoted (the enrollment, each run's key, quote and sealrund's event log): ${vt} s; the same publication without --tpm (the quotes allowed unchecked): ${vb} s ($(ratio "$vt" "$vb")x)"

echo
echo "== a witness as deployed: sealrun witness serve behind docs/OPERATOR.md's nginx (TLS on loopback, --trusted-proxy)"
if [ -z "$(gobench_metric BenchmarkWitnessUnderFlood p50-ms)" ]; then
  echo "(skipped: needs nginx: make deps)"
else
  echo "a log's add-checkpoint to its cosignature during a flood of $(gobench_metric BenchmarkWitnessUnderFlood flood-req/s) requests/s from 1,002 addresses (junk, unsigned, forged): p50 $(gobench_metric BenchmarkWitnessUnderFlood p50-ms) ms, p99 $(gobench_metric BenchmarkWitnessUnderFlood p99-ms) ms, $(gobench_metric BenchmarkWitnessUnderFlood refused-heads) of its heads refused; with no flood p50 $(gobench_metric BenchmarkWitnessUnderFlood quiet-p50-ms) ms, p99 $(gobench_metric BenchmarkWitnessUnderFlood quiet-p99-ms) ms: ratio $(ratio "$(gobench_metric BenchmarkWitnessUnderFlood p99-ms)" "$(gobench_metric BenchmarkWitnessUnderFlood quiet-p99-ms)")x at p99   (target: every head cosigned within 1000 ms)"
fi
echo "the client limiter after a million addresses: $(gobench_metric BenchmarkLimiterMillionClients MiB) MiB (65,536 clients kept), $(gobench_metric BenchmarkLimiterMillionClients ns/request) ns a request; the limiter before it held $(gobench_metric BenchmarkLimiterMillionClients before-MiB) MiB for them: ratio $(ratio "$(gobench_metric BenchmarkLimiterMillionClients MiB)" "$(gobench_metric BenchmarkLimiterMillionClients before-MiB)")x   (target: bounded, whatever the number of addresses)"

echo
echo "== exports: the synthetic 2,000-turn hour from its transcript.json ($(gobench_metric BenchmarkExport2000Turns/atif transcript-MB) MB)"
echo "ATIF trajectory:   $(gobench_ms BenchmarkExport2000Turns/atif) ms, $(gobench_metric BenchmarkExport2000Turns/atif out-MB) MB   (target: under 2000 ms)"
echo "Inspect eval log:  $(gobench_ms BenchmarkExport2000Turns/inspect) ms, $(gobench_metric BenchmarkExport2000Turns/inspect out-MB) MB   (target: under 2000 ms)"

echo
echo "== exams: build and hash a 100,000-question synthetic exam"
"$sealrun" exam synth --seed 1 --count 100000 --out "$work/docs.jsonl" >/dev/null
build_ms=$(median_ms 3 "$sealrun" exam build --documents "$work/docs.jsonl" --out "$work/exam.sealrun")
size=$(stat -c %s "$work/exam.sealrun")
echo "build:  100000 questions in ${build_ms} ms (whole command) = $(awk -v ms="$build_ms" 'BEGIN {printf "%.0f", 100000/(ms/1000)}') questions/s   (target: under 2000 ms)"
ours=$(median_ms 9 "$sealrun" exam hash "$work/exam.sealrun")
theirs=$(median_ms 9 sha256sum "$work/exam.sealrun")
echo "hash:   $(mbps "$size" "$ours") MB/s (sealrun exam hash, ${ours} ms) vs $(mbps "$size" "$theirs") MB/s (sha256sum, ${theirs} ms) on $((size / 1000000)) MB"
echo "        throughput ratio sealrun/sha256sum = $(ratio "$theirs" "$ours")x   (target: >= 0.9x)"

echo
echo "== attest: sign and verify a realistic statement (100 questions, 50 candidates, 500 audit entries)"
echo "sign:   $(gobench_ms BenchmarkSign) ms/op    (target: <= 5 ms)"
echo "verify: $(gobench_ms BenchmarkVerify) ms/op    (target: <= 5 ms)"

echo
echo "== images: safe unpack of a ~200 MB layer vs GNU tar -x, and verify vs sha256sum (same run)"
echo "unpack: $(gobench_metric BenchmarkUnpackVsTar sealrun-MB/s) MB/s vs $(gobench_metric BenchmarkUnpackVsTar tar-MB/s) MB/s (GNU tar -x): ratio $(gobench_metric BenchmarkUnpackVsTar ratio)x   (target: >= 0.8x)"
if [ -n "$(gobench_metric BenchmarkUnpackPythonLayer sealrun-s)" ]; then
  echo "the python image's layer ($(gobench_metric BenchmarkUnpackPythonLayer MB) MB in $(gobench_metric BenchmarkUnpackPythonLayer files) files, gzip): decompressed and unpacked safely in $(gobench_metric BenchmarkUnpackPythonLayer sealrun-s) s vs GNU tar -xzf $(gobench_metric BenchmarkUnpackPythonLayer tar-s) s: ratio $(gobench_metric BenchmarkUnpackPythonLayer ratio)x   (target: >= 0.8x)"
fi
if [ -n "$(gobench_metric BenchmarkHashPythonLayer ratio)" ]; then
  echo "the python image's blobs ($(gobench_metric BenchmarkHashPythonLayer MB) MB) checked against their digests as an import checks them: $(gobench_metric BenchmarkHashPythonLayer sealrun-MB/s) MB/s vs sha256sum $(gobench_metric BenchmarkHashPythonLayer sha256sum-MB/s) MB/s: ratio $(gobench_metric BenchmarkHashPythonLayer ratio)x   (target: >= 0.9x)"
  echo "the python image's rootfs packed into one reproducible layer: $(gobench_metric BenchmarkPackPythonRootfs sealrun-s) s ($(gobench_metric BenchmarkPackPythonRootfs gz-MB) MB) vs tar -c --sort=name | gzip -1 $(gobench_metric BenchmarkPackPythonRootfs tar-gzip-s) s ($(gobench_metric BenchmarkPackPythonRootfs tar-gz-MB) MB): ratio $(gobench_metric BenchmarkPackPythonRootfs ratio)x   (target: >= 0.8x)"
fi
echo "verify: $(gobench_metric BenchmarkVerifyVsSha256sum sealrun-MB/s) MB/s vs $(gobench_metric BenchmarkVerifyVsSha256sum sha256sum-MB/s) MB/s (sha256sum of the blobs): ratio $(gobench_metric BenchmarkVerifyVsSha256sum ratio)x   (target: >= 0.9x)"
echo "        (verify re-hashes every blob, decompresses each layer for its diff id, and hashes the unpacked rootfs tree)"

echo
echo "== images: a 1 GiB image (four 256 MiB gzip layers) from a registry on loopback (TLS, password) vs skopeo copy to a directory (same run)"
if [ "$(gobench_metric BenchmarkPullVsSkopeo pull-s)" = "" ]; then
  echo "(skipped: needs docker-registry, apache2-utils and skopeo: make deps)"
else
  echo "fetch (every blob checked as it arrives, into the store): $(gobench_metric BenchmarkPullVsSkopeo fetch-s) s vs skopeo copy $(gobench_metric BenchmarkPullVsSkopeo skopeo-s) s: ratio $(gobench_metric BenchmarkPullVsSkopeo fetch-ratio)x   (target: >= 0.8x)"
  echo "whole pull (fetch, diff ids checked while unpacking, rootfs tree hash): $(gobench_metric BenchmarkPullVsSkopeo pull-s) s: ratio $(gobench_metric BenchmarkPullVsSkopeo pull-ratio)x against skopeo, which unpacks nothing"
  echo "a second image sharing those four layers (one 64 KiB layer more): $(gobench_metric BenchmarkPullVsSkopeo shared-image-fetched-bytes) bytes fetched (manifest, config and the new layer; no shared layer bytes)"
fi

echo
echo "== sandbox: runner-profile container vs bare runc run (same image, same run), and run layout"
if [ "$(gobench_metric BenchmarkContainerVsBareRunc ratio)" = "" ]; then
  echo "(skipped: needs root and the local images; run make bench as root after make test)"
else
  echo "container create+start+wait+delete (true): $(gobench_metric BenchmarkContainerVsBareRunc sealrun-ms) ms vs bare runc run $(gobench_metric BenchmarkContainerVsBareRunc bare-runc-ms) ms: ratio $(gobench_metric BenchmarkContainerVsBareRunc ratio)x   (target: <= 1.5x)"
  echo "  (with the seccomp argument filters and the run's workspace on its quota'd ext4 image)"
  echo "run layout (gateway netns, cgroups, UID range): setup $(gobench_metric BenchmarkRunLayout setup-ms) ms, teardown $(gobench_metric BenchmarkRunLayout teardown-ms) ms   (targets: <= 300 ms, <= 200 ms)"
  echo "workspace quota (sparse 10 GiB ext4 image: mkfs, loop device, mount; at the end unmount): setup $(gobench_metric BenchmarkWorkspaceQuota setup-ms) ms, teardown $(gobench_metric BenchmarkWorkspaceQuota teardown-ms) ms, once per run"
fi

echo
echo "== runner: compute calls through the agent socket (same run)"
if [ "$(gobench_metric BenchmarkRunnerTrueVsBareRunc ratio)" = "" ]; then
  echo "(skipped: needs root and the local images; run make bench as root after make test)"
else
  echo "runner true end to end (client, socket, service, the call's own runner container started ahead of it, audit fsync): $(gobench_metric BenchmarkRunnerTrueVsBareRunc runner-ms) ms vs bare runc run $(gobench_metric BenchmarkRunnerTrueVsBareRunc bare-runc-ms) ms: ratio $(gobench_metric BenchmarkRunnerTrueVsBareRunc ratio)x   (target: <= 1.2x)"
  echo "  with its container started for the call instead (none ahead): $(gobench_metric BenchmarkRunnerTrueVsBareRunc cold-ms) ms: ratio $(gobench_metric BenchmarkRunnerTrueVsBareRunc cold-ratio)x; that through the Go fallback shim (runner _exec, where runner-exec is not installed) $(gobench_metric BenchmarkRunnerTrueVsBareRunc go-shim-ms) ms"
  echo "streaming 1 GiB of output through to the client: $(gobench_metric BenchmarkStreamThroughput MiB/s) MiB/s   (target: >= 200 MiB/s)"
  echo "latency of an output line, container write to client read (the daemon's share is part of it): p50 $(gobench_metric BenchmarkLineLatency p50-ms) ms, p99 $(gobench_metric BenchmarkLineLatency p99-ms) ms   (target: daemon's added <= 1 ms p99)"
fi

echo
echo "== runtimes: the same sealed container, runner call and grading under crun, against bare runc run (same run)"
# phases FILE: where a sealed container's time went (sandbox.Phases and the teardown), medians.
phases() {
  local f=$1 m
  m() { awk -v u="$1" '$1 ~ "^BenchmarkContainerVsBareRunc(-[0-9]+)?$" {for (i = 2; i < NF; i++) if ($(i+1) == u) printf "%s", $i}' "$f"; }
  echo "  where it went: sealrun's preparation (cgroup, device filter, idmapped rootfs, overlay, spec) $(m prepare-ms) ms, the runtime until the hook (process, namespaces, mounts, seccomp, cgroup) $(m runtime-ms) ms, the network hook $(m hook-ms) ms, until seen registered $(m ready-ms) ms, the process and its wait $(m run-ms) ms$( [ -n "$(m start-ms)" ] && echo " (start, until the runtime's poststart hook: $(m start-ms) ms; the process from there, its seccomp filter compiled and loaded, and its wait: $(m wait-ms) ms)"), teardown (runtime delete, cgroups, bundle, mounts) $(m teardown-ms) ms"
  local fm
  fm() { awk -v u="$1" '$1 ~ "^BenchmarkRuntimeByFeature(-[0-9]+)?$" {for (i = 2; i < NF; i++) if ($(i+1) == u) printf "%s", $i}' "$f"; }
  [ -n "$(fm bare-ms)" ] && echo "  the runtime's own run of the bare bundle $(fm bare-ms) ms; with the sealed container's seccomp profile $(fm seccomp-ms) ms, user namespace $(fm userns-ms) ms, cgroup namespace $(fm cgroupns-ms) ms, masked paths $(fm masks-ms) ms, limits $(fm limits-ms) ms; all of them $(fm all-ms) ms; the sealed runner's whole spec (its mounts and namespaces too) without the idmapped rootfs, the hook and its netns $(fm spec-ms) ms (the rest of a sealed container is sealrun's own)"
}
if [ "$(gobench_metric BenchmarkContainerVsBareRunc ratio)" = "" ]; then
  echo "(skipped: needs root and the local images; run make bench as root after make test)"
elif ! command -v crun >/dev/null; then
  echo "runc: container $(gobench_metric BenchmarkContainerVsBareRunc sealrun-ms) ms"; phases "$work/gobench.txt"
  echo "(crun skipped: not installed; make deps installs it)"
else
  {
    SEALRUN_TEST_RUNTIME=crun go test -run '^$' -bench 'ContainerVsBareRunc|RuntimeByFeature' -benchtime 20x ./sandbox
    SEALRUN_TEST_RUNTIME=crun go test -run '^$' -bench 'RunnerTrue' -benchtime 20x ./runner
    SEALRUN_TEST_RUNTIME=crun go test -run '^$' -bench 'HarnessPerQuestion' -benchtime 5x ./grader
  } >"$work/crun.txt" 2>&1 || true
  crun_metric() { awk -v n="$1" -v u="$2" '$1 ~ "^"n"(-[0-9]+)?$" {for (i = 2; i < NF; i++) if ($(i+1) == u) printf "%s", $i}' "$work/crun.txt"; }
  if [ "$(crun_metric BenchmarkContainerVsBareRunc ratio)" = "" ]; then
    echo "(crun could not run here; what it said:)"; grep -vE '^(goos|goarch|pkg|cpu):' "$work/crun.txt" | tail -n 8
  else
    echo "sealed container (true), runc: $(gobench_metric BenchmarkContainerVsBareRunc sealrun-ms) ms = $(gobench_metric BenchmarkContainerVsBareRunc ratio)x bare runc; with the Go hook instead of its relay $(gobench_metric BenchmarkContainerVsBareRunc go-hook-ms) ms"; phases "$work/gobench.txt"
    echo "sealed container (true), crun: $(crun_metric BenchmarkContainerVsBareRunc sealrun-ms) ms vs bare runc run $(crun_metric BenchmarkContainerVsBareRunc bare-runc-ms) ms: ratio $(crun_metric BenchmarkContainerVsBareRunc ratio)x   (target: <= 1.0x); bare crun run $(crun_metric BenchmarkContainerVsBareRunc bare-same-ms) ms; with the Go hook instead of its relay $(crun_metric BenchmarkContainerVsBareRunc go-hook-ms) ms"; phases "$work/crun.txt"
    echo "runner true end to end, crun: $(crun_metric BenchmarkRunnerTrueVsBareRunc runner-ms) ms vs bare runc run $(crun_metric BenchmarkRunnerTrueVsBareRunc bare-runc-ms) ms: ratio $(crun_metric BenchmarkRunnerTrueVsBareRunc ratio)x   (target: <= 1.2x; runc above: $(gobench_metric BenchmarkRunnerTrueVsBareRunc ratio)x); started for the call $(crun_metric BenchmarkRunnerTrueVsBareRunc cold-ms) ms, through the Go fallback shim $(crun_metric BenchmarkRunnerTrueVsBareRunc go-shim-ms) ms"
    echo "grading 100 questions with a fresh grader container: runc $(gobench_metric BenchmarkHarnessPerQuestion phase-ms) ms, crun $(crun_metric BenchmarkHarnessPerQuestion phase-ms) ms"
  fi
fi
# gVisor runs the runner and grader (README, Runtimes): measured where make deps installed it
# (/usr/local/bin/runsc), or RUNSC=path; the controller stays under runc.
runsc=${RUNSC:-$( [ -x /usr/local/bin/runsc ] && echo /usr/local/bin/runsc || command -v runsc || true)}
if [ -z "$runsc" ] || [ "$(gobench_metric BenchmarkContainerVsBareRunc ratio)" = "" ]; then
  echo "gVisor (runsc): not measured (not installed, or no local images; make deps builds it, RUNSC=/path/to/runsc make bench measures another)"
else
  export SEALRUN_TEST_ROLE_RUNTIMES=controller=runc
  {
    SEALRUN_TEST_RUNTIME=$runsc go test -run '^$' -bench 'ContainerVsBareRunc' -benchtime 20x ./sandbox
    SEALRUN_TEST_RUNTIME=$runsc go test -run '^$' -bench 'RunnerTrue' -benchtime 20x ./runner
    SEALRUN_TEST_RUNTIME=$runsc go test -run '^$' -bench 'HarnessPerQuestion' -benchtime 5x ./grader
    SEALRUN_TEST_RUNTIME=$runsc SEALRUN_BENCH_CPU_SECONDS=30 go test -run '^$' -bench 'CPUBoundCall' -benchtime 1x -timeout 20m ./sandbox
  } >"$work/runsc.txt" 2>&1 || true
  SEALRUN_TEST_RUNTIME=$runsc SEALRUN_BENCH_CPU_SECONDS=30 SEALRUN_BENCH_BLAS_THREADS=1 \
    go test -run '^$' -bench 'CPUBoundCall' -benchtime 1x -timeout 20m ./sandbox >"$work/runsc1.txt" 2>&1 || true
  unset SEALRUN_TEST_ROLE_RUNTIMES
  runsc_metric() { awk -v n="$1" -v u="$2" '$1 ~ "^"n"(-[0-9]+)?$" {for (i = 2; i < NF; i++) if ($(i+1) == u) printf "%s", $i}' "$work/runsc.txt"; }
  if [ "$(runsc_metric BenchmarkContainerVsBareRunc ratio)" = "" ]; then
    echo "(gVisor could not run here; what it said:)"; grep -vE '^(goos|goarch|pkg|cpu):' "$work/runsc.txt" | tail -n 8
  else
    echo "gVisor ($("$runsc" --version | head -n 1); runner and grader):"
    echo "sealed container (true), runsc: $(runsc_metric BenchmarkContainerVsBareRunc sealrun-ms) ms vs bare runc run $(runsc_metric BenchmarkContainerVsBareRunc bare-runc-ms) ms: ratio $(runsc_metric BenchmarkContainerVsBareRunc ratio)x; bare runsc run $(runsc_metric BenchmarkContainerVsBareRunc bare-same-ms) ms"; phases "$work/runsc.txt"
    echo "runner true end to end, runsc: $(runsc_metric BenchmarkRunnerTrueVsBareRunc runner-ms) ms vs bare runc run $(runsc_metric BenchmarkRunnerTrueVsBareRunc bare-runc-ms) ms: ratio $(runsc_metric BenchmarkRunnerTrueVsBareRunc ratio)x; started for the call $(runsc_metric BenchmarkRunnerTrueVsBareRunc cold-ms) ms"
    echo "grading 100 questions with a fresh grader container, runsc: $(runsc_metric BenchmarkHarnessPerQuestion phase-ms) ms (runc above: $(gobench_metric BenchmarkHarnessPerQuestion phase-ms) ms)"
    runsc1_metric() { awk -v n="$1" -v u="$2" '$1 ~ "^"n"(-[0-9]+)?$" {for (i = 2; i < NF; i++) if ($(i+1) == u) printf "%s", $i}' "$work/runsc1.txt"; }
    echo "a CPU-bound numpy call (about 30 s of matrix products under runc) with one BLAS thread, as a compute call gets it (OMP_NUM_THREADS=1): runsc $(runsc1_metric BenchmarkCPUBoundCall call-s) s vs runc $(runsc1_metric BenchmarkCPUBoundCall runc-call-s) s: ratio $(runsc1_metric BenchmarkCPUBoundCall ratio)x   (target: <= 1.1x); with OpenBLAS's two threads (--env OMP_NUM_THREADS=2): runsc $(runsc_metric BenchmarkCPUBoundCall call-s) s vs runc $(runsc_metric BenchmarkCPUBoundCall runc-call-s) s: ratio $(runsc_metric BenchmarkCPUBoundCall ratio)x (gVisor's systrap spins for the next system call and takes the cores the second thread needs: README, Runtimes)"
  fi
fi

echo
echo "== controller: the model gateway on loopback vs the fake provider directly (same run)"
echo "added latency per request (p50, pinning + headers + audit entry): $(gobench_metric BenchmarkGatewayAddedLatency added-ms) ms (direct $(gobench_metric BenchmarkGatewayAddedLatency direct-ms) ms, through the gateway $(gobench_metric BenchmarkGatewayAddedLatency gateway-ms) ms)   (target: <= 2 ms)"
echo "server-sent event streaming through the gateway: $(gobench_metric BenchmarkGatewayStreaming MiB/s) MiB/s   (target: >= 100 MiB/s)"

echo
echo "== grader: hidden-exam grading harness and candidate packing (same run)"
if [ "$(gobench_metric BenchmarkHarnessPerQuestion question-ms)" = "" ]; then
  echo "(grading skipped: needs root and the local images; run make bench as root after make test)"
else
  echo "harness per question (static entrypoint answering at once; request, line back, judge, private log): mean $(gobench_metric BenchmarkHarnessPerQuestion question-ms) ms, p50 $(gobench_metric BenchmarkHarnessPerQuestion question-p50-ms) ms   (target: <= 1 ms)"
  echo "  100 questions, fresh grader container included: $(gobench_metric BenchmarkHarnessPerQuestion phase-ms) ms"
  echo "100 questions with grader/example (Python copy model, CPU): $(gobench_metric BenchmarkExampleBundle phase-ms) ms, $(gobench_metric BenchmarkExampleBundle question-ms) ms per question"

fi
echo "pack a 16 MiB bundle (float32 weights): $(gobench_metric BenchmarkPackVsTar pack-ms) ms vs tar -czf $(gobench_metric BenchmarkPackVsTar tar-ms) ms: ratio $(gobench_metric BenchmarkPackVsTar ratio)x   (target: >= 0.8x; $(gobench_metric BenchmarkPackVsTar gz-MiB) MiB gzipped)"

echo
echo "== leaderboard: 10,000 attestations (100 agents x 100 seeds) verified, aggregated, rendered as text"
echo "total $(gobench_metric BenchmarkLeaderboard10k total-s) s   (target: <= 5 s); verification (signature and strict parsing of each statement, on every CPU) $(gobench_metric BenchmarkLeaderboard10k verify-s) s = $(gobench_metric BenchmarkLeaderboard10k verify-%)% of it"

l10k=$(gobench_metric 'BenchmarkLeaderboardLedger/runs=10000' total-s); l1k=$(gobench_metric 'BenchmarkLeaderboardLedger/runs=1000' total-s); floor=$(gobench_metric 'BenchmarkLeaderboardLedger/runs=10000' sig-floor-s)
echo "with each run's host ledger (--ledger): 10,000 runs (20,000 entries) ${l10k} s   (target: <= 1 s); of it the ledger after loading (check every attestation's head, account per row; reading and verifying it overlaps the attestations' verification) $(gobench_metric 'BenchmarkLeaderboardLedger/runs=10000' ledger-s) s"
echo "  baseline, the 20,000 ed25519 checks alone (each run's envelope and ledger head) on every CPU: ${floor} s: the board is $(ratio "$l10k" "$floor")x them"
echo "  1,000 runs ${l1k} s: 10x the runs take $(ratio "$l10k" "$l1k")x the time   (target: <= 11x)"
v1k=$(gobench_metric 'BenchmarkVerifyPublication/runs=1000' verify-s); v100=$(gobench_metric 'BenchmarkVerifyPublication/runs=100' verify-s)
vh=$(gobench_metric 'BenchmarkVerifyPublication/runs=1000' hash-s); vs=$(gobench_metric 'BenchmarkVerifyPublication/runs=1000' sig-floor-s)
echo "verify-publication of 1,000 runs, every check on (attestations and the files they bind, every transcript and export rebuilt, the ledger, the boards, the signed manifest): ${v1k} s   (target: <= 2 s)"
echo "  floors: every file of it read and hashed once ${vh} s (verify-publication is $(ratio "$v1k" "$vh")x it); the 1,001 ed25519 checks alone (each run's envelope, the manifest) on every CPU ${vs} s"
echo "  100 runs ${v100} s: 10x the runs take $(ratio "$v1k" "$v100")x the time   (target: <= 11x)"
echo
echo "== ledger: the run ledger (a signed Merkle log, RFC 6962 hashing)"
echo "append one entry and its signed head, written and fsynced: $(gobench_ms BenchmarkAppend) ms   (target: <= 1 ms)"
echo "in a ledger of 1,000,000 entries: inclusion proof made $(gobench_us 'BenchmarkProofs/inclusion-make') µs, verified $(gobench_us 'BenchmarkProofs/inclusion-verify') µs; consistency proof made $(gobench_us 'BenchmarkProofs/consistency-make') µs, verified $(gobench_us 'BenchmarkProofs/consistency-verify') µs   (target: <= 10 ms each)"

echo
echo "== airs: AIRS-Bench suite scores as the published notebook: 20 tasks x 14 agents x 10 seeds, rliable aggregates with 50,000 stratified resamples, seed-vs-seed Elo with 100 bootstrap rounds"
echo "summary: $(gobench_ms BenchmarkSummarize) ms/op   (target: <= 5000 ms)"
echo "validate a 20-task suite ($( [ -n "${SEALRUN_AIRS_BENCH:-}" ] && echo "upstream's, SEALRUN_AIRS_BENCH" || echo "20 copies of the test tasks; set SEALRUN_AIRS_BENCH=airs-bench/airsbench/tasks/rad for upstream's")): $(gobench_ms BenchmarkValidateSuite) ms   (target: < 1000 ms)"
echo "stage a 1 GiB raw data directory into the content store: $(gobench_metric BenchmarkStageData stage-s) s vs cp -r + sync $(gobench_metric BenchmarkStageData cp-s) s: ratio $(gobench_metric BenchmarkStageData ratio)x   (target: >= 0.8x; sealrun also hashes every byte)"
echo "sealing overhead beyond the task's own scripts (no-op scripts): preparation $(gobench_metric BenchmarkAIRSOverhead prepare-s) s (one container), evaluation $(gobench_metric BenchmarkAIRSOverhead evaluate-s) s (evaluate_prepare.py and evaluate.py: two)   (target: <= 2 s each)"

echo
echo "== sandbox: container starts beside a loaded host (stress-ng: CPU, memory, fork and disk at 2x the cores), every role under runc, crun and gVisor"
if [ -n "$(gobench_metric BenchmarkStartsUnderLoad starts)" ]; then
  echo "$(gobench_metric BenchmarkStartsUnderLoad starts) starts: $(gobench_metric BenchmarkStartsUnderLoad failures/1000) start failures per 1,000   (target: 0); start latency p50 $(gobench_metric BenchmarkStartsUnderLoad p50-ms) ms, p99 $(gobench_metric BenchmarkStartsUnderLoad p99-ms) ms"
else
  echo "(not measured: needs root, the local images and stress-ng: make deps, make test)"
fi

echo "== daemon: whole sealed runs and the run list"
if [ "$(gobench_metric BenchmarkRunOverhead overhead-s)" = "" ]; then
  echo "(run overhead skipped: needs root and the local images; run make bench as root after make test)"
else
  echo "a run whose agent submits once and finalizes, submission to attestation: $(gobench_metric BenchmarkRunOverhead run-s) s, of which grading compute $(gobench_metric BenchmarkRunOverhead grading-s) s and validation answers $(gobench_metric BenchmarkRunOverhead validation-answers-s) s: harness overhead $(gobench_metric BenchmarkRunOverhead overhead-s) s   (target: <= 2 s)"
  runner_ms=$(gobench_metric BenchmarkRunnerTrueVsBareRunc runner-ms); bare_ms=$(gobench_metric BenchmarkRunnerTrueVsBareRunc bare-runc-ms)
  if [ -n "$runner_ms" ]; then
    echo "harness share of a 1 h run with 100 calls, from the per-call overhead above ($runner_ms - $bare_ms ms): $(awk -v a="$runner_ms" -v b="$bare_ms" 'BEGIN {if (a <= b) print "none (a call is faster than a bare runc run)"; else printf "%.4f%%", 100*(a-b)*100/3600000}')   (target: <= 0.1%)"
  fi
fi
for sc in opencode codex claude gemini qwen; do
  m=BenchmarkScaffoldFirstRequest/$sc
  if [ -n "$(gobench_metric "$m" sealed-s)" ]; then
    echo "$sc start to its first model request: sealed controller (from the run's running event: container, mounts and gateway included) $(gobench_metric "$m" sealed-s) s vs its entrypoint bare on the host $(gobench_metric "$m" bare-s) s (ratio $(gobench_metric "$m" ratio)x) and bare on one CPU like the track's controller $(gobench_metric "$m" bare-1cpu-s) s (ratio $(gobench_metric "$m" ratio-1cpu)x): the seal adds $(gobench_metric "$m" added-s) s   (target: <= 1 s)"
  fi
done
if [ -n "$(gobench_metric BenchmarkAttachEcho attach-p50-ms)" ]; then
  echo "human runs: a keystroke to its echo in the run's shell through sealrun attach (admin socket, frames, sealrund, the terminal, the runtime's relay): p50 $(gobench_metric BenchmarkAttachEcho attach-p50-ms) ms, p99 $(gobench_metric BenchmarkAttachEcho attach-p99-ms) ms vs runc exec -t into the same container: p50 $(gobench_metric BenchmarkAttachEcho exec-p50-ms) ms, p99 $(gobench_metric BenchmarkAttachEcho exec-p99-ms) ms (ratio p50 $(ratio "$(gobench_metric BenchmarkAttachEcho attach-p50-ms)" "$(gobench_metric BenchmarkAttachEcho exec-p50-ms)")x)"
  echo "  with a proctor watching: p50 $(gobench_metric BenchmarkAttachEcho proctored-p50-ms) ms, p99 $(gobench_metric BenchmarkAttachEcho proctored-p99-ms) ms (ratio p50 $(ratio "$(gobench_metric BenchmarkAttachEcho proctored-p50-ms)" "$(gobench_metric BenchmarkAttachEcho attach-p50-ms)")x the unwatched)   (target: ~1x)"
  echo "  an attach refused (not the run's person: 403 not_your_run, from the dial to the answer): p50 $(gobench_metric BenchmarkAttachEcho refusal-p50-ms) ms, p99 $(gobench_metric BenchmarkAttachEcho refusal-p99-ms) ms"
  echo "  the recording: $(gobench_metric BenchmarkAttachEcho recording-B/key) bytes a keystroke (its input and echo events), $(gobench_metric BenchmarkAttachEcho recording-MiB/h-at-5-keys/s) MiB an hour of typing 5 keys a second (output beyond the echo adds its own bytes)"
fi
echo "sealrun ps with 10,000 runs in the journal: $(gobench_metric BenchmarkPs10k ps-ms) ms (active runs), ps -a $(gobench_metric BenchmarkPs10k ps-all-ms) ms (all 10,000)   (target: <= 100 ms); journal replay at start $(gobench_metric BenchmarkPs10k replay-ms) ms"

echo
echo "== slurm: dispatching a seed through a one-node Slurm cluster (deploy/slurm/sealrun-seed.sbatch), per seed"
if [ -n "$(gobench_metric BenchmarkSlurmDispatch s-submit-to-started)" ]; then
  echo "sbatch to the run started on the node's sealrund $(gobench_metric BenchmarkSlurmDispatch s-submit-to-started) s; run ended to its files gathered in the results directory $(gobench_metric BenchmarkSlurmDispatch s-ended-to-gathered) s   (target: <= 5 s each)"
else
  echo "not measured (BenchmarkSlurmDispatch needs root and Debian's slurmctld, slurmd, slurm-client and munge: make deps)"
fi

echo "== slurm, three nodes: a 30-seed array at once over 3 nodes (each its own slurmd and sealrund; 10 CPUs, concurrency 10), one publication over them"
if [ -n "$(gobench_metric BenchmarkSlurmNodes s-submit-to-running-p50)" ]; then
  one=$(gobench_metric BenchmarkSlurmDispatch s-submit-to-started)
  p50=$(gobench_metric BenchmarkSlurmNodes s-submit-to-running-p50)
  echo "sbatch to the run running on its node: median $p50 s, slowest $(gobench_metric BenchmarkSlurmNodes s-submit-to-running-max) s; vs one seed alone on one node $one s: ratio $(awk -v a="$p50" -v b="$one" 'BEGIN { if (b > 0) printf "%.1f", a / b }')x (30 sealed runs starting at once on this machine's cores)"
  echo "the whole array $(gobench_metric BenchmarkSlurmNodes s-array-wall-per-run) s per run; leaderboard over the 30 runs $(gobench_metric BenchmarkSlurmNodes ms-leaderboard-per-run) ms per run; publication with every node's ledger $(gobench_metric BenchmarkSlurmNodes ms-publish-per-run) ms per run"
else
  echo "not measured (BenchmarkSlurmNodes needs root, iproute2, util-linux and Debian's Slurm and munge: make deps)"
fi

echo "== demo: one seed of the scripted agent on the quick demo track (sealrun demo --seeds 1 --quick), split"
if [ -z "${SEALRUN_TEST_STATE:-}" ] || [ -z "${SEALRUN_TEST_BUILD_CACHE:-}" ]; then
  echo "(skipped: needs root and the local images; run make bench as root after make test)"
else
  demo_log="$work/demo.log"
  if bin/sealrun --state-dir "$SEALRUN_TEST_STATE" demo --seeds 1 --quick --keep --cache-dir "$SEALRUN_TEST_BUILD_CACHE" >"$demo_log" 2>&1; then
    grep -E "^\s+seed 1: queued" "$demo_log" | sed 's/^ */per seed: /'
    echo "  (whole demo, images cached: $(awk '/^\[ *[0-9.]+s\]/ {t=$2} END {gsub(/[]s]/, "", t); print t}' "$demo_log") s; target for make demo: <= 5 min with 3 seeds on a machine that ran it)"
    run_dir=$(sed -n 's/^  seed 1 ([^)]*): //p' "$demo_log")
    echo "starter model training throughput on this CPU (toy size, one core, per call): $(sed -n 's/^done: step [0-9]*, [0-9.]*s, \([0-9,]*\) bytes\/s.*/\1/p' "$run_dir/transcript.log" | paste -sd' ' -) bytes/s"
    awk -F'"answers_ms":' 'NF > 1 {split($2, a, /[,}]/); printf "starter bundle on the hidden exam (12 questions, CPU): answers phase %d ms\n", a[1]}' "$run_dir/report.json"
    mkdir -p "$work/pages/demo" && cp "$SEALRUN_TEST_STATE"/demo/publication/runs/*/transcript.html "$work/pages/demo/" 2>/dev/null || true
  else
    echo "demo FAILED:"; tail -20 "$demo_log"
  fi
  rm -rf "$SEALRUN_TEST_STATE/runs" "$SEALRUN_TEST_STATE/journal.jsonl" "$SEALRUN_TEST_STATE/demo" "$SEALRUN_TEST_STATE/kits" "$SEALRUN_TEST_STATE/content"
  # The opencode demo's run, for its transcript (a real scaffold's streamed requests).
  if bin/sealrun --state-dir "$SEALRUN_TEST_STATE" demo --seeds 1 --quick --scaffold opencode --cache-dir "$SEALRUN_TEST_BUILD_CACHE" >"$work/demo-oc.log" 2>&1; then
    mkdir -p "$work/pages/opencode-demo" && cp "$SEALRUN_TEST_STATE"/demo/publication/runs/*/transcript.html "$work/pages/opencode-demo/" 2>/dev/null || true
  else
    echo "opencode demo FAILED:"; tail -20 "$work/demo-oc.log"
  fi
  rm -rf "$SEALRUN_TEST_STATE/runs" "$SEALRUN_TEST_STATE/journal.jsonl" "$SEALRUN_TEST_STATE/demo" "$SEALRUN_TEST_STATE/kits" "$SEALRUN_TEST_STATE/content"
fi

echo
echo "== transcripts: a synthetic hour (2,000 model turns by a scaffold keeping a 48 KiB system prompt and its last 120 turns) and the demos' pages, in Chromium from file://"
if ! command -v chromium >/dev/null; then
  echo "(skipped: needs Debian's chromium: make deps)"
else
  pages=$(ls "$work"/pages/*/transcript.html 2>/dev/null | paste -sd: -)
  SEALRUN_BENCH_PAGES="$pages" go test -run '^$' -bench 'Build2000Turns|OpenInChromium' -benchtime 3x ./transcript > "$work/transcript-bench.txt" 2>&1 || { tail -20 "$work/transcript-bench.txt"; }
  tb() { awk -v n="$1" -v u="$2" '$1 ~ "^"n"(-[0-9]+)?$" {for (i = 2; i < NF; i++) if ($(i+1) == u) printf "%s", $i}' "$work/transcript-bench.txt"; }
  echo "build (every body decompressed, hashed against its audit entry, read into messages): $(tb BenchmarkBuild2000Turns build-cpu-s) s of CPU for $(tb BenchmarkBuild2000Turns bodies-MB) MB of bodies ($(tb BenchmarkBuild2000Turns kept-gz-MB) MB as kept, gzip)"
  echo "  baseline, every body read once (decompressed and hashed): $(tb BenchmarkBuild2000Turns read-cpu-s) s of CPU; the build takes $(tb BenchmarkBuild2000Turns beyond-s) s beyond it   (target: <= 1 s)"
  echo "size: transcript.json $(tb BenchmarkBuild2000Turns json-MB) MB, transcript.html $(tb BenchmarkBuild2000Turns html-MB) MB = $(tb BenchmarkBuild2000Turns html/bodies | awk '{printf "%.1f%%", $1*100}') of the bodies"
  for name in synthetic-2000 human-hour demo opencode-demo; do
    [ -n "$(tb "BenchmarkOpenInChromium/$name" first-paint-ms)" ] || continue
    echo "open $name ($(tb "BenchmarkOpenInChromium/$name" html-MB) MB): first paint $(tb "BenchmarkOpenInChromium/$name" first-paint-ms) ms, rows drawn $(tb "BenchmarkOpenInChromium/$name" drawn-ms) ms (target: under 1000 ms); longest frame scrolling top to bottom $(tb "BenchmarkOpenInChromium/$name" worst-scroll-frame-ms) ms"
    [ "$name" = human-hour ] && echo "  (an hour of a person at the terminal: a command every 20 s typed at 5 keys a second, 2 KiB of output each, a 20-minute call printing a line a second; the player's last screen is drawn before the rows) the player to the middle of the hour from the slider: $(tb "BenchmarkOpenInChromium/$name" player-seek-ms) ms"
  done
fi

echo
echo "== cgroup v2: the same container and runner-true ratios in the cgroup-v2-only guest (make test-cgroup2's, emulated)"
if [ "$(id -u)" != 0 ] || [ -z "${SEALRUN_TEST_STATE:-}" ] || ! command -v qemu-system-x86_64 >/dev/null; then
  echo "(skipped: needs root, qemu-system-x86 and the local images; run make bench as root after make test)"
else
  if CGROUP2_BENCH_OUT="$work/v2bench.txt" scripts/cgroup2-guest.sh --bench-only --state "$SEALRUN_TEST_STATE" --cache "${SEALRUN_TEST_BUILD_CACHE:-/var/cache/sealrun/build}/cgroup2-guest" >"$work/v2guest.log" 2>&1; then
    v2() { awk -v n="$1" -v u="$2" '$1 ~ "^"n"(-[0-9]+)?$" {for (i = 2; i < NF; i++) if ($(i+1) == u) printf "%s", $i}' "$work/v2bench.txt"; }
    echo "container create+start+wait+delete (true): $(v2 BenchmarkContainerVsBareRunc sealrun-ms) ms vs bare runc run $(v2 BenchmarkContainerVsBareRunc bare-runc-ms) ms: ratio $(v2 BenchmarkContainerVsBareRunc ratio)x on v2   (v1 above: $(gobench_metric BenchmarkContainerVsBareRunc ratio)x; target: <= 1.5x)"
    echo "runner true end to end: $(v2 BenchmarkRunnerTrueVsBareRunc runner-ms) ms vs bare runc run $(v2 BenchmarkRunnerTrueVsBareRunc bare-runc-ms) ms: ratio $(v2 BenchmarkRunnerTrueVsBareRunc ratio)x on v2   (v1 above: $(gobench_metric BenchmarkRunnerTrueVsBareRunc ratio)x; target: <= 1.5x)"
    echo "run layout on v2: setup $(v2 BenchmarkRunLayout setup-ms) ms, teardown $(v2 BenchmarkRunLayout teardown-ms) ms  (milliseconds under qemu's emulation: compare the ratios, not the times)"
  else
    echo "(the guest failed; its log:)"; tail -n 20 "$work/v2guest.log"
  fi
fi
