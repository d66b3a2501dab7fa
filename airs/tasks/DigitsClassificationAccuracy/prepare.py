#!/usr/bin/env python3
"""Writes the agent's data: data/train/train.csv (pixels and label) and data/test/test.csv
(pixels only, with an id), from the raw data directory. Standard library only.

    prepare.py --raw-dir RAW --out-dir OUT
"""
import argparse
import os

from utils import COLUMNS, read_raw, split, write_csv


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--raw-dir", required=True)
    p.add_argument("--out-dir", required=True)
    a = p.parse_args()
    train, test = split(read_raw(a.raw_dir))
    write_csv(os.path.join(a.out_dir, "train", "train.csv"), COLUMNS + ["label"], [px + [y] for px, y in train])
    write_csv(os.path.join(a.out_dir, "test", "test.csv"), ["id"] + COLUMNS, [[i] + px for i, (px, _) in enumerate(test)])
    print("prepared: %d train rows, %d test rows (no labels)" % (len(train), len(test)))


if __name__ == "__main__":
    main()
