#!/usr/bin/env bash
# Fails when docs/environment.md is not what scripts/env_doc.sh writes from `collie-run --help-env --all`,
# i.e. when the table of base/env.cc changed and the reference did not follow.
# $1 = source root, $2 = collie-run.
set -euo pipefail
root=$1
run=$2
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
bash "$root/scripts/env_doc.sh" "$run" "$tmp" >/dev/null
if ! diff -u "$root/docs/environment.md" "$tmp"; then
  echo "FAIL: docs/environment.md is not what collie-run --help-env --all prints (the table in base/env.cc);"
  echo "      regenerate it from the source root: scripts/env_doc.sh $run"
  exit 1
fi
echo "PASS: docs/environment.md matches collie-run --help-env --all"
