"""Shared by prepare.py, evaluate_prepare.py and evaluate.py: their arguments, reading the raw
digits data and the split. Standard library only."""
import argparse
import csv
import gzip
import os
import sys

COLUMNS = ["p%d" % i for i in range(64)]
RAW_FILE = "digits.csv.gz"  # scikit-learn's copy of the UCI data: 64 pixel counts (0-16), then the digit


def read_raw(raw_dir):
    """Returns the rows as (pixels, label): pixels a list of 64 ints, label an int 0-9."""
    rows = []
    with gzip.open(os.path.join(raw_dir, RAW_FILE), "rt") as f:
        for n, line in enumerate(csv.reader(f), 1):
            if len(line) != 65:
                raise SystemExit("%s line %d: %d values; want 64 pixels and a label" % (RAW_FILE, n, len(line)))
            values = [int(float(v)) for v in line]
            rows.append((values[:64], values[64]))
    if len(rows) != 1797:
        raise SystemExit("%s: %d rows; the digits data has 1797" % (RAW_FILE, len(rows)))
    return rows


def split(rows):
    """Every fifth row (0, 5, 10, ...) is test: 360 rows; the other 1437 are train."""
    train = [r for i, r in enumerate(rows) if i % 5 != 0]
    test = [r for i, r in enumerate(rows) if i % 5 == 0]
    return train, test


def write_csv(path, header, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def parse_args(doc):
    """The three directory arguments of upstream's harness (airs-bench's prepare scripts)."""
    p = argparse.ArgumentParser(description=doc)
    p.add_argument("--global-shared-data-dir", required=True, help="the raw data directory (read-only)")
    p.add_argument("--agent-data-mount-dir", required=True, help="the data directory this script fills")
    p.add_argument("--agent-log-dir", required=False, help="the agent's log directory (its submission, after the run)")
    a = p.parse_args()
    for d in (a.global_shared_data_dir, a.agent_data_mount_dir, a.agent_log_dir):
        if d is not None and not os.path.isdir(d):
            print("Error: Directory not found: %s" % d, file=sys.stderr)
            sys.exit(1)
    return a
