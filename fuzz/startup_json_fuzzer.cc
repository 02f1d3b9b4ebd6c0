// config_json_fuzzer, fleet_json_fuzzer, queues_json_fuzzer: the daemon's
// --config, --fleet and --queues files. The input is the file's text,
// parsed and applied exactly as phalanxd does at start
// (proto/startup_files.h), with the base files of fuzz/fixture.h standing in
// for the other two, on a scheduler recovered from an empty store. When the
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
#include "fuzz/fixture.h"
#include "proto/startup_files.h"

#ifndef PHALANX_FUZZ_FILE
#error "define PHALANX_FUZZ_FILE (0 config, 1 fleet, 2 queues)"
#endif

namespace phalanx::fuzz {
namespace {

// The base files, with the fuzzed one parsed from `json`; nullopt when
// `json` does not parse (the daemon exits with the parser's message).
std::optional<convert::StartupFiles> Files(absl::string_view json) {
  convert::StartupFiles files;
  files.config = *convert::ConfigFromJson(kBaseConfigJson);
  files.fleet = *convert::FleetFromJson(kBaseFleetJson);
  files.queues = *convert::QueuesFromJson(kBaseQueuesJson);
  if constexpr (PHALANX_FUZZ_FILE == 0) {
    auto config = convert::ConfigFromJson(json);
    if (!config.ok()) return std::nullopt;
    files.config = *std::move(config);
  } else if constexpr (PHALANX_FUZZ_FILE == 1) {
    auto fleet = convert::FleetFromJson(json);
    if (!fleet.ok()) return std::nullopt;
    files.fleet = *std::move(fleet);
  } else {
    auto queues = convert::QueuesFromJson(json);
    if (!queues.ok()) return std::nullopt;
    files.queues = *std::move(queues);
  }
  return files;
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
  auto files =
      fuzz::Files(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!files) return 0;
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
