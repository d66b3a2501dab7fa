#!/bin/bash
# gpu-check.sh: a sealed run on a real GPU, prepared here and run there as one command.
#
#   make gpu-kit                         here: scripts/gpu-check.sh pack gpu-kit (Go, apt-get)
#   scripts/gpu-check.sh check gpu-kit OUT [--python PY] [--gpu NAME]
#                                        there, as root, on a bare GPU machine (nothing to fetch)
#   scripts/gpu-check.sh check --dry-run gpu-kit OUT
#                                        here: the same steps on stand-in GPU nodes, stopping
#                                        before the GPU (no CUDA), so the real call is not the first
#
# pack writes what the GPU machine needs and cannot fetch, in under 64 MiB: sealrun's binaries
# (static, stripped), Debian's runc, libseccomp2 and busybox-static as .debs, the ARI kit. check
# unpacks them into a private prefix (dpkg -x, never over /), then goes step by step, each step's
# outcome a line of OUT/summary.txt, and stops at the first step that fails, saying which and why:
#   1 host      what the machine is: kernel (gVisor says 4.4.0), cgroups, user namespaces, the GPU,
#               the driver, Python and PyTorch                                 -> host.txt
#   2 unpack    the binaries and the .debs; runc runs from the prefix
#   3 cdi       the GPU's CDI spec: nvidia-ctk cdi generate where it is installed, else sealrun's
#               own generator (sealrun sandbox cdi)                            -> cdi.json
#   4 images    the runner/grader image from this machine's own Python and PyTorch, through
#               sealrun's import path (an OCI layout, sealrun images import); the controller
#               image from the busybox .deb (images build-local)
#   5 doctor    sealrun doctor with the prefix's runc                         -> doctor.txt
#   6 probe     the runner's posture with the GPU, from inside and the host   -> probe.json
#   7 train     the ARI starter's training step bare, then as a sealed runner container with
#               the GPU: bytes/s and peak GPU memory, and their ratio         -> train.txt
#   8 run       a whole sealed run (sealrun demo --quick, one seed) with the GPU  -> run.txt,
#               result.att.json
# OUT holds at most those 8 files (summary.txt first). Every step has its own time limit, and
# the whole check ends by GPU_CHECK_DEADLINE (560 s; a device call may run 600). --dry-run uses
# a stand-in GPU (device nodes with no driver behind them, a stand-in libcuda) whose CDI spec
# never reaches /etc/cdi (a private mount namespace), the python image make test builds (its
# rootfs as the "host" Python, entered with chroot), and trains on the CPU for a few steps: it
# proves the plumbing, not the GPU. e2e.TestGPUCheckDryRun runs it on every make test.
set -u

die() { echo "gpu-check.sh: $*" >&2; exit 2; }

# ---------------------------------------------------------------- pack (here)

