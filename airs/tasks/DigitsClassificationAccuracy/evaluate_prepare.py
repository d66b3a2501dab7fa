#!/usr/bin/env python3
"""Writes the labelled test data for evaluate.py: data/test_with_labels/labels.csv (id, label).
It goes to a directory only the grader mounts. Standard library only.

    evaluate_prepare.py --raw-dir RAW --out-dir OUT
"""
import argparse
import os

from utils import read_raw, split, write_csv


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--raw-dir", required=True)
    p.add_argument("--out-dir", required=True)
    a = p.parse_args()
    _, test = split(read_raw(a.raw_dir))
    write_csv(os.path.join(a.out_dir, "test_with_labels", "labels.csv"), ["id", "label"], [[i, y] for i, (_, y) in enumerate(test)])
    print("prepared: %d test labels" % len(test))


if __name__ == "__main__":
    main()
