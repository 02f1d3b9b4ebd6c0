#!/usr/bin/env bash
# Sets up, builds and runs every test (unit and integration) with CTest.
#
# In CI (CI=true), or with PHALANX_SANITIZE=address,undefined, the build is
# the AddressSanitizer + UndefinedBehaviorSanitizer variant in ./build-asan
# (clang) instead of the plain one in ./build, every test runs under it,
# and in CI each libFuzzer target of tests/fuzz/ then runs for 30 s
# (scripts/fuzz.sh, one a core at a time); CI
# installs python3-torch for the launcher's torch.distributed test.
# PHALANX_SANITIZE=thread builds everything with ThreadSanitizer in
# ./build-thread and runs every test under it; the suites that serve gRPC
# report races inside Debian's uninstrumented gRPC there (tests/README.md),
# so scripts/tsan.sh builds and runs only those TSan can judge.
# Extra arguments are passed to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize="${PHALANX_SANITIZE:-}"
if [ "${CI:-}" = true ] && [ -z "$sanitize" ]; then sanitize=address,undefined; fi
# CI also runs the launcher's torch.distributed test (scripts/setup.sh).
if [ "${CI:-}" = true ]; then export PHALANX_WITH_TORCH="${PHALANX_WITH_TORCH:-1}"; fi

if [ -z "$sanitize" ]; then
  scripts/build.sh
  ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 300 "$@"
  exit 0
fi

scripts/setup.sh
build="build-${sanitize//,/-}"
[ "$sanitize" = address,undefined ] && build=build-asan
# The test binaries run at build time too (test discovery), so the options
# are set before the build. Leaks inside Debian's uninstrumented gRPC and
# protobuf are suppressed in scripts/lsan.supp, each with its reason.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$PWD/scripts/lsan.supp:print_suppressions=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# ThreadSanitizer (PHALANX_SANITIZE=thread, ./build-thread): a report fails
# the test that hit it. scripts/tsan.supp suppresses reports inside Debian's
# uninstrumented libraries only, each with its reason; scripts/tsan.sh runs
# the threaded suites alone.
export TSAN_OPTIONS="${TSAN_OPTIONS:-suppressions=$PWD/scripts/tsan.supp:halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1:history_size=4}"
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
# ASan + UBSan builds with clang: with the sanitizers it compiles this code
# in about 0.6x (test code, -O0) to 0.8x (libraries, -O1) of GCC's time.
compiler=()
if [ "$sanitize" = address,undefined ]; then
  compiler=(-DCMAKE_CXX_COMPILER=clang++)
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  # -O1 -g1: half the compile time of -O2 -g, line numbers kept in reports.
  cmake -S . -B "$build" "${generator[@]}" "${compiler[@]}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
    -DPHALANX_BENCH=OFF -DPHALANX_SANITIZE="$sanitize"
fi
cmake --build "$build" -j "$(nproc)"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --timeout 600 "$@"
if [ "${CI:-}" = true ]; then
  # A fixed seed: a crash CI finds is one the next run reproduces. Each
  # target is one process on one core, so two run at a time on two cores
  # with the same 30 s each.
  FUZZ_SEED=1 FUZZ_JOBS="${FUZZ_JOBS:-$(nproc)}" scripts/fuzz.sh 30
fi
