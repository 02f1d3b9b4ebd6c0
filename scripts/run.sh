#!/usr/bin/env bash
# Sets up, builds phalanxd and phalanxctl (only those two targets, not the
# tests) and runs phalanxd on the embedded RocksDB (./var/phalanx) with the
# demo fleet, queues and config of deploy/. Extra arguments are passed to
# phalanxd.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh --target phalanxd phalanxctl
exec build/server/phalanxd \
  --data-dir ./var/phalanx \
  --config deploy/config.json \
  --fleet deploy/fleet.json \
  --queues deploy/queues.json "$@"