pack() {
	local dir=${1:?usage: gpu-check.sh pack DIR}
	local go=${GO:-go} ldflags=${LDFLAGS:-}
	[ -f go.mod ] && [ -d cmd/sealrun ] || die "pack runs in the repository's root"
	local tmp="$dir.tmp"
	rm -rf "$tmp" && mkdir -p "$tmp/bin" "$tmp/debs" || exit 1
	if [ -n "${GPU_CHECK_PREBUILT:-}" ]; then # a test's: the binaries it built
		echo "pack: sealrun's binaries from $GPU_CHECK_PREBUILT"
		for c in sealrun sealrund runner sealrun-netns-hook runner-exec sealrun-hook-relay; do cp "$GPU_CHECK_PREBUILT/$c" "$tmp/bin/$c" || exit 1; done
	else
		echo "pack: sealrun's binaries, static and stripped"
		for c in sealrun sealrund runner sealrun-netns-hook; do
			CGO_ENABLED=0 "$go" build -trimpath -buildvcs=false -ldflags "$ldflags -s -w" -o "$tmp/bin/$c" "./cmd/$c" || exit 1
		done
		for c in runner-exec sealrun-hook-relay; do # C, static: make build's
			[ -x "bin/$c" ] || die "bin/$c is missing: make build first"
			cp "bin/$c" "$tmp/bin/$c" || exit 1
		done
	fi
	tar -C "$tmp/bin" -czf "$tmp/bin.tar.gz" . && rm -rf "$tmp/bin" || exit 1
	if [ -n "${GPU_CHECK_DEBS:-}" ]; then # a test's: no download (tests never leave the machine)
		echo "pack: the .debs in $GPU_CHECK_DEBS"
		cp "$GPU_CHECK_DEBS"/*.deb "$tmp/debs/" || exit 1
	else
		echo "pack: Debian's runc, libseccomp2 and busybox-static (.debs)"
		(cd "$tmp/debs" && apt-get download -q -o APT::Sandbox::User=root runc libseccomp2 busybox-static >/dev/null) || die "apt-get download runc libseccomp2 busybox-static failed (apt-get update?)"
	fi
	echo "pack: the ARI kit"
	tar -xzf "$tmp/bin.tar.gz" -C "$tmp" ./sealrun && "$tmp/sealrun" kit build kits/ari --out "$tmp/kit" >/dev/null 2>&1 && rm -f "$tmp/sealrun" || die "sealrun kit build kits/ari failed"
	tar -C "$tmp" -czf "$tmp/kit.tar.gz" kit && rm -rf "$tmp/kit" || exit 1
	cp scripts/gpu-check.sh "$tmp/gpu-check.sh"
	local bytes
	bytes=$(du -sb "$tmp" | cut -f1)
	if [ "$bytes" -gt $((60 << 20)) ]; then
		die "the kit is $bytes bytes: over the 60 MiB it may take of the 64 MiB a call carries"
	fi
	rm -rf "$dir" && mv "$tmp" "$dir" || exit 1
	echo "pack: $dir, $bytes bytes ($((bytes >> 20)) MiB of the 64 MiB a call carries):"
	(cd "$dir" && ls -l bin.tar.gz kit.tar.gz debs/*.deb | awk '{print "  " $5 "  " $NF}')
}

# ---------------------------------------------------------------- check (there)

START=$(date +%s)
SUMMARY=""
STEP=""
FAILED=""

# log writes a line of the summary (and to the terminal).
log() { echo "$*" | tee -a "$SUMMARY"; }
elapsed() { echo $(($(date +%s) - START)); }

# step NAME LIMIT FUNC: runs FUNC in a bash of its own under timeout(1), which ends it and
# everything it started at its limit; the first failure ends the check.
step() {
	local name=$1 limit=$2 fn=$3 t0 rc left
	t0=$(date +%s)
	# The whole check ends by its deadline (GPU_CHECK_DEADLINE, 560 s: a device call has 600),
	# so that what it learned comes back: a step gets at most what is left.
	left=$((${GPU_CHECK_DEADLINE:-560} - $(elapsed)))
	if [ "$left" -lt 15 ]; then
		log "FAILED step $name: not started, $left s left of the check's ${GPU_CHECK_DEADLINE:-560} s"
		FAILED=$name
		return 1
	fi
	[ "$limit" -gt "$left" ] && limit=$left
	log "== step $name (at $(elapsed) s, limit $limit s)"
	timeout -k 10 "$limit" bash -c "$fn"
	rc=$?
	if [ "$rc" -ne 0 ]; then
		[ "$rc" = 124 ] || [ "$rc" = 137 ] && log "   ended by its $limit s limit"
		log "FAILED step $name after $(($(date +%s) - t0)) s (status $rc): the lines above say why"
		FAILED=$name
		return 1
	fi
	log "ok step $name in $(($(date +%s) - t0)) s"
}

# note KEY VALUE: a figure the summary keeps.
note() { log "   $1: $2"; }

check() {
	# The check runs in a mount namespace of its own: what it mounts (a private /etc/cdi in a dry
	# run, the libseccomp runc may need, tmpfs run directories) never reaches the machine's.
	if [ -z "${GPU_CHECK_PRIVATE:-}" ] && command -v unshare >/dev/null; then
		GPU_CHECK_PRIVATE=1 exec unshare --mount --propagation private bash "$0" check "$@"
	fi
	DRY=0 PY="" GPU="nvidia.com/gpu=0" HOSTROOT=/
	local kit="" out=""
	while [ $# -gt 0 ]; do
		case $1 in
		--dry-run) DRY=1 ;;
		--python) PY=${2:?--python PY}; shift ;;
		--gpu) GPU=${2:?--gpu NAME}; shift ;;
		-*) die "unknown flag $1" ;;
		*) if [ -z "$kit" ]; then kit=$1; elif [ -z "$out" ]; then out=$1; else die "extra argument $1"; fi ;;
		esac
		shift
	done
	[ -n "$kit" ] && [ -n "$out" ] || die "usage: gpu-check.sh check [--dry-run] [--python PY] [--gpu NAME] KITDIR OUT"
	[ "$(id -u)" = 0 ] || die "check runs as root (containers, cgroups, mounts)"
	KIT=$(cd "$kit" && pwd) || die "no kit at $kit (make gpu-kit)"
	[ -f "$KIT/bin.tar.gz" ] && [ -f "$KIT/kit.tar.gz" ] || die "$KIT is not a kit from gpu-check.sh pack"
	mkdir -p "$out" && OUT=$(cd "$out" && pwd) || die "cannot make $out"
	SUMMARY=$OUT/summary.txt
	: >"$SUMMARY"
	P=${GPU_CHECK_PREFIX:-/tmp/sealrun-gpu}
	rm -rf "$P" && mkdir -p -m 0755 "$P" || die "cannot make $P"
	# Containers reach their image's rootfs under it: every directory above must let them pass.
	local d=$P
	while [ "$d" != / ]; do
		[ "$(($(stat -c %#a "$d") & 1))" = 1 ] || die "$d is not searchable by others (mode $(stat -c %a "$d")): containers could not reach the image store under $P; give GPU_CHECK_PREFIX elsewhere"
		d=$(dirname "$d")
	done
	STATE=$P/state WORK=$P/work SEALRUN=$P/bin/sealrun
	mkdir -p "$STATE" "$WORK"
	log "gpu-check.sh: $(date -u +%FT%TZ), kit $KIT, prefix $P$([ "$DRY" = 1 ] && echo ', DRY RUN: stand-in GPU, no CUDA')"
	[ -n "${GPU_CHECK_PRIVATE:-}" ] || log "note: no unshare(1): the check's mounts are the machine's"
	if [ "$DRY" = 1 ]; then
		# The stand-in GPU's CDI spec must not reach this machine's /etc/cdi: the private mount
		# namespace's /etc/cdi is a tmpfs of its own.
		[ -n "${GPU_CHECK_PRIVATE:-}" ] || die "a dry run needs unshare(1) (util-linux)"
		[ -d /etc/cdi ] || { mkdir /etc/cdi && MADE_CDI=1; }
		mount -t tmpfs -o mode=0755 tmpfs /etc/cdi || die "cannot mount a private /etc/cdi"
		dry_setup || die "dry run: no stand-in"
	fi
	export PATH=$P/bin:$PATH DRY PY GPU HOSTROOT KIT OUT P STATE WORK SUMMARY SEALRUN TRAIN PROFILE PROFILE_LIST START
	export -f log note elapsed inroot inroot_cwd s_host s_unpack s_cdi s_images s_doctor s_probe s_train s_run
	trap 'cleanup' EXIT
	step host 60 s_host && PY=$(cat "$P/python") && export PY &&
		step unpack 60 s_unpack &&
		step cdi 30 s_cdi &&
		step images 300 s_images &&
		step doctor 30 s_doctor &&
		step probe 60 s_probe &&
		step train 150 s_train &&
		step run 300 s_run
	if [ -n "$FAILED" ]; then
		log "RESULT: stopped at step $FAILED after $(elapsed) s"
		exit 1
	fi
	log "RESULT: every step passed in $(elapsed) s"
}

cleanup() {
	# The check's mounts end with its mount namespace; an /etc/cdi the dry run had to make goes.
	if [ -n "${MADE_CDI:-}" ]; then umount /etc/cdi && rmdir /etc/cdi; fi
	ls "$OUT" >/dev/null 2>&1 && log "files: $(cd "$OUT" && ls | tr '\n' ' ')"
}

# dry_setup makes the stand-in GPU (device nodes with no driver behind them, a stand-in driver
# library) and takes the python image's rootfs make test builds as the host's Python.
dry_setup() {
	local r=$P/standin
	mkdir -p "$r/dev" "$r/usr/lib/x86_64-linux-gnu" "$r/proc/driver/nvidia/gpus/0000:01:00.0"
	mknod -m 666 "$r/dev/nvidia0" c 195 0 && mknod -m 666 "$r/dev/nvidiactl" c 195 255 && mknod -m 666 "$r/dev/nvidia-uvm" c 236 0 || return 1
	echo stand-in >"$r/usr/lib/x86_64-linux-gnu/libcuda.so.580.0.1"
	printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.0.1  (a stand-in)\n' >"$r/proc/driver/nvidia/version"
	printf 'Model: \t\t stand-in GPU (dry run)\nGPU UUID: \t GPU-00000000-0000-0000-0000-000000000001\nDevice Minor: \t 0\n' >"$r/proc/driver/nvidia/gpus/0000:01:00.0/information"
	local cache=${SEALRUN_TEST_BUILD_CACHE:-/var/cache/sealrun/build}
	HOSTROOT=$(ls -d "$cache"/python-*/rootfs 2>/dev/null | head -1)
	[ -n "$HOSTROOT" ] && [ -x "$HOSTROOT/usr/bin/python3" ] || { echo "dry run: no python rootfs under $cache (make test-images builds it)" >&2; return 1; }
	[ -n "$PY" ] || PY=/usr/bin/python3
	# Python in the chroot wants /proc and /dev; mounted in the check's namespace only.
	mount -t proc proc "$HOSTROOT/proc" && mount --rbind /dev "$HOSTROOT/dev"
}

