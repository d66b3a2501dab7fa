#!/bin/bash
# Claude Code under sealrun: the controller image's entrypoint. sealrund gives the run's settings in
# SEALRUN_SCAFFOLD_CONFIG (rendered from scaffolds/claude/settings.json) and the model in
# ANTHROPIC_MODEL and its kin; this script gives Claude Code a writable home on the container's
# /tmp, turns off its telemetry, update checks and other traffic, lets its Bash tool run as long
# as the run (the harness cuts compute calls, not the scaffold), and runs one non-interactive
# session (claude -p) in /workspace with the brief on stdin. Its permission prompts are off:
# sealrun is the sandbox.
set -euo pipefail
if [ -z "${SEALRUN_SCAFFOLD_CONFIG:-}" ]; then
	echo "claude entry.sh: SEALRUN_SCAFFOLD_CONFIG is empty: sealrund renders it for every run of a track that pins the claude scaffold" >&2
	exit 2
fi
base=/tmp/claude
export HOME="$base/home" TMPDIR="$base/tmp"
mkdir -p "$HOME/.claude" "$TMPDIR"
printf '%s\n' "$SEALRUN_SCAFFOLD_CONFIG" > "$HOME/.claude/settings.json"
export DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1 DISABLE_BUG_COMMAND=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
export BASH_DEFAULT_TIMEOUT_MS=$((3 * 3600 * 1000)) BASH_MAX_TIMEOUT_MS=$((3 * 3600 * 1000))
export NO_COLOR=1 TERM=dumb
unset HTTP_PROXY HTTPS_PROXY ALL_PROXY NO_PROXY http_proxy https_proxy all_proxy no_proxy
cd /workspace
exec claude -p --dangerously-skip-permissions < "${SEALRUN_BRIEF:-/workspace/BRIEF.md}"
