#include "bench/perf/daemon_files.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "bench/perf/workload.h"
#include "google/protobuf/util/json_util.h"
#include "phalanx/v1/admin.pb.h"
#include "phalanx/v1/fleet.pb.h"
#include "proto/convert.h"

namespace phalanx::perf {
namespace {

absl::Status WriteJson(const google::protobuf::Message& message,
                       const std::string& path) {
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(message, &json).ok()) {
    return absl::InternalError(absl::StrCat("cannot encode ", path));
  }
  std::ofstream out(path);
  out << json;
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> DaemonFiles::Args() const {
  return {"--config=" + config, "--fleet=" + fleet, "--queues=" + queues};
}

absl::StatusOr<DaemonFiles> WriteDaemonFiles(const std::string& dir,
                                             int nodes) {
  return WriteDaemonFiles(dir, nodes, BenchConfig());
}

absl::StatusOr<DaemonFiles> WriteDaemonFiles(const std::string& dir, int nodes,
                                             const core::Config& bench_config) {
  DaemonFiles files{dir + "/config.json", dir + "/fleet.json",
                    dir + "/queues.json"};
  v1::Config config;
  convert::ToProto(bench_config, &config);
  v1::UpsertNodesRequest fleet;
  for (const core::Node& node : MakeFleet(nodes)) {
    convert::ToProto(node, fleet.add_nodes());
  }
  v1::ListQueuesResponse queues;
  for (const core::Queue& queue :
       MakeQueues(static_cast<int64_t>(nodes) * kGpusPerNode)) {
    convert::ToProto(queue, queues.add_queues());
  }
  if (absl::Status s = WriteJson(config, files.config); !s.ok()) return s;
  if (absl::Status s = WriteJson(fleet, files.fleet); !s.ok()) return s;
  if (absl::Status s = WriteJson(queues, files.queues); !s.ok()) return s;
  return files;
}

}  // namespace phalanx::perf
