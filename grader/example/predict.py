#!/usr/bin/env python3
"""A minimal sealrun bundle (grader/PROTOCOL.md): a copy model with no weights.

generate: continue the prefix greedily, one byte at a time, with the byte that followed the
longest earlier repeat of the prefix's tail (a space when nothing repeats).
score: bits of the target under a bigram model of the prefix with add-one smoothing.

Standard library only. Test it without sealrun:
    printf '{"op":"generate","seq":1,"prefix_b64":"YWJjIGFi","n":1}\n' | python3 predict.py
"""
import base64
import json
import math
import sys


def next_byte(ctx: bytes) -> int:
    for k in range(min(32, len(ctx) - 1), 0, -1):
        tail = ctx[-k:]
        pos = ctx.rfind(tail, 0, len(ctx) - 1)
        if pos >= 0 and pos + k < len(ctx):
            return ctx[pos + k]
    return 0x20


def generate(prefix: bytes, n: int) -> bytes:
    ctx = bytearray(prefix)
    out = bytearray()
    for _ in range(n):
        b = next_byte(bytes(ctx))
        out.append(b)
        ctx.append(b)
    return bytes(out)


def score(prefix: bytes, target: bytes) -> float:
    counts = {}
    totals = {}
    ctx = bytearray(prefix)
    bits = 0.0
    for i in range(1, len(ctx)):
        a, b = ctx[i - 1], ctx[i]
        counts[(a, b)] = counts.get((a, b), 0) + 1
        totals[a] = totals.get(a, 0) + 1
    for b in target:
        a = ctx[-1] if ctx else 0x20
        p = (counts.get((a, b), 0) + 1) / (totals.get(a, 0) + 256)
        bits -= math.log2(p)
        counts[(a, b)] = counts.get((a, b), 0) + 1
        totals[a] = totals.get(a, 0) + 1
        ctx.append(b)
    return bits


def main() -> None:
    out = sys.stdout
    out.write(json.dumps({"ready": True, "protocol": "sealrun-bundle/v1"}) + "\n")
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        prefix = base64.b64decode(req["prefix_b64"])
        if req["op"] == "generate":
            ans = generate(prefix, req["n"])
            resp = {"seq": req["seq"], "output_b64": base64.b64encode(ans).decode()}
        else:
            bits = score(prefix, base64.b64decode(req["target_b64"]))
            resp = {"seq": req["seq"], "bits": bits}
        out.write(json.dumps(resp) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
