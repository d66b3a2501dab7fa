#!/usr/bin/env python3
"""Scores submission.csv against the test labels: Accuracy. Standard library only.

The submission is a CSV with the header `label` and one predicted digit (0-9) per row, in the
order of data/test/test.csv (360 rows). The labels are read from ./data/test_with_labels.
The result is printed as JSON after the line "--- EVALUATION RESULT ---".
"""
import argparse
import csv
import json
import sys


def load_test_labels(path="./data/test_with_labels/labels.csv"):
    with open(path, newline="") as f:
        return [int(row["label"]) for row in csv.DictReader(f)]


def evaluate(predictions, labels):
    correct = sum(1 for p, y in zip(predictions, labels) if p == y)
    return {"Accuracy": correct / len(labels)}


def main():
    p = argparse.ArgumentParser(description="Evaluate predictions for the digits test split using Accuracy.")
    p.add_argument("--submission-file", default="submission.csv", help="Path to the CSV file of predictions.")
    a = p.parse_args()
    labels = load_test_labels()
    print("Loaded %d labels." % len(labels))
    try:
        with open(a.submission_file, newline="") as f:
            rows = list(csv.reader(f))
        if not rows or [c.strip() for c in rows[0]] != ["label"]:
            raise ValueError("the header must be the one column: label")
        preds = []
        for n, row in enumerate(rows[1:], 2):
            if len(row) != 1:
                raise ValueError("line %d: %d columns; want 1" % (n, len(row)))
            preds.append(int(row[0]))
        if len(preds) != len(labels):
            raise ValueError("Submission file row count (%d) does not match test set size (%d)." % (len(preds), len(labels)))
    except FileNotFoundError:
        p.error("Submission file not found: %s" % a.submission_file)
    except Exception as e:  # noqa: BLE001 - any unreadable submission is an invalid one
        p.error("Error loading submission_file: %s" % e)
    result = evaluate(preds, labels)
    print("\n--- EVALUATION RESULT ---")
    print(json.dumps(result, indent=2))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
