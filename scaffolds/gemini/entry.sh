#!/bin/bash
# Gemini CLI under sealrun: the controller image's entrypoint. sealrund gives the run's settings
# in SEALRUN_SCAFFOLD_CONFIG (rendered from scaffolds/gemini/settings.json: the API-key auth
# against GOOGLE_GEMINI_BASE_URL, the model, no usage statistics, telemetry or update checks, no
# web tools); this script gives Gemini CLI a writable home on the container's /tmp, trusts the
# workspace, and runs one non-interactive session in /workspace with the brief on stdin, every
# tool call approved (--yolo): sealrun is the sandbox.
set -euo pipefail
if [ -z "${SEALRUN_SCAFFOLD_CONFIG:-}" ]; then
	echo "gemini entry.sh: SEALRUN_SCAFFOLD_CONFIG is empty: sealrund renders it for every run of a track that pins the gemini scaffold" >&2
	exit 2
fi
base=/tmp/gemini
export HOME="$base/home" TMPDIR="$base/tmp"
mkdir -p "$HOME/.gemini" "$TMPDIR"
printf '%s\n' "$SEALRUN_SCAFFOLD_CONFIG" > "$HOME/.gemini/settings.json"
export GEMINI_CLI_TRUST_WORKSPACE=true NO_COLOR=1 TERM=dumb
unset HTTP_PROXY HTTPS_PROXY ALL_PROXY NO_PROXY http_proxy https_proxy all_proxy no_proxy
cd /workspace
exec node /opt/gemini-cli/bundle/gemini.js --model "$SEALRUN_MODEL" --yolo < "${SEALRUN_BRIEF:-/workspace/BRIEF.md}"
