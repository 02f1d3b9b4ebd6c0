#include "proto/startup_files.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "proto/convert.h"

namespace phalanx::convert {
namespace {

template <typename Message>
absl::StatusOr<Message> FromJson(absl::string_view json) {
  Message message;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &message);
  if (!status.ok()) {
    return absl::InvalidArgumentError(status.message().as_string());
  }
  return message;
}

absl::Status InFile(const char* flag, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("--", flag, ": ", status.message()));
}

absl::Status ApplyConfig(core::Scheduler& s, const v1::Config& proto) {
  ASSIGN_OR_RETURN(core::Config config, ConfigFromProto(proto, "config"));
  config.version = s.config().version;
  if (config == s.config()) return absl::OkStatus();
  return s.UpdateConfig(std::move(config), std::nullopt).status();
}

absl::Status ApplyFleet(core::Scheduler& s, const v1::UpsertNodesRequest& fleet,
                        absl::Time now) {
  std::vector<core::Node> nodes;
  for (int i = 0; i < fleet.nodes_size(); ++i) {
    ASSIGN_OR_RETURN(
        core::Node node,
        NodeFromProto(fleet.nodes(i), absl::StrCat("nodes[", i, "]")));
    nodes.push_back(std::move(node));
  }
  return s.UpsertNodes(std::move(nodes), now).status();
}

absl::Status ApplyQueues(core::Scheduler& s,
                         const v1::ListQueuesResponse& queues) {
  std::vector<core::Queue> all;
  for (const v1::Queue& q : queues.queues()) all.push_back(QueueFromProto(q));
  return core::PutQueuesParentsFirst(s, std::move(all));
}

}  // namespace

absl::StatusOr<v1::Config> ConfigFromJson(absl::string_view json) {
  return FromJson<v1::Config>(json);
}

absl::StatusOr<v1::UpsertNodesRequest> FleetFromJson(absl::string_view json) {
  return FromJson<v1::UpsertNodesRequest>(json);
}

absl::StatusOr<v1::ListQueuesResponse> QueuesFromJson(absl::string_view json) {
  return FromJson<v1::ListQueuesResponse>(json);
}

absl::Status ApplyStartupFiles(core::Scheduler& scheduler,
                               const StartupFiles& files, absl::Time now) {
  if (files.config) {
    RETURN_IF_ERROR(InFile("config", ApplyConfig(scheduler, *files.config)));
  }
  if (files.fleet) {
    RETURN_IF_ERROR(InFile("fleet", ApplyFleet(scheduler, *files.fleet, now)));
  }
  if (files.queues) {
    RETURN_IF_ERROR(InFile("queues", ApplyQueues(scheduler, *files.queues)));
  }
  return absl::OkStatus();
}

}  // namespace phalanx::convert
