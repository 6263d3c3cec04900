#!/usr/bin/env bash
# Copy the pending snapshots a matrix run left in golden/ (golden/<target>/*.snap.new and
# bench.yaml.new proposals) into DEST/pending/golden/<target>/, so the job's artifact
# carries them and `cargo xtask bless --from DIR` can accept them after review.
#
# usage: .ci/collect-pending.sh DEST
set -eu
if [ $# -ne 1 ]; then
  echo "usage: $0 DEST" >&2
  exit 2
fi
mkdir -p "$1"
dest=$(cd "$1" && pwd)
cd "$(dirname "$0")/.."
n=0
while IFS= read -r -d '' f; do
  mkdir -p "$dest/pending/$(dirname "$f")"
  cp "$f" "$dest/pending/$f"
  n=$((n + 1))
done < <(find golden -mindepth 2 -maxdepth 2 -type f \( -name '*.snap.new' -o -name 'bench.yaml.new' \) -print0 2>/dev/null)
echo "$n pending snapshot file(s) copied to $dest/pending/golden"
