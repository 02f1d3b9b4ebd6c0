// config_json_fuzzer, fleet_json_fuzzer, queues_json_fuzzer: the daemon's
// --config, --fleet and --queues files. The input is the file's text,
// parsed and applied exactly as phalanxd does at start
// (proto/startup_files.h), with the base files of tests/fuzz/fixture.h standing
// in for the other two, on a scheduler recovered from an empty store. When the
// daemon would start, its state must read back unchanged through the
// storage encoding, and a restart with the same files must start too.
//
// PHALANX_FUZZ_FILE selects the file: 0 config, 1 fleet, 2 queues.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/check.h"
#include "core/memory_store.h"
#include "proto/startup_files.h"
#include "tests/fuzz/fixture.h"

#ifndef PHALANX_FUZZ_FILE
#error "define PHALANX_FUZZ_FILE (0 config, 1 fleet, 2 queues)"
#endif

namespace phalanx::fuzz {
namespace {

// The member of `files` the fuzzed file replaces.
auto& Fuzzed(convert::StartupFiles& files) {
  if constexpr (PHALANX_FUZZ_FILE == 0) {
    return files.config;
  } else if constexpr (PHALANX_FUZZ_FILE == 1) {
    return files.fleet;
  } else {
    return files.queues;
  }
}

// Parses the fuzzed file as phalanxd does.
auto Parse(absl::string_view json) {
  if constexpr (PHALANX_FUZZ_FILE == 0) {
    return convert::ConfigFromJson(json);
  } else if constexpr (PHALANX_FUZZ_FILE == 1) {
    return convert::FleetFromJson(json);
  } else {
    return convert::QueuesFromJson(json);
  }
}

// As server/startup.cc's RecoverAndApply: restore, apply, commit.
absl::Status Start(core::MemoryStore& store, const convert::StartupFiles& files,
                   absl::Time now) {
  auto loaded = store.LoadAll();
  PHALANX_CHECK(loaded.ok());
  auto scheduler = core::Scheduler::Restore(*std::move(loaded), now);
  if (!scheduler.ok()) {
    std::fprintf(stderr, "restore failed: %s\n",
                 scheduler.status().ToString().c_str());
    std::abort();
  }
  absl::Status status = convert::ApplyStartupFiles(**scheduler, files, now);
  if (!status.ok()) return status;
  const core::Mutation mutation = (*scheduler)->TakeMutation();
  CheckStorageRoundTrip(mutation);
  if (!mutation.empty()) PHALANX_CHECK(store.Commit(mutation).ok());
  return absl::OkStatus();
}

}  // namespace
}  // namespace phalanx::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace phalanx;
  auto parsed =
      fuzz::Parse(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!parsed.ok()) return 0;  // phalanxd exits naming the parse error
  // The base files with the fuzzed one in its place (kept between inputs:
  // copying the base fleet each time would cost more than the input).
  static convert::StartupFiles* files =
      new convert::StartupFiles(fuzz::BaseFiles());
  fuzz::Fuzzed(*files) = *std::move(parsed);
  core::MemoryStore store;
  const absl::Time now = fuzz::StartTime();
  if (!fuzz::Start(store, *files, now).ok()) return 0;
  // A restart with the same files must start again.
  absl::Status again = fuzz::Start(store, *files, now + absl::Minutes(1));
  if (!again.ok()) {
    std::fprintf(stderr, "restart with the same files failed: %s\n",
                 again.ToString().c_str());
    std::abort();
  }
  return 0;
}
