import argparse
import csv
import json

from datasets import load_from_disk

from utils import accuracy


def load_test_labels(path="./data/test_with_labels"):
    ds = load_from_disk(path)
    if "label" not in ds.features:
        raise RuntimeError("Test data does not contain 'label'. Use a labeled copy like './data/test_with_labels'.")
    return list(ds["label"])


def _cli():
    p = argparse.ArgumentParser(description="Evaluate predictions for the toy sentiment test split using Accuracy.")
    p.add_argument("--submission-file", default="submission.csv")
    a = p.parse_args()
    labels = load_test_labels()
    print(f"Loaded {len(labels)} labels.")
    try:
        with open(a.submission_file, newline="") as f:
            rows = list(csv.reader(f))
        if not rows or rows[0] != ["label"]:
            raise ValueError("the header must be: label")
        preds = [r[0] for r in rows[1:]]
        if len(preds) != len(labels):
            raise ValueError(f"Submission file row count ({len(preds)}) does not match test set size ({len(labels)}).")
    except FileNotFoundError:
        p.error(f"Submission file not found: {a.submission_file}")
    except Exception as e:
        p.error(f"Error loading submission_file: {e}")
    print("\n--- EVALUATION RESULT ---")
    print(json.dumps({"Accuracy": accuracy(preds, labels)}, indent=2))


if __name__ == "__main__":
    _cli()
