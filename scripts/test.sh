#!/usr/bin/env bash
# Sets up, builds and runs every test (unit and integration) with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 300 "$@"
