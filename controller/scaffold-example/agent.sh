# example: the smallest honest scaffold for a sealed run (controller/SCAFFOLD.md). It asks the
# model once, makes one compute call, submits the bundle it carries, promotes it and finalizes.
# A real scaffold loops: ask the model, run what it says through `runner`, read the result.
set -u
# busybox's tools, on the container's own writable /tmp (the image is read-only).
mkdir -p /tmp/bin && /bin/busybox --install -s /tmp/bin && export PATH="/tmp/bin:$PATH"
echo "example scaffold for $SEALRUN_AGENT; the brief begins: $(head -n 1 "$SEALRUN_BRIEF")"
runner time_left

# The model, through the run's gateway (the only network; the key is injected there).
answer=$(wget -q -O - --header "Content-Type: application/json" \
	--post-data "{\"model\": \"$SEALRUN_MODEL\", \"max_tokens\": $EXAMPLE_PLAN_TOKENS, \"messages\": [{\"role\": \"user\", \"content\": \"Plan the first hour.\"}]}" \
	"$OPENAI_BASE_URL/chat/completions") || echo "the model did not answer (exit $?)"
echo "model: $(echo "$answer" | head -c 200)"

# Compute goes through runner: a fresh runner container (Python and the GPU live there).
runner python3 -c 'print("hello from the runner")'

# A candidate: a bundle directory in the workspace, packed by the host.
cp -r /opt/example/bundle ./bundle
out=$(runner submit bundle) || { echo "$out"; exit 1; }
echo "$out"
id=$(echo "$out" | sed -n 's/^candidate \([0-9a-f]*\) .*/\1/p' | head -n 1)
runner promote "$id"
runner finalize