# inroot runs a command in the host root (the dry run's: chroot into the python rootfs).
inroot() { if [ "$HOSTROOT" = / ]; then "$@"; else chroot "$HOSTROOT" "$@"; fi; }

s_host() {
	{
		echo "# host"
		uname -a
		echo "kernel $(uname -r)$([ "$(uname -r)" = 4.4.0 ] && echo ' (gVisor reports 4.4.0)')"
		grep -m1 -i -E 'gvisor|firecracker' /proc/version /sys/class/dmi/id/product_name 2>/dev/null
		echo "cgroup: $(stat -fc %T /sys/fs/cgroup 2>&1) ($(cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null || echo 'no cgroup v2 controllers file'))"
		echo "user namespaces: max $(cat /proc/sys/user/max_user_namespaces 2>/dev/null || echo '?'); unshare -U: $(unshare -U true 2>&1 && echo works)"
		echo "idmapped mounts: kernel $(uname -r) (5.12 or later has them)"
		echo "cpus $(nproc), memory $(awk '/MemTotal/{print $2" kB"}' /proc/meminfo), /tmp $(df -h /tmp | awk 'NR==2{print $4" free"}')"
		echo "# GPU"
		ls -l /dev/nvidia* 2>&1
		cat /proc/driver/nvidia/version 2>&1
		command -v nvidia-smi && nvidia-smi --query-gpu=name,uuid,driver_version,memory.total --format=csv 2>&1
		command -v nvidia-ctk && nvidia-ctk --version 2>&1 | head -1
		echo "# Python"
		if [ -z "$PY" ]; then
			for c in /opt/torch/.venv/bin/python3 /usr/bin/python3; do [ -x "$HOSTROOT$c" ] && PY=$c && break; done
		fi
		echo "python: ${PY:-none} (in root $HOSTROOT)"
		inroot "$PY" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")'
	} >"$OUT/host.txt" 2>&1
	note python "$(tail -1 "$OUT/host.txt")"
	[ -n "$PY" ] && echo "$PY" >"$P/python" && grep -q ' torch ' "$OUT/host.txt"
}

