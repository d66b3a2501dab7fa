#!/bin/bash
# Qwen Code under sealrun: the controller image's entrypoint. sealrund gives the run's settings in
# SEALRUN_SCAFFOLD_CONFIG (rendered from scaffolds/qwen/settings.json: OpenAI-compatible auth
# against OPENAI_BASE_URL, the model, no usage statistics, telemetry or update checks, no web
# tools) and the model in OPENAI_MODEL; this script gives Qwen Code a writable home on the
# container's /tmp and runs one non-interactive session in /workspace with the brief on stdin,
# every tool call approved (--yolo): sealrun is the sandbox.
set -euo pipefail
if [ -z "${SEALRUN_SCAFFOLD_CONFIG:-}" ]; then
	echo "qwen entry.sh: SEALRUN_SCAFFOLD_CONFIG is empty: sealrund renders it for every run of a track that pins the qwen scaffold" >&2
	exit 2
fi
base=/tmp/qwen
export HOME="$base/home" TMPDIR="$base/tmp"
mkdir -p "$HOME/.qwen" "$TMPDIR"
printf '%s\n' "$SEALRUN_SCAFFOLD_CONFIG" > "$HOME/.qwen/settings.json"
export QWEN_CODE_SUPPRESS_YOLO_WARNING=1 NO_COLOR=1 TERM=dumb
unset HTTP_PROXY HTTPS_PROXY ALL_PROXY NO_PROXY http_proxy https_proxy all_proxy no_proxy
cd /workspace
exec node /opt/qwen-code/cli-entry.js --yolo < "${SEALRUN_BRIEF:-/workspace/BRIEF.md}"
