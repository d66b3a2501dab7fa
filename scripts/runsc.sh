#!/usr/bin/env bash
# Installs gVisor's runsc at the release sealrun's suites pass under (sandbox.RunscMinRelease),
# built from gVisor's Go branch through the Go module proxy: Debian's runsc (20221219) is too old
# for sealrun's containers (README, Runtimes). Idempotent: it does nothing when RUNSC_DEST
# (default /usr/local/bin/runsc) is that release or newer.
set -euo pipefail

release=20260905
module=gvisor.dev/gvisor/runsc@v0.0.0-20260905035102-160fafc42237
dest=${RUNSC_DEST:-/usr/local/bin/runsc}
go=${GO:-go}

current=$("$dest" --version 2>/dev/null | sed -n 's/^runsc version release-\([0-9]\{8\}\).*/\1/p' | head -n 1 || true)
if [ -n "$current" ] && [ "$current" -ge "$release" ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "make deps: gVisor's runsc release-$release is not at $dest; building and installing it needs root: sudo make deps (tests that run containers need root too)" >&2
  exit 0
fi
if ! command -v "$go" >/dev/null; then
  echo "make deps: $go not found; runsc is built with Go (the Go this project builds with)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "make deps: building gVisor's runsc release-$release ($module) from the Go module proxy: about a minute, more on the first download"
(
  GOFLAGS= GOBIN="$work" CGO_ENABLED=0 "$go" install -ldflags "-X gvisor.dev/gvisor/runsc/version.version=release-$release.0" "$module" >"$work/log" 2>&1
  echo $? >"$work/rc"
) &
pid=$!
start=$SECONDS
while kill -0 "$pid" 2>/dev/null; do
  sleep 5
  if kill -0 "$pid" 2>/dev/null; then
    echo "make deps: building runsc: $((SECONDS - start)) s, $(du -sm "$(GOFLAGS= "$go" env GOMODCACHE)/gvisor.dev" 2>/dev/null | cut -f1 || echo 0) MiB of gVisor's module downloaded"
  fi
done
wait "$pid" || true
if [ "$(cat "$work/rc" 2>/dev/null)" != 0 ]; then
  echo "make deps: building runsc failed (the Go module proxy must be reachable). Last lines:" >&2
  tail -n 20 "$work/log" >&2
  exit 1
fi
install -m 0755 "$work/runsc" "$dest"
echo "make deps: installed $("$dest" --version | head -n 1) at $dest in $((SECONDS - start)) s"