s_unpack() {
	mkdir -p "$P/bin" "$P/root" && tar -xzf "$KIT/bin.tar.gz" -C "$P/bin" || return 1
	for d in "$KIT"/debs/*.deb; do
		if command -v dpkg-deb >/dev/null; then
			dpkg-deb -x "$d" "$P/root" || return 1
		else # no dpkg: the .deb is an ar archive holding data.tar.*
			inroot "$PY" - "$d" "$P/root" <<'EOF' || return 1
import sys, tarfile, io
deb, dest = sys.argv[1], sys.argv[2]
b = open(deb, "rb").read()
assert b[:8] == b"!<arch>\n", deb + ": not a .deb"
i = 8
while i < len(b):
    name, size = b[i:i+16].decode().strip().rstrip("/"), int(b[i+48:i+58].decode().strip())
    if name.startswith("data.tar"):
        tarfile.open(fileobj=io.BytesIO(b[i+60:i+60+size])).extractall(dest, filter="tar")
    i += 60 + size + (size & 1)
EOF
		fi
	done
	# runc re-executes itself to start a container with an environment of its own (no
	# LD_LIBRARY_PATH): where the machine has no libseccomp.so.2 the loader must find the
	# prefix's in a directory it searches, here by an overlay in the check's mount namespace
	# (the dry run does it too, to prove the path).
	local multi=/usr/lib/x86_64-linux-gnu
	if [ "$DRY" = 1 ] || ! ls "$multi"/libseccomp.so.2 /lib/x86_64-linux-gnu/libseccomp.so.2 >/dev/null 2>&1; then
		mkdir -p "$P/libs" "$multi" && cp -a "$P/root$multi"/libseccomp.so.2* "$P/libs/" || return 1
		if mount -t overlay overlay -o "lowerdir=$multi:$P/libs" "$multi"; then
			note libseccomp "the prefix's, overlaid on $multi in the check's mount namespace$([ "$DRY" = 1 ] && echo ' (dry run: the machine has its own)')"
		else
			note libseccomp "missing on this machine, and the overlay that would give it was refused: runc cannot start containers"
			return 1
		fi
	fi
	cat >"$P/bin/runc" <<EOF
#!/bin/sh
# Debian's runc, from the private prefix, with its libseccomp.
LD_LIBRARY_PATH=$P/root/usr/lib/x86_64-linux-gnu:$P/root/lib/x86_64-linux-gnu exec $P/root/usr/sbin/runc "\$@"
EOF
	chmod +x "$P/bin/runc"
	mkdir -p "$WORK/kit" && tar -xzf "$KIT/kit.tar.gz" -C "$WORK" || return 1
	note sealrun "$("$SEALRUN" version 2>&1 | head -1)"
	note runc "$(runc --version 2>&1 | head -1)"
	note busybox "$("$P/root/bin/busybox" 2>&1 | head -1)"
	runc --version >/dev/null
}

s_cdi() {
	mkdir -p /etc/cdi
	if [ "$DRY" = 0 ] && command -v nvidia-ctk >/dev/null; then
		note "CDI spec" "nvidia-ctk cdi generate (NVIDIA's Container Toolkit is installed)"
		nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml >"$P/cdi.log" 2>&1 || { cat "$P/cdi.log"; return 1; }
		cp /etc/cdi/nvidia.yaml "$OUT/cdi.json"
	else
		local root=/
		[ "$DRY" = 1 ] && root=$P/standin
		note "CDI spec" "sealrun's own generator (sealrun sandbox cdi): nvidia-ctk is not installed"
		"$SEALRUN" sandbox cdi --root "$root" --out /etc/cdi/sealrun-nvidia.json || return 1
		cp /etc/cdi/sealrun-nvidia.json "$OUT/cdi.json"
	fi
}

# s_images: the runner image from this machine's Python: the interpreter, its standard library,
# the environment's packages PyTorch needs (not the driver: CDI brings it), and every shared
# library they link, as one layer of a docker-archive that sealrun imports.
s_images() {
	local root=$HOSTROOT img=$P/image list=$P/image/files ws=$P/ws-profile t0 t1
	mkdir -p "$img"
	# What the image needs, learned by running it: the starter's training step for a few steps
	# (the program the train and run steps run), then the site-packages its modules came from and
	# every file mapped into it (libraries PyTorch loads by path, or lazily: cuDNN's engines only
	# when used). A venv of PyTorch for CUDA 13 holds some 9 GiB of NVIDIA libraries and other
	# packages; packing all of it took longer than the step's 300 s on the first real call.
	t0=$(date +%s)
	rm -rf "$ws" && cp -r "$WORK/kit" "$ws" && chmod -R a+rwX "$ws" || return 1
	local pargs="--size small --steps 3 --save-every 1000 --seed 1"
	[ "$DRY" = 1 ] && pargs="--size toy --steps 2 --save-every 1000 --seed 1 --device cpu"
	(cd "$ws" && inroot_cwd "$ws" "$PY" -c "$PROFILE" $pargs --out ckpt-profile) >"$P/profile.log" 2>&1 || { tail -20 "$P/profile.log"; return 1; }
	[ -s "$ws/sealrun-profile.txt" ] || { tail -20 "$P/profile.log"; echo "the profile run wrote no sealrun-profile.txt"; return 1; }
	note "runner image profile" "$(grep -c '^top ' "$ws/sealrun-profile.txt") packages, $(grep -c '^map ' "$ws/sealrun-profile.txt") mapped files, $(($(date +%s) - t0)) s"
	t0=$(date +%s)
	inroot "$PY" -c "$PROFILE_LIST" <"$ws/sealrun-profile.txt" >"$list.py" || return 1
	# The shared libraries all of it links (what ldd finds) and the loader; then every path with
	# its directories resolved (a merged /usr's /lib is a link: the layer keeps the link and the
	# files where they are), a link's target beside it, and never the driver (CDI brings it).
	(
		cat "$list.py"
		inroot sh -c 'for f in "$@"; do ldd "$f" 2>/dev/null; done' sh "$(inroot readlink -f "$PY")" $(inroot sh -c 'find "$@" -name "*.so*" \( -type f -o -type l \) 2>/dev/null' sh $(cat "$list.py")) |
			awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u
	) | grep -v -E '/(libcuda|libnvidia-|libcudadebugger|libnvcuvid)[^/]*$' | inroot "$PY" -c '
import os, sys
out = set()
for line in sys.stdin:
    p = line.strip()
    if not p:
        continue
    full = os.path.join(os.path.realpath(os.path.dirname(p)), os.path.basename(p))
    out.add(full)
    hops = 0
    while os.path.islink(full) and hops < 40:  # every link of the chain, and where it ends
        t = os.path.join(os.path.dirname(full), os.readlink(full))
        full, hops = os.path.join(os.path.realpath(os.path.dirname(t)), os.path.basename(t)), hops + 1
        out.add(full)
for top in ("bin", "lib", "lib64", "sbin", "lib32", "libx32"):
    if os.path.islink("/" + top):
        out.add("/" + top)
print("\n".join(sorted(out)))' | sed 's|^/||' | grep -v -x -E 'bin/sh|usr/bin/sh' >"$list" || return 1
	note "runner image" "$(wc -l <"$list") paths from $root (python $PY)"
	mkdir -p "$img/extra/etc" "$img/extra/workspace" "$img/extra/bundle" "$img/extra/tmp" "$img/extra/usr/local/bin" "$img/extra/run/sealrun" "$img/extra/proc" "$img/extra/sys" "$img/extra/dev"
	: >"$img/extra/usr/local/bin/runner" && : >"$img/extra/run/sealrun/agent.sock" && chmod 755 "$img/extra/usr/local/bin/runner"
	# python3 and python on the PATH a sealed container gets (sandbox's baseEnv: /usr/local/bin
	# first), as the interpreter found here: a venv's python must be started by its own path to
	# find its pyvenv.cfg (a link would not), so a script that execs it.
	for n in python3 python; do
		printf '#!/bin/sh\nexec %s "$@"\n' "$PY" >"$img/extra/usr/local/bin/$n" && chmod 755 "$img/extra/usr/local/bin/$n" || return 1
	done
	# the agent's user as sealrun's own images name it (sandbox.AgentUID): PyTorch 2 asks
	# getpass.getuser() for its cache directory, which fails for a uid with no name
	printf 'root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000:agent:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' >"$img/extra/etc/passwd"
	printf 'root:x:0:\nagent:x:1000:\nnogroup:x:65534:\n' >"$img/extra/etc/group"
	chmod 1777 "$img/extra/tmp"
	# Each path once (a directory's files may be listed by it and by another), parents first;
	# hard links stored as the files they are.
	# A link inside those directories brings its target (Debian's torch/lib holds links to
	# /usr/lib/x86_64-linux-gnu).
	while read -r p; do [ -d "$root/$p" ] && [ ! -L "$root/$p" ] && (cd "$root" && find "$p" -path '*/__pycache__' -prune -o -print) || echo "$p"; done <"$list" |
		inroot "$PY" -c '
import os, sys
out = set()
for line in sys.stdin:
    p = line.rstrip("\n")
    out.add(p)
    full, hops = "/" + p, 0
    while os.path.islink(full) and hops < 40:  # every link of the chain, and where it ends
        t = os.path.join(os.path.dirname(full), os.readlink(full))
        full, hops = os.path.join(os.path.realpath(os.path.dirname(t)), os.path.basename(t)), hops + 1
        if os.path.lexists(full) and not os.path.isdir(full):
            out.add(full.lstrip("/"))
print("\n".join(sorted(out)))' | LC_ALL=C sort -u >"$list.all" || return 1
	tar -C "$root" --numeric-owner --no-recursion --hard-dereference -cf "$img/layer.tar" --files-from="$list.all" 2>"$P/tar.log" || { tail -5 "$P/tar.log"; return 1; }
	tar -C "$img/extra" --numeric-owner -rf "$img/layer.tar" . || return 1
	# /bin/sh: busybox's, static (the machine's may link what the layer lacks).
	local shdir=bin
	[ -L "$root/bin" ] && shdir=usr/bin # a merged /usr: /bin is the link kept above
	mkdir -p "$img/sh/$shdir" && cp "$P/root/bin/busybox" "$img/sh/$shdir/sh" && tar -C "$img/sh" --numeric-owner -rf "$img/layer.tar" "$shdir/sh" || return 1
	local diff size venvbin cfg cdig csize man mdig msize
	diff=$(sha256sum "$img/layer.tar" | cut -d' ' -f1)
	size=$(stat -c %s "$img/layer.tar")
	venvbin=$(dirname "$PY")
	t1=$(date +%s)
	note "runner layer" "$((size >> 20)) MiB, sha256:$diff, packed in $((t1 - t0)) s"
	# An OCI layout with the layer as a plain tar: sealrun imports it as it is (a docker-archive's
	# plain layer is gzipped on the way in, one CPU for minutes at this size).
	mkdir -p "$img/oci/blobs/sha256" && mv "$img/layer.tar" "$img/oci/blobs/sha256/$diff" || return 1
	printf '{"imageLayoutVersion":"1.0.0"}' >"$img/oci/oci-layout"
	cfg='{"architecture":"amd64","os":"linux","config":{"Env":["PATH='$venvbin':/usr/local/bin:/usr/bin:/bin","LANG=C.UTF-8","PYTHONDONTWRITEBYTECODE=1","HOME=/workspace"],"WorkingDir":"/workspace","Cmd":["'$PY'"]},"rootfs":{"type":"layers","diff_ids":["sha256:'$diff'"]}}'
	cdig=$(printf '%s' "$cfg" | sha256sum | cut -d' ' -f1) && csize=${#cfg}
	printf '%s' "$cfg" >"$img/oci/blobs/sha256/$cdig"
	man='{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:'$cdig'","size":'$csize'},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:'$diff'","size":'$size'}]}'
	mdig=$(printf '%s' "$man" | sha256sum | cut -d' ' -f1) && msize=${#man}
	printf '%s' "$man" >"$img/oci/blobs/sha256/$mdig"
	printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%d}]}' "$mdig" "$msize" >"$img/oci/index.json"
	"$SEALRUN" --state-dir "$STATE" images import "$img/oci" --name sealrun-gpu/python >"$P/import.log" 2>&1 || { tail -20 "$P/import.log"; return 1; }
	rm -rf "$img/oci"
	note "runner import" "$(($(date +%s) - t1)) s"
	awk '/^imported /{print $2; exit}' "$P/import.log" >"$P/runner-ref"
	grep -q @sha256: "$P/runner-ref" || { cat "$P/import.log"; return 1; }
	note "runner image" "$(cat "$P/import.log" | head -3 | tr '\n' ' ')"
	"$SEALRUN" --state-dir "$STATE" images build-local --only controller,demo-controller --busybox "$P/root/bin/busybox" --cache-dir "$P/cache" --lock "$P/images.lock" >"$P/controller.log" 2>&1 || { tail -20 "$P/controller.log"; return 1; }
	note "controller image" "$(grep -m1 '^controller: ' "$P/controller.log")"
}

