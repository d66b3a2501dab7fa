#!/usr/bin/env bash
# make test-cgroup2: boots a cgroup-v2-only Debian guest with qemu and runs there, as root under
# systemd (PID 1) in a unit with Delegate=yes — as sealrund runs on a GPU server — the root tests
# of every package that touches cgroups, devices or containers, then a whole sealed run through
# sealrund started by systemd from the project's own unit, and (with --bench) the container
# benchmarks. See README, "Where the tests run".
#
#   scripts/cgroup2-guest.sh [--cache DIR] [--state DIR] [--work DIR] [--bench] [--keep]
#
# --cache  where the guest's root image, kernel and initrd are kept between runs (built once from
#          Debian's packages with debootstrap, keyed by this script's recipe); default
#          /var/cache/sealrun/build/cgroup2-guest
# --state  the local images make test built (images.lock and the store); default /var/lib/sealrun-test
# --work   scratch (the data and results disks); default a temporary directory, removed after
# --bench  also run the container and runner benchmarks in the guest; --bench-only: only them
# --keep   keep --work
# --root-only  only build (or find) the cached guest root, and stop (.ci/run does it beside make test)
# Environment: CGROUP2_GUEST_TIMEOUT (seconds for the whole boot, default 2700), CGROUP2_GUEST_MEM
# (default 8G), CGROUP2_GUEST_CPU (qemu's -cpu, default Nehalem under TCG, host under KVM),
# CGROUP2_GUEST_RUN (a regular expression: only the test binaries whose name matches).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

cache=/var/cache/sealrun/build/cgroup2-guest
state=/var/lib/sealrun-test
work=
bench=0
keep=0
root_only=0
while [ $# -gt 0 ]; do
	case "$1" in
	--cache) cache=$2; shift 2 ;;
	--state) state=$2; shift 2 ;;
	--work) work=$2; shift 2 ;;
	--bench) bench=1; shift ;;
	--bench-only) bench=only; shift ;;
	--root-only) root_only=1; shift ;;
	--keep) keep=1; shift ;;
	*) echo "cgroup2-guest: unknown argument $1; see the head of $0" >&2; exit 2 ;;
	esac
done

