#!/usr/bin/env bash
# Builds Phalanx with ThreadSanitizer into ./build-thread and runs, under
# it, the suites TSan can judge next to Debian's uninstrumented libraries:
# the locks (sync_test); the test's child processes (child_process_test);
# the server's units, the gate, metrics interceptor and watch hub among
# them, which serve gRPC in process (server_test); the in-process daemon,
# single-node and HA (daemon_test, daemon_ha_test); the stores
# (storage_test, disk_fault_test); the etcd client and the HA store
# (etcd_test); the etcd election (ha_test); a full and a slow disk under the
# in-process daemon (disk_full_test); and the suites of tests/ that drive a
# TSan-built phalanxd, and phalanxctl, over gRPC (integration_test,
# security_test, startup_files_test, storage_it_test,
# node_agent_integration_test, ha_integration_test, ha_nospace_test,
# ha_follow_test, ctl_test, ctl_run_test), network partitions among them
# (partition_test, CTest label `partition`, run alone; it skips, saying why,
# where network namespaces cannot be made). Any report fails the test that
# hit it (halt_on_error=1; a report of phalanxd or phalanxctl fails the test
# through tests/daemon.h). Extra arguments are passed to ctest.
#
# Left out (tests/README.md, "ThreadSanitizer"): security_test's
# ServerLimitsTest.StalledWatchStreamsOverALargeHistoryStayBounded, where
# TSan reports gRPC's own finish tag without the stack of its earlier write,
# so the scripts/tsan.supp rule for that write cannot match it.
#
# Environment: TSAN_BUILD_JOBS (default nproc), TSAN_BUILD_DIR (default
# build-thread).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

build="${TSAN_BUILD_DIR:-build-thread}"
suites=(sync_test child_process_test server_test daemon_test daemon_ha_test
  storage_test disk_fault_test etcd_test ha_test disk_full_test
  integration_test security_test startup_files_test storage_it_test
  node_agent_integration_test ha_integration_test ha_nospace_test
  ha_follow_test ctl_test ctl_run_test partition_test)
# The suites' binaries run at build time too (test discovery).
# history_size=4 (512K accesses per thread, 4 times the default): enough
# for TSan to restore the earlier access's stack in phalanxd's busy gRPC
# threads, which the `race:` rules of scripts/tsan.supp need to match it.
export TSAN_OPTIONS="${TSAN_OPTIONS:-suppressions=$PWD/scripts/tsan.supp:halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1:history_size=4}"
# gRPC's finish tag reported without its write's stack: see
# tests/README.md, "ThreadSanitizer".
unjudged='^ServerLimitsTest\.StalledWatchStreamsOverALargeHistoryStayBounded$'

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
# (phalanx_test in CMakeLists.txt); partition_test's carry `partition`
# (tests/CMakeLists.txt) and run alone (RUN_SERIAL).
labels="^($(IFS='|'; echo "${suites[*]}")|partition)\$"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --timeout 600 \
  -L "$labels" -E "$unjudged" "$@"