s_doctor() {
	"$SEALRUN" --state-dir "$STATE" doctor --runtime runc --config "$P/none.toml" >"$OUT/doctor.txt" 2>&1
	local rc=$?
	grep -E '^(fail|warn)' "$OUT/doctor.txt" | sed 's/^/   doctor: /' | tee -a "$SUMMARY"
	note doctor "exit $rc ($(grep -c '^ok' "$OUT/doctor.txt") ok, $(grep -c '^warn' "$OUT/doctor.txt") warn, $(grep -c '^fail' "$OUT/doctor.txt") fail)"
	return 0 # the probe and the run below say whether a failed check matters here
}

s_probe() {
	"$SEALRUN" --state-dir "$STATE" sandbox probe --role runner --image "$(cat "$P/runner-ref")" --gpu "$GPU" --runtime runc --json >"$OUT/probe.json" 2>"$P/probe.err"
	local rc=$?
	cat "$P/probe.err" >>"$OUT/probe.json"
	note probe "exit $rc; $(grep -o '"ok": [a-z]*' "$OUT/probe.json" | head -1)"
	[ "$rc" = 0 ]
}

# The training step, the same program bare and sealed: the ARI starter's train.py for a fixed
# number of steps, then its throughput (the mean of its bytes/s lines after the first) and
# the peak GPU memory.
# PROFILE: the training step, then what it used: "top DIR" for each site-packages entry a module
# came from (a namespace of many packages, nvidia, gives its module files instead), "map FILE"
# for each file mapped into the process, written to sealrun-profile.txt in the working directory.
PROFILE='import os, runpy, site, sys
sys.argv = ["starter/train.py"] + sys.argv[1:]
runpy.run_path("starter/train.py", run_name="__main__")
here = os.getcwd()
sps = [os.path.realpath(p) for p in site.getsitepackages() + [site.getusersitepackages()] if os.path.isdir(p)]
out = set()
for m in list(sys.modules.values()):
    f = getattr(m, "__file__", None)
    if not isinstance(f, str):
        continue
    f = os.path.realpath(f)
    for sp in sps:
        if f.startswith(sp + os.sep):
            top = f[len(sp) + 1:].split(os.sep)[0]
            out.add("map " + f if top == "nvidia" else "top " + os.path.join(sp, top))
