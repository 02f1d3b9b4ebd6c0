// Start-up of phalanxd: reading the --config, --fleet and --queues files
// (the proto3 JSON form of the API's own messages; parsed and applied by
// proto/startup_files.h) and recovering or creating the scheduler from the
// store. Runs before any thread starts.
#ifndef PHALANX_SERVER_STARTUP_H_
#define PHALANX_SERVER_STARTUP_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/scheduler.h"
#include "core/state_store.h"
#include "proto/startup_files.h"

namespace phalanx::server {

using StartupFiles = convert::StartupFiles;

// Reads the files whose paths are non-empty. Errors name the file.
absl::StatusOr<StartupFiles> ReadStartupFiles(const std::string& config_path,
                                              const std::string& fleet_path,
                                              const std::string& queues_path);

// Loads the store into a scheduler (or creates one on an empty store), then
// applies the files — they are declarative: the file wins over what is
// stored — and commits the result. Fails, naming the cause, when recovery
// finds a broken invariant or a file is rejected.
// A recovered scheduler and the batch recovery committed (empty when it
// committed none).
struct Recovered {
  std::unique_ptr<core::Scheduler> scheduler;
  core::Mutation committed;
};
// RecoverAndApply, also returning what it committed (a promoted HA replica
// hands it to its watch streams).
absl::StatusOr<Recovered> Recover(core::StateStore& store,
                                  const StartupFiles& files, absl::Time now);

absl::StatusOr<std::unique_ptr<core::Scheduler>> RecoverAndApply(
    core::StateStore& store, const StartupFiles& files, absl::Time now);

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_STARTUP_H_
