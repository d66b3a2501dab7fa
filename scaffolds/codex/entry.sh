#!/bin/bash
# Codex CLI under sealrun: the controller image's entrypoint. sealrund gives the run's config in
# SEALRUN_SCAFFOLD_CONFIG (rendered from scaffolds/codex/config.toml); this script gives Codex
# writable homes on the container's /tmp and runs one non-interactive session (codex exec) in
# /workspace with the brief on stdin.
set -euo pipefail
if [ -z "${SEALRUN_SCAFFOLD_CONFIG:-}" ]; then
	echo "codex entry.sh: SEALRUN_SCAFFOLD_CONFIG is empty: sealrund renders it for every run of a track that pins the codex scaffold" >&2
	exit 2
fi
base=/tmp/codex
export HOME="$base/home" CODEX_HOME="$base/codex" TMPDIR="$base/tmp"
mkdir -p "$HOME" "$CODEX_HOME" "$TMPDIR"
printf '%s\n' "$SEALRUN_SCAFFOLD_CONFIG" > "$CODEX_HOME/config.toml"
# The transcript is a log file, not a terminal.
export NO_COLOR=1 TERM=dumb
unset HTTP_PROXY HTTPS_PROXY ALL_PROXY NO_PROXY http_proxy https_proxy all_proxy no_proxy
cd /workspace
exec codex exec --strict-config --skip-git-repo-check --color never - < "${SEALRUN_BRIEF:-/workspace/BRIEF.md}"