with open("/proc/self/maps") as fh:
    for line in fh:
        parts = line.rstrip("\n").split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/") or parts[5].endswith(" (deleted)"):
            continue
        p = parts[5]
        if p.startswith(("/dev/", "/proc/", "/sys/", "/memfd:", here + os.sep)) or not os.path.isfile(p):
            continue
        out.add("map " + p)
with open("sealrun-profile.txt", "w") as fh:
    fh.write("\n".join(sorted(out)) + "\n")'

# PROFILE_LIST: the image's paths from a profile on stdin: the interpreter, its standard library,
# the venv's own files, every .pth file (it runs at start-up; what it imports is in the profile),
# and what the profile names.
PROFILE_LIST='import os, site, sys, sysconfig
paths = {os.path.realpath(sys.executable), sys.executable}
for k in ("stdlib", "platstdlib"):
    paths.add(sysconfig.get_paths()[k])
if sys.prefix != sys.base_prefix:
    paths.add(os.path.join(sys.prefix, "pyvenv.cfg"))
    paths.add(os.path.join(sys.prefix, "bin"))
for sp in site.getsitepackages():
    if os.path.isdir(sp):
        for n in os.listdir(sp):
            if n.endswith(".pth") and os.path.isfile(os.path.join(sp, n)):
                paths.add(os.path.join(sp, n))
