#!/usr/bin/env bash
# Builds Phalanx with ThreadSanitizer into ./build-thread and runs, under
# it, the suites TSan can judge next to Debian's uninstrumented libraries:
# the locks (sync_test); the server's units, the gate, metrics interceptor
# and watch hub among them, which serve gRPC in process (server_test); the
# in-process daemon, single-node and HA (daemon_test, daemon_ha_test); the
# stores (storage_test, disk_fault_test); the etcd client and the HA store
# (etcd_test); the etcd election (ha_test); and the suites of tests/ that
# drive a TSan-built phalanxd over gRPC (integration_test, security_test,
# startup_files_test, storage_it_test, node_agent_integration_test,
# ha_integration_test, ha_nospace_test, ha_follow_test). Any report fails
# the test that hit it (halt_on_error=1; a report of phalanxd fails the
# test through tests/daemon.h). Extra arguments are passed to ctest.
#
# Left out (tests/README.md, "ThreadSanitizer"): security_test's
# ServerLimitsTest.UnknownMethodsDoNotGrowTheMetrics, whose test client
# gives reports inside gRPC that no rule here may suppress;
# ctl_test, ctl_run_test, disk_full_test and partition_test, not yet run
# under TSan.
#
# Environment: TSAN_BUILD_JOBS (default nproc), TSAN_BUILD_DIR (default
# build-thread).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

build="${TSAN_BUILD_DIR:-build-thread}"
suites=(sync_test server_test daemon_test daemon_ha_test storage_test
  disk_fault_test etcd_test ha_test integration_test security_test
  startup_files_test storage_it_test node_agent_integration_test
  ha_integration_test ha_nospace_test ha_follow_test)
# The suites' binaries run at build time too (test discovery).
# history_size=4 (512K accesses per thread, 4 times the default): enough
# for TSan to restore the earlier access's stack in phalanxd's busy gRPC
# threads, which the `race:` rules of scripts/tsan.supp need to match it.
export TSAN_OPTIONS="${TSAN_OPTIONS:-suppressions=$PWD/scripts/tsan.supp:halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1:history_size=4}"
# A client's callback call with its ClientContext on the stack: see
# tests/README.md, "ThreadSanitizer".
unjudged='^ServerLimitsTest\.UnknownMethodsDoNotGrowTheMetrics$'

if [ ! -f "$build/CMakeCache.txt" ]; then
  generator=()
  if command -v ninja >/dev/null; then generator=(-G Ninja); fi
  # The flags of scripts/test.sh's sanitizer builds: -O1 -g1 keeps line
  # numbers in reports at half the compile time of -O2 -g.
  cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
    -DPHALANX_BENCH=OFF -DPHALANX_SANITIZE=thread
fi
cmake --build "$build" -j "${TSAN_BUILD_JOBS:-$(nproc)}" --target "${suites[@]}"
# Each suite's tests carry its binary's name as a CTest label
# (phalanx_test in CMakeLists.txt).
labels="^($(IFS='|'; echo "${suites[*]}"))\$"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --timeout 600 \
  -L "$labels" -E "$unjudged" "$@"
