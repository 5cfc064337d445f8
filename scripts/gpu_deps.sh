#!/usr/bin/env bash
# Prepares .deps/ (ignored by git) with what the lent GPU machine lacks and
# cannot install (it has no apt and no network): GoogleTest from Debian's
# packages, unpacked into .deps/root. Run here, then carry .deps to the GPU
# machine along with the tree and run tests/gpu/run.sh there.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps/debs .deps/root
cd .deps/debs
apt-get download googletest libgtest-dev >/dev/null
for d in *.deb; do dpkg -x "$d" ../root; done
echo "gpu deps: $(ls ../root/usr/lib/x86_64-linux-gnu/cmake 2>/dev/null | tr '\n' ' ')in .deps/root"
