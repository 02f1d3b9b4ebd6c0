#include "server/startup.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "proto/convert.h"

namespace phalanx::server {
namespace {

template <typename Message>
absl::StatusOr<Message> ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  Message message;
  auto status =
      google::protobuf::util::JsonStringToMessage(text.str(), &message);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", status.message().as_string()));
  }
  return message;
}

absl::Status InFile(const char* flag, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("--", flag, ": ", status.message()));
}

absl::Status ApplyConfig(core::Scheduler& s, const v1::Config& proto) {
  ASSIGN_OR_RETURN(core::Config config,
                   convert::ConfigFromProto(proto, "config"));
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
        convert::NodeFromProto(fleet.nodes(i), absl::StrCat("nodes[", i, "]")));
    nodes.push_back(std::move(node));
  }
  return s.UpsertNodes(std::move(nodes), now).status();
}

// Parents before children: retry the rest until a pass makes no progress.
absl::Status ApplyQueues(core::Scheduler& s,
                         const v1::ListQueuesResponse& queues) {
  std::vector<core::Queue> left;
  for (const v1::Queue& q : queues.queues()) {
    left.push_back(convert::QueueFromProto(q));
  }
  while (!left.empty()) {
    std::vector<core::Queue> retry;
    absl::Status last;
    for (const core::Queue& queue : left) {
      if (s.queues().contains(queue.name) &&
          s.queues().at(queue.name) == queue) {
        continue;
      }
      absl::Status status = s.PutQueue(queue).status();
      if (absl::IsNotFound(status)) {
        retry.push_back(queue);
        last = status;
      } else if (!status.ok()) {
        return absl::Status(status.code(),
                            absl::StrCat("queue \"", queue.name.value(),
                                         "\": ", status.message()));
      }
    }
    if (retry.size() == left.size()) return last;
    left = std::move(retry);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<StartupFiles> ReadStartupFiles(const std::string& config_path,
                                              const std::string& fleet_path,
                                              const std::string& queues_path) {
  StartupFiles files;
  if (!config_path.empty()) {
    ASSIGN_OR_RETURN(files.config, ReadJson<v1::Config>(config_path));
  }
  if (!fleet_path.empty()) {
    ASSIGN_OR_RETURN(files.fleet, ReadJson<v1::UpsertNodesRequest>(fleet_path));
  }
  if (!queues_path.empty()) {
    ASSIGN_OR_RETURN(files.queues,
                     ReadJson<v1::ListQueuesResponse>(queues_path));
  }
  return files;
}

absl::StatusOr<std::unique_ptr<core::Scheduler>> RecoverAndApply(
    core::StateStore& store, const StartupFiles& files, absl::Time now) {
  ASSIGN_OR_RETURN(core::LoadedState state, store.LoadAll());
  ASSIGN_OR_RETURN(std::unique_ptr<core::Scheduler> scheduler,
                   core::Scheduler::Restore(std::move(state), now));
  // Config first (it names the topology levels nodes must carry).
  if (files.config) {
    RETURN_IF_ERROR(InFile("config", ApplyConfig(*scheduler, *files.config)));
  }
  if (files.fleet) {
    RETURN_IF_ERROR(InFile("fleet", ApplyFleet(*scheduler, *files.fleet, now)));
  }
  if (files.queues) {
    RETURN_IF_ERROR(InFile("queues", ApplyQueues(*scheduler, *files.queues)));
  }
  core::Mutation mutation = scheduler->TakeMutation();
  if (!mutation.empty()) RETURN_IF_ERROR(store.Commit(mutation));
  return scheduler;
}

}  // namespace phalanx::server
