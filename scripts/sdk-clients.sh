#!/bin/sh
# sdk-clients.sh OUT: the official OpenAI, Anthropic and Google SDKs (npm's openai, @anthropic-ai/sdk and @google/genai)
# and asciinema's web player (asciinema-player), the versions and integrity hashes
# transcript/testdata/sdk/package-lock.json pins, installed with npm ci into OUT/node_modules for
# transcript's tests, which drive the SDKs through sealrun's gateway (transcript/testdata/sdk/drive.js)
# and play a human run's recording in the player beside the page's own. Node.js comes from the machine, or from Debian
# (nodejs, npm) when it has none. Nothing is done when OUT holds this lock file's install; OUT is
# written whole or not at all.
set -eu
out=${1:?usage: sdk-clients.sh OUT}
src=$(cd "$(dirname "$0")/../transcript/testdata/sdk" && pwd)
if [ -f "$out/package-lock.json" ] && cmp -s "$src/package-lock.json" "$out/package-lock.json" && [ -d "$out/node_modules/openai" ]; then
	exit 0
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	echo "sdk-clients.sh: installing Debian's nodejs and npm (for the SDK tests)"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null || {
		echo "sdk-clients.sh: apt-get install nodejs npm failed; install Node.js 18 or newer" >&2
		exit 1
	}
fi
tmp=$(mktemp -d "${out%/}.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$src/package.json" "$src/package-lock.json" "$tmp/"
echo "sdk-clients.sh: npm ci of openai, @anthropic-ai/sdk, @google/genai and asciinema-player into $out (the lock file's versions and hashes)"
(cd "$tmp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >npm.log 2>&1) || {
	cat "$tmp/npm.log" >&2
	echo "sdk-clients.sh: npm ci failed (is the npm registry reachable? npm config get registry)" >&2
	exit 1
}
rm -f "$tmp/npm.log"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
