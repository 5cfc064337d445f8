#!/usr/bin/env bash
# Prepares .deps/ (ignored by git) with what the lent GPU machine lacks and
# cannot install (it has no apt and no network): GoogleTest and UCX (for GPU
# communicators across fake nodes) from Debian's packages, unpacked into
# .deps/root, UCX's pkg-config files pointed there. Run here, then carry .deps
# to the GPU machine along with the tree and run tests/gpu/run.sh there.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps/debs .deps/root
cd .deps/debs
apt-get download googletest libgtest-dev libucx0 libucx-dev libnuma1 libibverbs1 librdmacm1 >/dev/null
for d in *.deb; do dpkg -x "$d" ../root; done
# The .pc files say prefix=/usr; make them relative to where they lie.
sed -i 's|^prefix = /usr$|prefix = ${pcfiledir}/../../..|' ../root/usr/lib/x86_64-linux-gnu/pkgconfig/ucx*.pc
echo "gpu deps: $(ls ../root/usr/lib/x86_64-linux-gnu/cmake 2>/dev/null | tr '\n' ' ')in .deps/root"
