"""The starter model: a small decoder-only transformer over bytes (vocabulary 256).

Standard PyTorch only (1.13 or later). train.py trains it; predict.py serves it to the grader.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# Named sizes for train.py --size. toy trains on one CPU core in about a minute; full wants a GPU.
SIZES = {
    "toy": dict(layers=2, d_model=64, heads=2, context=128),
    "small": dict(layers=4, d_model=128, heads=4, context=256),
    "full": dict(layers=8, d_model=384, heads=6, context=1024),
}
# Batch (sequences per step) train.py uses for each size unless --batch is given.
BATCH = {"toy": 16, "small": 32, "full": 64}


class Block(nn.Module):
    def __init__(self, d_model: int, heads: int, context: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))
        mask = torch.tril(torch.ones(context, context, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, context, context), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = att.masked_fill(~self.mask[:, :, :t, :t], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


class ByteModel(nn.Module):
    def __init__(self, layers: int, d_model: int, heads: int, context: int):
        super().__init__()
        self.config = dict(layers=layers, d_model=d_model, heads=heads, context=context)
        self.context = context
        self.tok = nn.Embedding(256, d_model)
        self.pos = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, context) for _ in range(layers))
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, 256, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits (batch, time, 256) for byte ids idx (batch, time), time <= context."""
        t = idx.size(1)
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))

    def loss(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self(idx)
        return F.cross_entropy(logits.reshape(-1, 256), targets.reshape(-1))


def load(path: str, device: str = "cpu") -> ByteModel:
    """A model from a checkpoint written by train.py (or weights.pt of a bundle)."""
    ck = torch.load(path, map_location=device)
    m = ByteModel(**ck["config"])
    m.load_state_dict({k: v.float() for k, v in ck["model"].items()})
    return m.to(device).eval()
