#!/usr/bin/env bash
# Sets up the packages, configures (Ninja and ccache when present) and builds
# Phalanx into ./build. Extra arguments are passed to the build tool.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPHALANX_WERROR=ON
fi
cmake --build build -j "$(nproc)" "$@"
