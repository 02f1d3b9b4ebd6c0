// The daemon's start-up files (--config, --fleet, --queues): parsing their
// proto3 JSON text into the API's own messages and applying them to a
// scheduler. Pure functions of their arguments (no file or clock access), so
// server/startup.cc and the fuzz targets of tests/fuzz/ run the same code.
// Thread-compatible: the scheduler is the caller's to guard.
#ifndef PHALANX_PROTO_STARTUP_FILES_H_
#define PHALANX_PROTO_STARTUP_FILES_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/scheduler.h"
#include "phalanx/v1/admin.pb.h"
#include "phalanx/v1/fleet.pb.h"
#include "phalanx/v1/types.pb.h"

namespace phalanx::convert {

// What the start-up files say; an unset member means no such file.
struct StartupFiles {
  std::optional<v1::Config> config;
  std::optional<v1::UpsertNodesRequest> fleet;
  std::optional<v1::ListQueuesResponse> queues;
};

// Parse the proto3 JSON text of each file. InvalidArgument, with the JSON
// parser's message, for text that is not the message's JSON form.
absl::StatusOr<v1::Config> ConfigFromJson(absl::string_view json);
absl::StatusOr<v1::UpsertNodesRequest> FleetFromJson(absl::string_view json);
absl::StatusOr<v1::ListQueuesResponse> QueuesFromJson(absl::string_view json);

// Applies the files to `scheduler` — config first (it names the topology
// levels nodes must carry), then the fleet, then the queues (parents before
// children, in any file order). The files are declarative: they win over
// what the scheduler holds. Stops at the first rejected item; the error
// names the flag and the field ("--fleet: nodes[3].gpu_count: ...").
absl::Status ApplyStartupFiles(core::Scheduler& scheduler,
                               const StartupFiles& files, absl::Time now);

}  // namespace phalanx::convert

#endif  // PHALANX_PROTO_STARTUP_FILES_H_
