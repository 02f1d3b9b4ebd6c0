// Start-up of phalanxd: reading the --config, --fleet and --queues files
// (the proto3 JSON form of the API's own messages) and recovering or creating
// the scheduler from the store. Runs before any thread starts.
#ifndef PHALANX_SERVER_STARTUP_H_
#define PHALANX_SERVER_STARTUP_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/scheduler.h"
#include "core/state_store.h"
#include "phalanx/v1/admin.pb.h"
#include "phalanx/v1/fleet.pb.h"
#include "phalanx/v1/types.pb.h"

namespace phalanx::server {

struct StartupFiles {
  std::optional<v1::Config> config;
  std::optional<v1::UpsertNodesRequest> fleet;
  std::optional<v1::ListQueuesResponse> queues;
};

// Reads the files whose paths are non-empty. Errors name the file.
absl::StatusOr<StartupFiles> ReadStartupFiles(const std::string& config_path,
                                              const std::string& fleet_path,
                                              const std::string& queues_path);

// Loads the store into a scheduler (or creates one on an empty store), then
// applies the files — they are declarative: the file wins over what is
// stored — and commits the result. Fails, naming the cause, when recovery
// finds a broken invariant or a file is rejected.
absl::StatusOr<std::unique_ptr<core::Scheduler>> RecoverAndApply(
    core::StateStore& store, const StartupFiles& files, absl::Time now);

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_STARTUP_H_
