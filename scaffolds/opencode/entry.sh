#!/bin/bash
# opencode under sealrun: the controller image's entrypoint. sealrund gives the run's opencode
# config in OPENCODE_CONFIG_CONTENT (rendered from scaffolds/opencode/opencode.json, whose SHA-256 is
# the track's [scaffold] config_sha256); this script gives opencode writable homes on the
# container's /tmp, turns off everything that would fetch from the internet, and runs one
# non-interactive session in /workspace with the brief on stdin.
set -euo pipefail
if [ -z "${OPENCODE_CONFIG_CONTENT:-}" ]; then
	echo "opencode.sh: OPENCODE_CONFIG_CONTENT is empty: sealrund renders it for every run of a track that pins the opencode scaffold" >&2
	exit 2
fi
base=/tmp/opencode
export HOME="$base/home" TMPDIR="$base/tmp"
export XDG_CONFIG_HOME="$HOME/.config" XDG_DATA_HOME="$HOME/.local/share" XDG_STATE_HOME="$HOME/.local/state" XDG_CACHE_HOME="$HOME/.cache"
mkdir -p "$TMPDIR" "$XDG_DATA_HOME" "$XDG_STATE_HOME" "$XDG_CACHE_HOME" "$XDG_CONFIG_HOME/opencode/node_modules"
# opencode writes a .gitignore into its config dir and tries to npm-install its plugin package
# into any config dir without node_modules: both are there already.
: > "$XDG_CONFIG_HOME/opencode/.gitignore"
echo '{"lockfileVersion": 3, "packages": {}}' > "$XDG_CONFIG_HOME/opencode/package-lock.json"
export OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_SHARE=1 \
	OPENCODE_DISABLE_LSP_DOWNLOAD=1 OPENCODE_DISABLE_DEFAULT_PLUGINS=1 OPENCODE_DISABLE_PROJECT_CONFIG=1 \
	OPENCODE_DISABLE_EXTERNAL_SKILLS=1 OPENCODE_DISABLE_CLAUDE_CODE=1
# Its shell tool must never cut a compute call before the harness does (20 minutes on ari-v1):
# the tool's limit is the whole run's.
export OPENCODE_EXPERIMENTAL_BASH_DEFAULT_TIMEOUT_MS=$((3 * 3600 * 1000))
# The transcript is a log file, not a terminal.
export NO_COLOR=1 TERM=dumb
unset HTTP_PROXY HTTPS_PROXY ALL_PROXY NO_PROXY http_proxy https_proxy all_proxy no_proxy
cd /workspace
exec opencode run --pure --title "sealrun ${SEALRUN_RUN_ID:-run}" < "${SEALRUN_BRIEF:-/workspace/BRIEF.md}"
