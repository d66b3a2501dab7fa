#!/usr/bin/env bash
# Installs the Debian packages sealrun's build, tests and demo need. Idempotent and quiet: it does
# nothing when everything is installed, and prints what it installs and, on failure, why.
set -euo pipefail

# By purpose: what make demo needs (demo_packages), and what make test adds (the test suites,
# the Slurm cluster, the cgroup v2 guest, the registry). scripts/deps.sh demo installs the first;
# scripts/deps.sh (all) both. gVisor's runsc is built by scripts/runsc.sh, for make test only.
demo_packages=(
  gcc             # cgo, and two small static C programs: the calls' shim (cmd/runner-exec) and the
                  #   network hook's relay (cmd/sealrun-hook-relay)
  libc6-dev       #   the C library it links statically
  runc            # the OCI runtime that runs every container (the default)
  busybox-static  # the controller test image: a shell and coreutils-level tools, no Python
  debootstrap     # builds the python (runner/grader) test image from Debian packages
  e2fsprogs       # mkfs.ext4: each run's /workspace is a loop-mounted ext4 image (the disk quota)
  iproute2        # ip(8), used by tests and leak checks to list namespaces and links
  ca-certificates # debootstrap fetches over https mirrors where configured
)
test_packages=(
  crun            # the faster OCI runtime a host may choose (runtime = "crun"); tests and bench run it too
  openssl         # second implementation that verifies attestation signatures in tests
  chromium        # headless: the leaderboard HTML page is rendered and screenshot-tested
  systemd         # systemd-analyze verifies the daemon's unit file offline
  slurmctld       # the Slurm e2e test runs a one-node cluster (deploy/slurm): controller,
  slurmd          #   node daemon,
  slurm-client    #   sbatch, squeue, sacct, scontrol
  munge           #   and Slurm's authentication
  qemu-system-x86 # make test-cgroup2 boots a cgroup-v2-only Debian guest (systemd as PID 1), with qboot
                  #   (qemu-system-data) as its firmware and a TPM of swtpm's
  lz4             #   and unpacks the Debian kernel's vmlinuz for qemu -kernel
  docker-registry # the CNCF distribution registry: images pin/pull/push tests against a real one
                  #   (TLS with a CA the test makes, htpasswd auth), installed with no service started
  apache2-utils   #   htpasswd, for that registry's password file
  buildah         # builds a scaffold image from a Containerfile, as operators do (SCAFFOLD.md)
  skopeo          # the baseline make bench pulls an image with, against images pull
  stress-ng       # the load beside container starts in the start-under-load test and make soak
  openssh-client  # ssh-agent, ssh-keygen: litewitness (torchwood's witness, the interop test's) keeps its key there
  sqlite3         #   and its state in SQLite: the test adds sealrun's log to it as witnessctl would
  xxd             # attest/VERIFY.md's by-hand cosignature check, run as written by a test
  jq              # attest/VERIFY.md's by-hand checks read JSON with it, run as written by tests
  tmux            # the human-run test drives a person at sealrun attach with send-keys and capture-pane
  nginx           # the TLS reverse proxy docs/OPERATOR.md puts in front of a witness: the witness's
                  #   flood and interop tests run behind it, configured as the docs say; no service started
  openssh-server  # sshd, on loopback with its own configuration, takes people to the documented
                  #   ForceCommand (deploy/ssh) in the people test; installed with no service started
  swtpm           # a software TPM 2.0: package tpm's tests enroll, sign and quote with one of their own
  swtpm-tools     #   swtpm_setup and swtpm_localca: its EK certificates, from a CA the test makes
  tpm2-tools      # tpm2_checkquote and tpm2_eventlog (nobody here wrote them) check sealrun's quotes and boot-log replay
)
case "${1:-all}" in
  demo) packages=("${demo_packages[@]}") ;;
  all) packages=("${demo_packages[@]}" "${test_packages[@]}") ;;
  *) echo "scripts/deps.sh: give demo or all (default), not ${1}" >&2; exit 2 ;;
esac

# crun refuses a hybrid cgroup host whose cgroup v2 hierarchy holds any controller ("cgroups in
# hybrid mode not supported, drop all controllers from cgroupv2"). systemd's hybrid layout mounts
# every controller on v1; a host that left one on v2 (this project's CI VMs leave hugetlb) gets
# it mounted on v1 as systemd would, when no v2 cgroup uses it. sealrun doctor names the same fix.
hybrid_controllers_to_v1() {
  local unified=/sys/fs/cgroup/unified c
  [ -f "$unified/cgroup.controllers" ] && [ "$(stat -f -c %T /sys/fs/cgroup)" = tmpfs ] || return 0
  for c in $(cat "$unified/cgroup.controllers"); do
    if grep -qw "$c" "$unified/cgroup.subtree_control"; then
      echo "make deps: $c is in use on this host's cgroup v2 hierarchy; crun will refuse this host (sealrun doctor says why); runc is unaffected" >&2
      continue
    fi
    if [ "$(id -u)" != 0 ]; then
      echo "make deps: crun needs $c mounted on cgroup v1 here; run as root: mkdir -p /sys/fs/cgroup/$c && mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c" >&2
      continue
    fi
    echo "make deps: mounting the $c cgroup controller on v1 (/sys/fs/cgroup/$c), as systemd's hybrid layout does, so that crun can run here"
    mkdir -p "/sys/fs/cgroup/$c" && mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c" ||
      echo "make deps: could not mount $c on cgroup v1; crun will refuse this host (sealrun doctor says why)" >&2
  done
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  hybrid_controllers_to_v1
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  echo "make deps: missing Debian packages: ${missing[*]}" >&2
  echo "make deps: installing them needs root; run: sudo make deps" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  echo "make deps: apt-get not found; install these packages with your package manager: ${missing[*]}" >&2
  exit 1
fi

log=$(mktemp)
# Installing must not start system services (slurmctld, slurmd, munge): the tests start their
# own in a temporary directory. policy-rc.d, which invoke-rc.d and deb-systemd-invoke obey,
# says so for the time of the install, unless the machine already has one.
guard=
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\n# sealrun make deps: no service starts during the install\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod 755 /usr/sbin/policy-rc.d
  guard=/usr/sbin/policy-rc.d
fi
trap 'rm -f "$log" $guard' EXIT
export DEBIAN_FRONTEND=noninteractive
echo "make deps: installing ${missing[*]}"
if ! apt-get update -qq >"$log" 2>&1; then
  echo "make deps: apt-get update failed; check the machine's Debian mirror and network. Last lines:" >&2
  tail -n 20 "$log" >&2
  exit 1
fi
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
  echo "make deps: apt-get install ${missing[*]} failed. Last lines:" >&2
  tail -n 20 "$log" >&2
  exit 1
fi
hybrid_controllers_to_v1
