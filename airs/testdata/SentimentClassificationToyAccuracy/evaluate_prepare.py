# Readies the data directory for evaluate.py after the run: the labelled test split and the
# agent's submission, as upstream's evaluate_prepare.py scripts do.
import argparse
import os
import shutil
import sys

from datasets import load_from_disk


def main(global_shared_data_dir, agent_data_mount_dir, agent_log_dir):
    dataset = load_from_disk(os.path.join(global_shared_data_dir, "sealrun/toy-sentiment/default"))
    dataset["test"].save_to_disk(os.path.join(agent_data_mount_dir, "test_with_labels"))
    shutil.copy2(os.path.join(agent_log_dir, "submission.csv"), os.path.join(agent_data_mount_dir, "submission.csv"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Prepare the evaluation's data.")
    parser.add_argument("--global-shared-data-dir", required=True)
    parser.add_argument("--agent-data-mount-dir", required=True)
    parser.add_argument("--agent-log-dir", required=False)
    args = parser.parse_args()
    for path in [args.global_shared_data_dir, args.agent_data_mount_dir, args.agent_log_dir]:
        if path is not None and not os.path.isdir(path):
            print(f"Error: Directory not found: {path}", file=sys.stderr)
            sys.exit(1)
    main(args.global_shared_data_dir, args.agent_data_mount_dir, args.agent_log_dir)
