#!/usr/bin/env bash
# Sets up, builds and runs phalanxd on the embedded RocksDB (./var/phalanx)
# with the demo fleet, queues and config of deploy/. Extra arguments are
# passed to phalanxd.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
exec build/server/phalanxd \
  --data-dir ./var/phalanx \
  --config deploy/config.json \
  --fleet deploy/fleet.json \
  --queues deploy/queues.json "$@"
