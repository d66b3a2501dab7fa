"""The starter bundle's entrypoint: the grader's line protocol (sealrun-bundle/v1) over the
byte model in weights.pt.

generate: greedy, exactly n bytes, each from the last `context` bytes seen.
score:    -sum log2 p(target[i] | prefix + target[:i]), in one forward pass when it fits.

Test it without sealrun (from a bundle directory):
    printf '{"op":"generate","seq":1,"prefix_b64":"YWJjIGFi","n":4}\n' | python3 predict.py
"""
import base64
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import load  # noqa: E402

START = b"\n"  # what an empty prefix is read as


@torch.no_grad()
def generate(model, prefix: bytes, n: int, device: str) -> bytes:
    ctx = bytearray(prefix or START)
    out = bytearray()
    for _ in range(n):
        x = torch.tensor([list(ctx[-model.context:])], dtype=torch.long, device=device)
        b = int(model(x)[0, -1].argmax())
        out.append(b)
        ctx.append(b)
    return bytes(out)


@torch.no_grad()
def score(model, prefix: bytes, target: bytes, device: str) -> float:
    if not target:
        return 0.0
    full = (prefix or START) + target
    bits = 0.0
    # Targets are full[a:b] in chunks of at most `context`; the logits at input position j
    # predict full[j + 1], so chunk [a, b) reads the window full[lo:b - 1].
    a = len(full) - len(target)
    while a < len(full):
        b = min(len(full), a + model.context)
        lo = max(0, b - 1 - model.context)
        x = torch.tensor([list(full[lo:b - 1])], dtype=torch.long, device=device)
        logp = torch.log_softmax(model(x)[0].float(), dim=-1)
        for t in range(a, b):
            bits -= float(logp[t - 1 - lo, full[t]]) / math.log(2)
        a = b
    return bits


def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    threads = int(os.environ.get("OMP_NUM_THREADS", "0") or 0)
    if threads > 0:
        torch.set_num_threads(threads)
    here = os.path.dirname(os.path.abspath(__file__))
    model = load(os.path.join(here, "weights.pt"), device)
    out = sys.stdout
    out.write(json.dumps({"ready": True, "protocol": "sealrun-bundle/v1"}) + "\n")
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        prefix = base64.b64decode(req["prefix_b64"])
        if req["op"] == "generate":
            ans = generate(model, prefix, req["n"], device)
            resp = {"seq": req["seq"], "output_b64": base64.b64encode(ans).decode()}
        else:
            bits = score(model, prefix, base64.b64decode(req["target_b64"]), device)
            resp = {"seq": req["seq"], "bits": bits}
        out.write(json.dumps(resp) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
