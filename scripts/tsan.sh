#!/usr/bin/env bash
# Builds the threaded parts of Phalanx that ThreadSanitizer can judge with
# Debian's uninstrumented libraries into ./build-thread, and runs their
# suites under it: the locks (sync_test); the server's units without a gRPC
# server in the test (the scheduler loop and its reply thread, the audit log,
# auth, the gang snapshot: server_test); the stores (storage_test,
# disk_fault_test); the etcd client and the HA store on a real etcd
# (etcd_test); the etcd election (ha_test). Any report fails the test that
# hit it (halt_on_error=1). Extra arguments are passed to ctest.
#
# Left out, because Debian's gRPC makes TSan report races inside gRPC's own
# code there (tests/README.md, "ThreadSanitizer"): every test that serves
# gRPC in process or runs phalanxd (daemon_test, daemon_ha_test, the gate's,
# metrics interceptor's and watch hub's tests in server_test, tests/).
#
# Environment: TSAN_BUILD_JOBS (default nproc), TSAN_BUILD_DIR (default
# build-thread).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

build="${TSAN_BUILD_DIR:-build-thread}"
suites=(sync_test server_test storage_test disk_fault_test etcd_test ha_test)
# The tests of server_test that serve gRPC in process.
serving='^(GateAdmitTest|WatchHubTest|MetricsTest\.TheInterceptor)'
# The suites' binaries run at build time too (test discovery).
export TSAN_OPTIONS="${TSAN_OPTIONS:-suppressions=$PWD/scripts/tsan.supp:halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1}"
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
  -L "$labels" -E "$serving" "$@"
