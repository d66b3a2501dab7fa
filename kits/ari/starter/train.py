"""Train the starter byte-level model. Run it through the runner:

    runner python3 starter/train.py --size toy --steps 300 --out ckpt

It reads data/train.txt, trains from random initialisation, writes ckpt/model.pt (to resume)
and ckpt/weights.pt (float16, for a bundle) every --save-every steps and at the end
(atomically: a call killed at its limit keeps the last checkpoint), and stops by itself before --max-seconds. --resume continues a checkpoint (same
size). It uses the GPU when there is one, else the CPU.
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import BATCH, SIZES, ByteModel  # noqa: E402


def save(path: str, model: ByteModel, opt, step: int, args) -> None:
    tmp = path + ".tmp"
    torch.save({"config": model.config, "model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                "args": vars(args)}, tmp)
    os.replace(tmp, path)
    # weights.pt: what a bundle needs (config and float16 weights, no optimizer state).
    wpath = os.path.join(os.path.dirname(path), "weights.pt")
    torch.save({"config": model.config, "model": {k: v.half() for k, v in model.state_dict().items()}}, wpath + ".tmp")
    os.replace(wpath + ".tmp", wpath)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="data/train.txt", help="training text (bytes)")
    p.add_argument("--out", default="ckpt", help="checkpoint directory (model.pt)")
    p.add_argument("--size", choices=sorted(SIZES), default="toy")
    p.add_argument("--layers", type=int)
    p.add_argument("--d-model", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--context", type=int, help="bytes of context the model sees (<= 1024)")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, help="sequences per step (default: by --size)")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--save-every", type=int, default=100)
    p.add_argument("--max-seconds", type=float, default=0, help="stop and save before this (0: no limit)")
    p.add_argument("--resume", help="checkpoint to continue (its size is used)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    args = p.parse_args()

    if args.batch is None:
        args.batch = BATCH[args.size]
    torch.manual_seed(args.seed)
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    threads = int(os.environ.get("OMP_NUM_THREADS", "0") or 0)
    if threads > 0:
        torch.set_num_threads(threads)
    data = torch.frombuffer(bytearray(open(args.data, "rb").read()), dtype=torch.uint8).long()

    start_step = 0
    if args.resume:
        ck = torch.load(args.resume, map_location="cpu")
        cfg = ck["config"]
    else:
        cfg = dict(SIZES[args.size])
        for k in ("layers", "d_model", "heads", "context"):
            if getattr(args, k) is not None:
                cfg[k] = getattr(args, k)
    model = ByteModel(**cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    if args.resume:
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        start_step = ck["step"]
    params = sum(p.numel() for p in model.parameters())
    ctx = cfg["context"]
    print(f"train: {params:,} parameters {cfg}, {len(data):,} bytes of text, device {device}, "
          f"steps {start_step}..{start_step + args.steps}", flush=True)

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "model.pt")
    t0 = time.time()
    seen = 0
    model.train()
    step = start_step
    for i in range(args.steps):
        # Cosine decay over this call's steps, after a short warm-up.
        frac = i / max(1, args.steps)
        lr = args.lr * min(1.0, (i + 1) / 20) * 0.5 * (1 + torch.cos(torch.tensor(frac * 3.14159)).item())
        for g in opt.param_groups:
            g["lr"] = lr
        ix = torch.randint(0, len(data) - ctx - 1, (args.batch,))
        x = torch.stack([data[j:j + ctx] for j in ix]).to(device)
        y = torch.stack([data[j + 1:j + ctx + 1] for j in ix]).to(device)
        loss = model.loss(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        seen += args.batch * ctx
        elapsed = time.time() - t0
        if step % 50 == 0 or i == args.steps - 1:
            bpb = loss.item() / 0.6931471805599453
            print(f"step {step} loss {loss.item():.3f} ({bpb:.2f} bits/byte) {seen / elapsed:,.0f} bytes/s", flush=True)
        if step % args.save_every == 0:
            save(path, model, opt, step, args)
        if args.max_seconds and elapsed > args.max_seconds:
            print(f"stopping at step {step}: --max-seconds {args.max_seconds:g} reached", flush=True)
            break
    save(path, model, opt, step, args)
    elapsed = time.time() - t0
    print(f"done: step {step}, {elapsed:.1f}s, {seen / max(elapsed, 1e-9):,.0f} bytes/s; checkpoint {path}", flush=True)


if __name__ == "__main__":
    main()