say() { printf 'cgroup2-guest: %s\n' "$*"; }
die() { printf 'cgroup2-guest: %s\n' "$*" >&2; exit 1; }
started=$(date +%s)
elapsed() { echo "$(( $(date +%s) - started ))s"; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, mkfs, and the guest's root tests); run it as root (make test-cgroup2)"
for tool in qemu-system-x86_64:qemu-system-x86 debootstrap:debootstrap mkfs.ext4:e2fsprogs lz4:lz4 go:Go swtpm:swtpm swtpm_setup:swtpm-tools swtpm_localca:swtpm-tools; do
	command -v "${tool%%:*}" >/dev/null || die "${tool%%:*} is missing (Debian package ${tool#*:}; make deps installs it)"
done

# --- The guest's root: Debian bookworm with systemd, the cloud kernel and runc ------------------
# Bump recipe when what the root holds changes: the cache key is its hash.
suite=bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
packages=systemd,systemd-sysv,dbus,udev,kmod,linux-image-cloud-amd64,initramfs-tools,runc,crun,busybox-static,iproute2,e2fsprogs,procps,util-linux,attr,openssl
# Installed afterwards by apt inside the root: debootstrap's own ordering cannot configure
# packages with deep dependency chains (buildah's containers-common fails there).
extras="docker-registry apache2-utils buildah"
recipe="cgroup2-guest/v2 $suite $mirror $packages $extras"
key=$(printf '%s' "$recipe" | sha256sum | cut -c1-16)
root_dir=$cache/$key
if [ ! -f "$root_dir/root.img" ]; then
	say "building the guest root (debootstrap $suite with systemd, linux-image-cloud-amd64, runc, crun) into $root_dir — a few minutes, once"
	mkdir -p "$cache"
	tmp=$(mktemp -d "$cache/.build-XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	(debootstrap --variant=minbase --include="$packages" "$suite" "$tmp/root" "$mirror" >"$tmp/debootstrap.log" 2>&1) &
	pid=$!
	while kill -0 $pid 2>/dev/null; do
		sleep 5
		say "  debootstrap ($(elapsed)): $(grep -E '^I: ' "$tmp/debootstrap.log" | tail -n 1 | cut -c1-100)"
	done
	wait $pid || { tail -n 20 "$tmp/debootstrap.log" >&2; die "debootstrap failed (log above)"; }
	r=$tmp/root
	say "  installing $extras in the guest root with apt ($(elapsed))"
	printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d"
	chmod 0755 "$r/usr/sbin/policy-rc.d"
	cp -L /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null || true
	mount -t proc proc "$r/proc"
	trap 'umount "$r/proc" 2>/dev/null; rm -rf "$tmp"' EXIT
	(chroot "$r" sh -c "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $extras" >"$tmp/apt.log" 2>&1) &
	pid=$!
	while kill -0 $pid 2>/dev/null; do
		sleep 5
		say "  apt ($(elapsed)): $(grep -vE '^\s*$' "$tmp/apt.log" | tail -n 1 | cut -c1-100)"
	done
	wait $pid || { umount "$r/proc"; tail -n 30 "$tmp/apt.log" >&2; die "installing $extras in the guest root failed (log above)"; }
	umount "$r/proc"
	trap 'rm -rf "$tmp"' EXIT
	rm -f "$r/usr/sbin/policy-rc.d" "$r/etc/resolv.conf"
	chroot "$r" apt-get clean
	kver=$(ls "$r/lib/modules" | head -n 1)
	[ -n "$kver" ] && [ -f "$r/boot/initrd.img-$kver" ] || die "the kernel or its initrd is missing in the guest root"
	# qemu -kernel boots the uncompressed ELF (through PVH): unpack vmlinuz's LZ4 payload.
	off=$(grep -obUaP '\x02\x21\x4c\x18' "$r/boot/vmlinuz-$kver" | head -n 1 | cut -d: -f1)
	[ -n "$off" ] || die "no LZ4 payload in vmlinuz-$kver"
	tail -c +$((off + 1)) "$r/boot/vmlinuz-$kver" | lz4 -dc >"$tmp/vmlinux" 2>/dev/null || true
	file_head=$(head -c 4 "$tmp/vmlinux" | od -An -tx1 | tr -d ' ')
	[ "$file_head" = 7f454c46 ] || die "unpacking vmlinuz-$kver did not give an ELF kernel"
	cp "$r/boot/initrd.img-$kver" "$tmp/initrd.img"
	# The guest: no login, no network services; /dev/vdb holds this run's data, /dev/vdc takes the
	# results back (a tar stream); the unit sealrun-guest.service runs the data disk's guest.sh,
	# delegated like sealrund's, and powers the guest off.
	echo sealrun-guest >"$r/etc/hostname"
	printf '/dev/vda / ext4 rw,noatime 0 1\n/dev/vdb /sealrun-guest ext4 rw,noatime 0 2\n' >"$r/etc/fstab"
	mkdir -p "$r/sealrun-guest"
	chmod 0711 "$r/sealrun-guest"
	cat >"$r/etc/systemd/system/sealrun-guest.service" <<-'UNIT'
		[Unit]
		Description=sealrun cgroup v2 guest: tests and a sealed run
		After=local-fs.target systemd-modules-load.service
		Requires=local-fs.target
		[Service]
		Type=oneshot
		Delegate=yes
		ExecStart=/sealrun-guest/repo/scripts/cgroup2-guest/guest.sh
		StandardOutput=tty
		StandardError=tty
		TTYPath=/dev/ttyS0
		TimeoutStartSec=infinity
		[Install]
		WantedBy=multi-user.target
	UNIT
	ln -sf /etc/systemd/system/sealrun-guest.service "$r/etc/systemd/system/multi-user.target.wants/sealrun-guest.service"
	for u in getty@tty1.service serial-getty@ttyS0.service systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer docker-registry.service; do
		ln -sf /dev/null "$r/etc/systemd/system/$u"
	done
	printf 'loop\nveth\ntun\noverlay\nbridge\n' >"$r/etc/modules-load.d/sealrun.conf"
	rm -rf "$r/var/cache/apt/archives/"*.deb
	say "  packing the root image ($(du -sh "$r" | cut -f1))"
	truncate -s 8G "$tmp/root.img"
	mkfs.ext4 -q -F -L sealrun-root -d "$r" "$tmp/root.img"
	rm -rf "$r"
	mv "$tmp" "$root_dir"
	trap - EXIT
	say "guest root ready in $(elapsed)"
fi

[ "$root_only" = 1 ] && exit 0
[ -f "$state/images.lock" ] || die "no local images in $state (images.lock): make test builds them first (sealrun images build-local)"

# --- This run's data: the tree, test binaries and commands built here, the local images ---------
own_work=0
if [ -z "$work" ]; then
	work=$(mktemp -d /var/tmp/sealrun-cgroup2-XXXXXX)
	own_work=1
	[ "$keep" = 1 ] || trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
data=$work/data
rm -rf "$data" && mkdir -p "$data/tests" "$data/bin" "$data/state" "$work/results"
chmod 0711 "$data" "$data/state"
say "copying the tree and building the test binaries and commands for the guest (no Go toolchain there)"
mkdir -p "$data/repo"
git ls-files -z --cached --others --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$data/repo"
export CGO_ENABLED=0 GOTOOLCHAIN=local
pkgs="sandbox sandbox/cgroup runner grader controller daemon cmd/sealrun"
for p in $pkgs; do
	go test -tags sealrun_testseams -c -o "$data/tests/$(echo "$p" | tr / _).test" "./$p"
done
# bin: release builds (sealrund.service runs these); testbin: what the tests start, with the test
# seams compiled in as make test builds them (a release sealrund refuses SEALRUND_TEST_*).
mkdir -p "$data/testbin"
for p in cmd/sealrun cmd/sealrund cmd/runner cmd/sealrun-netns-hook e2e/hostile grader/internal/fastbundle; do
	go build -trimpath -o "$data/bin/$(basename "$p")" "./$p"
	go build -tags sealrun_testseams -trimpath -o "$data/testbin/$(basename "$p")" "./$p"
done
for c in runner-exec sealrun-hook-relay; do # the C programs, as make build builds them
	${CC:-cc} -static -O2 -Wall -Wextra -Werror -o "$data/bin/$c" "cmd/$c/main.c"
	cp "$data/bin/$c" "$data/testbin/"
done
say "verifying the local images and linking them into the data disk"
cp "$state/images.lock" "$data/state/"
mkdir -p "$data/state/images/sha256"
chmod 0711 "$data/state/images" "$data/state/images/sha256"
for key in controller demo-controller python; do
	ref=$(sed -n "s/^\"$key\" = \"\(.*\)\"/\1/p" "$state/images.lock")
	digest=${ref##*@sha256:}
	[ -n "$digest" ] && [ -d "$state/images/sha256/$digest" ] || die "images.lock in $state has no $key image in the store; rebuild with make test"
	"$data/bin/sealrun" --state-dir "$state" images verify "sha256:$digest" >/dev/null ||
		die "the $key image in $state does not verify; rebuild it (make test)"
	cp -al "$state/images/sha256/$digest" "$data/state/images/sha256/"
done
[ -d "$state/airs-digits-raw" ] && cp -al "$state/airs-digits-raw" "$data/state/"
# A TPM for the guest (docs/TPM.md): Debian's swtpm, manufactured by swtpm_setup with EK
# certificates from a CA of this run's own (its root and issuer go to the guest, as a TPM maker's
# CA would to a reader), served to qemu's tpm-emulator on its control socket; the guest's kernel
# (tpm_tis, built in) gives sealrund /dev/tpmrm0, and SeaBIOS measures the boot into it.
tpm=$work/tpm
rm -rf "$tpm" && mkdir -p "$tpm/ca" "$tpm/state" "$data/tpm-ca"
printf 'statedir = %s\nsigningkey = %s/signkey.pem\nissuercert = %s/issuercert.pem\ncertserial = %s/certserial\n' "$tpm/ca" "$tpm/ca" "$tpm/ca" "$tpm/ca" >"$tpm/localca.conf"
printf -- '--platform-manufacturer sealrun-guest\n--platform-version 1\n--platform-model swtpm\n' >"$tpm/localca.options"
printf 'create_certs_tool = swtpm_localca\ncreate_certs_tool_config = %s/localca.conf\ncreate_certs_tool_options = %s/localca.options\nactive_pcr_banks = sha256\n' "$tpm" "$tpm" >"$tpm/setup.conf"
swtpm_setup --tpm2 --tpmstate "$tpm/state" --create-ek-cert --lock-nvram --config "$tpm/setup.conf" >"$tpm/setup.log" 2>&1 ||
	{ cat "$tpm/setup.log" >&2; die "swtpm_setup failed (log above)"; }
cp "$tpm/ca/swtpm-localca-rootca-cert.pem" "$data/tpm-ca/root.pem"
cp "$tpm/ca/issuercert.pem" "$data/tpm-ca/issuer.pem"
printf 'bench=%q\nrun=%q\ntpm=1\n' "$bench" "${CGROUP2_GUEST_RUN:-}" >"$data/guest.conf"
size=$(( $(du -sm "$data" | cut -f1) * 13 / 10 + 4096 ))
say "packing the data disk ($(du -sh "$data" | cut -f1), a ${size} MiB ext4 image)"
rm -f "$work/data.img"
truncate -s "${size}M" "$work/data.img"
mkfs.ext4 -q -F -L sealrun-data -d "$data" "$work/data.img"
rm -f "$work/results.img"
truncate -s 1G "$work/results.img"

# --- Boot -------------------------------------------------------------------------------------
# Under TCG the guest's CPU is Nehalem (SSE4.2, no AVX): with -cpu max every test binary ran
# 30-50% longer (2026-11-27: sandbox 156 s against 106, runner 268 against 193, grader 159-185
# against 142), most likely the AVX2 paths Go, numpy and OpenBLAS take where a CPU offers them,
# which qemu emulates slowly.
accel="tcg,thread=multi,tb-size=1024"
cpu=${CGROUP2_GUEST_CPU:-Nehalem}
if [ -w /dev/kvm ] && grep -qE '\b(vmx|svm)\b' /proc/cpuinfo && [ ! -d /sys/module/kvm_pvm ]; then
	accel=kvm cpu=${CGROUP2_GUEST_CPU:-host}
fi
say "booting the guest (qemu, $accel, -cpu $cpu; cgroup v2 only, systemd as PID 1) — its console follows, prefixed 'guest|'"
timeout_s=${CGROUP2_GUEST_TIMEOUT:-2700}
# The firmware is qboot, not SeaBIOS: with a TPM, SeaBIOS puts its TPM log and the ACPI tables
# where qemu 7.2 then loads -initrd (it reserves too little below them), the kernel finds no ACPI
# table (so no TPM, and it halts instead of powering off). qboot boots -kernel straight away.
bios=${CGROUP2_GUEST_BIOS:-/usr/share/qemu/qboot.rom}
[ -f "$bios" ] || die "no firmware $bios (Debian package qemu-system-data; make deps installs it)"
swtpm socket --tpm2 --tpmstate dir="$tpm/state" --ctrl type=unixio,path="$tpm/swtpm.sock" --log file="$tpm/swtpm.log" &
swtpm_pid=$!
trap 'kill $swtpm_pid 2>/dev/null || true; [ "$keep" = 1 ] || [ "$own_work" = 0 ] || rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -S "$tpm/swtpm.sock" ] && break; sleep 0.1; done
[ -S "$tpm/swtpm.sock" ] || die "swtpm did not make its socket $tpm/swtpm.sock ($(cat "$tpm/swtpm.log" 2>/dev/null))"
set +e
timeout --foreground "$timeout_s" qemu-system-x86_64 -nodefaults -no-reboot -nographic \
	-accel "$accel" -cpu "$cpu" -smp 2 -m "${CGROUP2_GUEST_MEM:-8G}" -bios "$bios" \
	-kernel "$root_dir/vmlinux" -initrd "$root_dir/initrd.img" \
	-append "root=/dev/vda rw console=ttyS0 quiet loglevel=3 systemd.show_status=0 systemd.unified_cgroup_hierarchy=1 cgroup_no_v1=all panic=-1 mitigations=off noxsave" \
	-drive "file=$root_dir/root.img,if=virtio,format=raw,snapshot=on" \
	-drive "file=$work/data.img,if=virtio,format=raw" \
	-drive "file=$work/results.img,if=virtio,format=raw" \
	-chardev "socket,id=chrtpm,path=$tpm/swtpm.sock" -tpmdev emulator,id=tpm0,chardev=chrtpm -device tpm-tis,tpmdev=tpm0 \
	-serial stdio -monitor none 2>&1 | sed -u 's/^/guest| /'
qrc=${PIPESTATUS[0]}
kill $swtpm_pid 2>/dev/null || true
set -e
[ "$qrc" = 124 ] && die "the guest did not finish in ${timeout_s}s (CGROUP2_GUEST_TIMEOUT); its console is above"
[ "$qrc" = 0 ] || die "qemu exited $qrc (console above)"
tar -xf "$work/results.img" -C "$work/results" 2>/dev/null || die "the guest wrote no results (console above)"
say "results in $work/results ($(elapsed) in all)"
cat "$work/results/summary.txt"
if [ -f "$work/results/bench.txt" ] && [ -n "${CGROUP2_BENCH_OUT:-}" ]; then
	cp "$work/results/bench.txt" "$CGROUP2_BENCH_OUT"
fi
grep -q '^PASS$' "$work/results/summary.txt" || { [ "$keep" = 1 ] || say "run with --keep to keep $work"; exit 1; }
