#!/usr/bin/env python3
"""Writes the agent's data: train/train.csv (pixels and label) and test/test.csv (pixels only,
with an id) into --agent-data-mount-dir, from the raw data in --global-shared-data-dir.
Standard library only.

    prepare.py --global-shared-data-dir RAW --agent-data-mount-dir DATA [--agent-log-dir LOG]
"""
import os

from utils import COLUMNS, parse_args, read_raw, split, write_csv


def main():
    a = parse_args(__doc__)
    train, test = split(read_raw(a.global_shared_data_dir))
    out = a.agent_data_mount_dir
    write_csv(os.path.join(out, "train", "train.csv"), COLUMNS + ["label"], [px + [y] for px, y in train])
    write_csv(os.path.join(out, "test", "test.csv"), ["id"] + COLUMNS, [[i] + px for i, (px, _) in enumerate(test)])
    print("prepared: %d train rows, %d test rows (no labels)" % (len(train), len(test)))


if __name__ == "__main__":
    main()