for line in sys.stdin:
    kind, _, p = line.rstrip("\n").partition(" ")
    if kind in ("top", "map") and p.startswith("/"):
        paths.add(p)
for p in sorted(paths):
    print(p)'

TRAIN='import getpass, runpy, sys, torch
print("user", getpass.getuser(), flush=True)  # PyTorch 2 asks it (its cache directory): the uid needs a name
sys.argv = ["starter/train.py"] + sys.argv[1:]
runpy.run_path("starter/train.py", run_name="__main__")
if torch.cuda.is_available():
    print("peak-gpu-bytes", torch.cuda.max_memory_allocated(), flush=True)'

s_train() {
	local args="--size small --steps 300 --save-every 1000 --seed 1"
	[ "$DRY" = 1 ] && args="--size toy --steps 20 --save-every 1000 --seed 1 --device cpu"
	local ws=$P/ws-bare
	rm -rf "$ws" && cp -r "$WORK/kit" "$ws" || return 1
	{
		echo "# bare: $PY starter/train.py $args"
		(cd "$ws" && inroot_cwd "$ws" "$PY" -c "$TRAIN" $args --out ckpt-bare)
		echo "exit $?"
		ws=$P/ws-sealed
		rm -rf "$ws" && cp -r "$WORK/kit" "$ws" && chmod -R a+rwX "$ws"
		echo "# sealed: a runner container with $GPU, $(nproc) CPUs, half the memory: python3 starter/train.py $args"
		# every CPU the bare run had, and half the machine's memory (CUDA's PyTorch needs GiBs of
		# host memory: the 512 MiB default was killed, exit 137, on the fourth real call)
		"$SEALRUN" --state-dir "$STATE" sandbox run --role runner --image "$(cat "$P/runner-ref")" --gpu "$GPU" --runtime runc --workspace "$ws" --cpus "$(nproc)" --memory "$(($(awk '/^MemTotal:/{print $2}' /proc/meminfo) / 2048))MiB" -- python3 -c "$TRAIN" $args --out ckpt-sealed
		echo "exit $?"
	} >"$OUT/train.txt" 2>&1
	local bare sealed
	# the mean of the "step N ... bytes/s" reports after the first (which includes warming up)
	rate='{ for (i = 2; i <= NF; i++) if ($i == "bytes/s") { v = $(i-1); gsub(",", "", v); n++; if (n == 1) first = v; else { s += v; c++ } } } END { if (c) printf "%.0f", s / c; else if (n) printf "%.0f", first }'
	bare=$(sed -n '/^# bare/,/^# sealed/p' "$OUT/train.txt" | grep '^step ' | awk "$rate")
	sealed=$(sed -n '/^# sealed/,$p' "$OUT/train.txt" | grep '^step ' | awk "$rate")
	note "train bytes/s" "bare ${bare:-?}, sealed ${sealed:-?}$([ -n "$bare" ] && [ -n "$sealed" ] && awk -v b="$bare" -v s="$sealed" 'BEGIN{printf ", bare/sealed %.3fx (target <= 1.02x)", b/s}')"
	note "peak GPU memory" "$(grep peak-gpu-bytes "$OUT/train.txt" | awk '{print $2}' | tr '\n' ' ')"
	[ "$(grep -c '^exit 0$' "$OUT/train.txt")" = 2 ]
}

