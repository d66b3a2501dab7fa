#!/bin/bash
# A whole sealed run in the cgroup v2 guest, as an operator does it: sealrund installed with the
# project's unit (deploy/sealrund.service: Delegate=yes) and started by systemd; keys, a hidden
# exam and the ARI kit in the content store; the demo track with every pin filled and budgets an
# emulated machine can meet; `sealrun run --wait` of the scripted demo agent; `sealrun verify`.
# sealrund signs with the guest's TPM (/dev/tpmrm0, through the kernel's resource manager) and
# has it quote the run; sealrun verify --tpm checks the quote. While the run lives, its cgroups are sampled: they must be below sealrund's delegated cgroup,
# and nothing may appear at the top of the hierarchy. Results (logs, the attestation) go to $1.
set -euo pipefail
out=$1
G=/sealrun-guest
state=$G/daemon-state
step() { echo "== $*"; }

step "install: binaries, the unit, the config"
install -m 0755 "$G/bin/sealrun" "$G/bin/sealrund" "$G/bin/runner" "$G/bin/runner-exec" "$G/bin/sealrun-netns-hook" "$G/bin/sealrun-hook-relay" /usr/local/bin/
install -m 0644 "$G/repo/deploy/sealrund.service" /etc/systemd/system/sealrund.service
grep -q '^Delegate=yes' /etc/systemd/system/sealrund.service
getent group sealrun >/dev/null || groupadd --system sealrun
mkdir -p /etc/sealrun "$state"
chmod 0711 "$state"
# The guest's TPM (qemu's tpm-emulator, backed by the host's swtpm: scripts/cgroup2-guest.sh):
# sealrund signs in it, measures itself into PCR 23 at start and has it quote the run.
udevadm settle --timeout=60 || true
[ -c /dev/tpmrm0 ] || { echo "no /dev/tpmrm0: the guest has no TPM (qemu's -tpmdev emulator)"; ls -l /dev/tpm* 2>&1; dmesg | grep -iE 'tpm|tis' | head -n 20; exit 1; }
sealrun tpm enroll --device /dev/tpmrm0 --out /etc/sealrun/tpm
sealrun tpm verify /etc/sealrun/tpm/enrollment.json --ek-ca "$G/tpm-ca/root.pem" --ek-intermediate "$G/tpm-ca/issuer.pem"
cat >/etc/sealrun/sealrun.toml <<EOF
state_dir = "$state"
[keys]
signing = "tpm:/dev/tpmrm0"
public = "/etc/sealrun/tpm/signing-key.pem"
[tpm]
enrollment = "/etc/sealrun/tpm/enrollment.json"
pcrs = [0, 7, 23]
[resources]
concurrency = 1
EOF
sealrund --config /etc/sealrun/sealrun.toml --check

step "images: the local store of the data disk (verified on the host: re-hashing 2 GB here takes minutes)"
mkdir -p "$state/images"
cp -al "$G/state/images/sha256" "$state/images/" 2>/dev/null || true
sealrun --state-dir "$state" images ls
lock=$G/state/images.lock
ref() { sed -n "s/^\"$1\" = \"\(.*\)\"/\1/p" "$lock"; }

step "exam and kit into the content store"
work=$(mktemp -d)
sealrun exam synth --seed 424242 --count 12 --out "$work/docs.jsonl"
exam_sha=$(sealrun exam build --documents "$work/docs.jsonl" --out "$work/exam.sealrun" | grep -oE '[0-9a-f]{64}' | head -n 1)
sealrun kit build "$G/repo/kits/ari" --out "$work/kit" >"$work/kit.txt"
kit_sha=$(grep -oE '[0-9a-f]{64}' "$work/kit.txt" | tail -n 1)
val_sha=$(sha256sum "$work/kit/validation.sealrun" | cut -d' ' -f1)
sealrun --state-dir "$state" content add "$work/exam.sealrun" "$work/kit"

