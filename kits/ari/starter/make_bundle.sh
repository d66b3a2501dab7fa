#!/bin/sh
# make_bundle.sh CKPT_DIR OUT_DIR: a bundle (grader/PROTOCOL.md) from a checkpoint of train.py.
# Runs in the controller's shell: no Python needed. Submit it with: runner submit OUT_DIR
set -eu
if [ $# -ne 2 ]; then
	echo "usage: sh starter/make_bundle.sh CKPT_DIR OUT_DIR (for example: ckpt bundle)" >&2
	exit 2
fi
ckpt=$1 out=$2
here=$(dirname "$0")
if [ ! -f "$ckpt/weights.pt" ]; then
	echo "make_bundle: $ckpt/weights.pt not found; train first: runner python3 starter/train.py --out $ckpt" >&2
	exit 1
fi
rm -rf "$out"
mkdir -p "$out"
cp "$here/model.py" "$here/predict.py" "$out/"
cp "$ckpt/weights.pt" "$out/weights.pt"
printf '%s\n' '{"protocol": "sealrun-bundle/v1", "entrypoint": ["python3", "predict.py"]}' >"$out/sealrun-bundle.json"
echo "bundle $out: $(du -sk "$out" | cut -f1) KiB; submit it with: runner submit $out"
