#!/usr/bin/env python3
"""Readies the data directory for evaluate.py, after the run: writes test_with_labels/labels.csv
(id, label) into --agent-data-mount-dir and copies the submission (submission.csv) from
--agent-log-dir beside it. Standard library only.

    evaluate_prepare.py --global-shared-data-dir RAW --agent-data-mount-dir DATA --agent-log-dir LOG
"""
import os
import shutil

from utils import parse_args, read_raw, split, write_csv


def main():
    a = parse_args(__doc__)
    _, test = split(read_raw(a.global_shared_data_dir))
    out = a.agent_data_mount_dir
    write_csv(os.path.join(out, "test_with_labels", "labels.csv"), ["id", "label"], [[i, y] for i, (_, y) in enumerate(test)])
    shutil.copyfile(os.path.join(a.agent_log_dir, "submission.csv"), os.path.join(out, "submission.csv"))
    print("prepared: %d test labels and the submission" % len(test))


if __name__ == "__main__":
    main()
