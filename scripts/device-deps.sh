#!/usr/bin/env bash
# scripts/device-deps.sh — gathers what scripts/device-check.sh needs on a GPU
# machine that has nvcc, CMake and PyTorch but none of ctnn's Debian packages
# and no network: the header-only dependencies (xtensor, xtl, xsimd, doctest),
# zlib's headers and static library, and the Fashion-MNIST files, copied into
# build/device-deps (ignored by git; about 36 MiB; the device tool carries it).
# Run it here, on the Debian machine where `scripts/quickstart.sh` installed them.
set -euo pipefail
cd "$(dirname "$0")/.."
dst=${1:-build/device-deps}
rm -rf "$dst"
mkdir -p "$dst/include" "$dst/lib" "$dst/fashion-mnist"
for d in xtensor xtl xsimd doctest; do
  [[ -d /usr/include/$d ]] || { echo "device-deps: /usr/include/$d is missing (scripts/quickstart.sh installs it)" >&2; exit 1; }
  cp -r "/usr/include/$d" "$dst/include/"
done
cp /usr/include/zlib.h /usr/include/zconf.h "$dst/include/"
libz=$(find /usr/lib /usr/lib64 -name libz.a 2>/dev/null | head -n1)
[[ -n $libz ]] || { echo "device-deps: libz.a not found (apt-get install zlib1g-dev)" >&2; exit 1; }
cp "$libz" "$dst/lib/"
fm=/usr/share/datasets/fashion-mnist
if [[ -d $fm ]]; then
  cp "$fm"/*.gz "$dst/fashion-mnist/"
else
  echo "device-deps: $fm is missing: the device run will skip the Fashion-MNIST test" >&2
fi
du -sh "$dst"