step "the track: demo, every pin filled, budgets for an emulated machine"
scaffold_sha=$(sha256sum "$G/repo/kits/demo-agent/agent.sh" | cut -d' ' -f1)
sed -e "s/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/$exam_sha/" \
	-e "s/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb/$val_sha/" \
	-e "s/cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc/$kit_sha/" \
	-e "s/ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff/$scaffold_sha/" \
	-e "s|sealrun.local/demo-controller@sha256:d*|$(ref demo-controller)|" \
	-e "s|sealrun.local/python@sha256:e*|$(ref python)|" \
	-e 's/questions = 40/questions = 12/' -e 's/wall = "6m"/wall = "20m"/' -e 's/call_limit = "2m"/call_limit = "8m"/' \
	-e 's/reserve = "1m"/reserve = "3m"/' -e 's/grading = "3m"/grading = "15m"/' -e 's/question_limit = "10s"/question_limit = "2m"/' \
	-e 's/ *# placeholder$//' -e 's/^name = "demo"/name = "demo-cgroup2-guest"/' \
	"$G/repo/tracks/demo.toml" >"$work/track.toml"
sealrun track validate "$work/track.toml"
cp "$work/track.toml" "$out/track.toml"

step "systemctl start sealrund"
systemctl daemon-reload
systemctl start sealrund
systemctl show sealrund -p ActiveState -p ControlGroup -p Delegate -p MainPID
cg=$(systemctl show sealrund -p ControlGroup --value)
sealrun doctor >"$out/doctor.txt" 2>&1 || true
grep -E 'cgroup|device' "$out/doctor.txt"
grep -q '^ok  *cgroup placement  *delegated by systemd' "$out/doctor.txt"

step "a sealed run (the scripted demo agent), sampling where its cgroups are"
(set +e; while sleep 2; do
	{ date +%s; find "/sys/fs/cgroup$cg" -mindepth 1 -maxdepth 4 -type d 2>/dev/null; ls -d /sys/fs/cgroup/sealrun 2>/dev/null; } >>"$out/cgroups-during-run.txt"
done) &
sampler=$!
set +e
# Bounded: a run that never ends is this test's failure, with what sealrund said about it below,
# not the guest's timeout with nothing said.
timeout 1500 sealrun run --track "$work/track.toml" --agent none/none --seed 1 --wait 2>&1 | tee "$out/run.txt"
rc=${PIPESTATUS[0]}
[ "$rc" = 124 ] && { echo "sealrun run --wait did not end in 25 minutes; sealrun ps -a and sealrund's journal follow"; sealrun ps -a; journalctl -u sealrund --no-pager | tail -n 60; }
set -e
kill $sampler 2>/dev/null || true
id=$(sealrun ps -a --json | grep -oE '"id": *"[^"]+"' | head -n 1 | sed 's/.*"\([^"]*\)"$/\1/')
sealrun show "$id" >"$out/show.txt" 2>&1 || true
cp "$state/runs/$id/result.att.json" "$state/runs/$id/result.tpm.json" "$state/runs/$id/report.json" "$state/runs/$id/audit.jsonl" "$state/tpm-events.jsonl" /etc/sealrun/tpm/enrollment.json "$out/" 2>/dev/null || true
cp /sys/kernel/security/tpm0/binary_bios_measurements "$out/" 2>/dev/null || true
journalctl -u sealrund --no-pager >"$out/sealrund.journal" 2>&1 || true
systemctl stop sealrund
[ "$rc" = 0 ] || { echo "sealrun run exited $rc"; exit 1; }

step "verify the attestation, and where the run's cgroups were"
sealrun verify "$state/runs/$id/result.att.json" --key /etc/sealrun/tpm/signing-key.pem --track "$work/track.toml" --audit "$state/runs/$id/audit.jsonl" \
	--tpm /etc/sealrun/tpm/enrollment.json --ek-ca "$G/tpm-ca/root.pem" --ek-intermediate "$G/tpm-ca/issuer.pem" | tee "$out/verify.txt"
grep -q "measured itself into PCR 23" "$out/verify.txt" || { echo "sealrun verify --tpm did not take the run's quote"; exit 1; }
grep -q "^/sys/fs/cgroup$cg/runs/$id/" "$out/cgroups-during-run.txt" || { echo "no cgroup of run $id was seen below $cg/runs"; exit 1; }
grep -q "^/sys/fs/cgroup$cg/supervisor$" "$out/cgroups-during-run.txt" || { echo "sealrund did not move into $cg/supervisor"; exit 1; }
if grep -q '^/sys/fs/cgroup/sealrun$' "$out/cgroups-during-run.txt"; then
	echo "a run's cgroup appeared at /sealrun, outside sealrund's delegated cgroup"
	exit 1
fi
echo "sealed run $id graded and verified, quoted by the guest's TPM; its cgroups lived below $cg/runs"