# inroot_cwd runs a command in the host root from a directory of this machine (the dry run
# binds it into the chroot).
inroot_cwd() {
	local dir=$1
	shift
	if [ "$HOSTROOT" = / ]; then (cd "$dir" && "$@"); return; fi
	# over the root's own /tmp, in the check's mount namespace: nothing is written into the root
	mount --bind "$dir" "$HOSTROOT/tmp" || return 1
	chroot "$HOSTROOT" sh -c 'cd /tmp && exec "$@"' sh "$@"
	local rc=$?
	umount "$HOSTROOT/tmp"
	return $rc
}

s_run() {
	local gpuflag="--gpu $GPU"
	"$SEALRUN" --state-dir "$STATE" demo --seeds 1 --quick --runner-image "$(cat "$P/runner-ref")" $gpuflag --kit "$WORK/kit" --cache-dir "$P/cache" >"$OUT/run.txt" 2>&1
	local rc=$?
	note run "exit $rc: $(grep -E 'graded|failed|invalid' "$OUT/run.txt" | tail -1)"
	local att
	att=$(find "$STATE/runs" -name 'result.att.json' 2>/dev/null | head -1)
	[ -n "$att" ] && cp "$att" "$OUT/result.att.json"
	[ "$rc" = 0 ]
}

case ${1:-} in
pack) shift; pack "$@" ;;
check) shift; SEALRUN=/nonexistent; check "$@" ;;
*) die "usage: gpu-check.sh pack DIR | check [--dry-run] [--python PY] [--gpu NAME] KITDIR OUT" ;;
esac
