#!/bin/sh
# airs-digits-data.sh OUT: the raw data directory of the AIRS task DigitsClassificationAccuracy
# (airs/tasks/): scikit-learn's digits.csv.gz, taken from Debian's python3-sklearn package
# (apt-get download: the machine's Debian mirror, no other network) and checked against its pinned
# SHA-256. OUT must not exist; it is written whole or not at all.
set -eu
want=46abec6b12486ad9e51943373abcf22bbea1b5a51a1619b361570d8893f1464a
out=${1:?usage: airs-digits-data.sh OUT (a directory that does not exist yet)}
if [ -e "$out" ]; then
	echo "airs-digits-data.sh: $out already exists; give a new directory" >&2
	exit 1
fi
tmp=$(mktemp -d "${out%/}.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download python3-sklearn >apt.log 2>&1) || {
	cat "$tmp/apt.log" >&2
	echo "airs-digits-data.sh: apt-get download python3-sklearn failed (is a Debian mirror configured? apt-get update)" >&2
	exit 1
}
dpkg-deb --fsys-tarfile "$tmp"/python3-sklearn_*.deb | tar -x -C "$tmp" ./usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz
mkdir "$tmp/raw"
mv "$tmp/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz" "$tmp/raw/digits.csv.gz"
got=$(sha256sum "$tmp/raw/digits.csv.gz" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
	echo "airs-digits-data.sh: digits.csv.gz has sha256 $got; the task pins $want (another python3-sklearn version?)" >&2
	exit 1
fi
chmod 0644 "$tmp/raw/digits.csv.gz"
sync "$tmp/raw/digits.csv.gz"
mv "$tmp/raw" "$out"
echo "$out: digits.csv.gz ($want)"
