#include "tests/fuzz/fixture.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/check.h"
#include "google/protobuf/stubs/logging.h"
#include "phalanx/storage/v1/records.pb.h"
#include "phalanx/v1/types.pb.h"
#include "proto/convert.h"
#include "proto/log_convert.h"
#include "proto/startup_files.h"

namespace phalanx::fuzz {
namespace {

void Die(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "fuzz fixture: %s: %s\n", what,
               status.ToString().c_str());
  std::abort();
}

}  // namespace

std::string Bytes(const google::protobuf::Message& message) {
  return convert::DeterministicBytes(message);
}

const char kBaseConfigJson[] = R"({
 "topologyLevels": ["block", "rack"],
 "cycleInterval": "1s",
 "preemption": {"enabled": true, "gracePeriod": "30s"},
 "reservation": {"depth": 2},
 "lifecycle": {"startTimeout": "600s"},
 "node": {"heartbeatTimeout": "120s", "startupGrace": "60s"}
})";

const char kBaseFleetJson[] = R"({"nodes": [
 {"id": "a1", "gpuModel": "H100", "gpuCount": 8, "labels": {"block": "b1", "rack": "r1"}},
 {"id": "a2", "gpuModel": "H100", "gpuCount": 8, "labels": {"block": "b1", "rack": "r1"}},
 {"id": "a3", "gpuModel": "H100", "gpuCount": 8, "labels": {"block": "b1", "rack": "r2"}},
 {"id": "a4", "gpuModel": "H100", "gpuCount": 8, "labels": {"block": "b1", "rack": "r2"}},
 {"id": "b1", "gpuModel": "H100", "gpuCount": 8, "labels": {"block": "b2", "rack": "r3"}},
 {"id": "b2", "gpuModel": "H100", "gpuCount": 8, "labels": {"block": "b2", "rack": "r3"}},
 {"id": "b3", "gpuModel": "H100", "gpuCount": 8, "labels": {"block": "b2", "rack": "r4"}},
 {"id": "b4", "gpuModel": "H100", "gpuCount": 8, "labels": {"block": "b2", "rack": "r4"}},
 {"id": "c1", "gpuModel": "H200", "gpuCount": 8, "cpuMillis": "64000", "memoryBytes": "1000000000", "labels": {"block": "b3", "rack": "r5"}},
 {"id": "c2", "gpuModel": "H200", "gpuCount": 8, "labels": {"block": "b3", "rack": "r5"}},
 {"id": "c3", "gpuModel": "H200", "gpuCount": 4, "labels": {"block": "b3", "rack": "r6"}},
 {"id": "c4", "gpuModel": "H200", "gpuCount": 4, "labels": {"block": "b3", "rack": "r6"}}
]})";

const char kBaseQueuesJson[] = R"({"queues": [
 {"name": "llm-pretrain", "parent": "research", "weight": 3,
  "nominalGpus": {"H100": 32, "H200": 8}, "borrowingLimitGpus": "-1", "lendingLimitGpus": "16"},
 {"name": "research", "weight": 1},
 {"name": "eval", "parent": "research", "weight": 1,
  "nominalGpus": {"H100": 16, "H200": 16}, "borrowingLimitGpus": "8", "lendingLimitGpus": "-1"},
 {"name": "solo", "weight": 2, "nominalGpus": {"H100": 16}}
]})";

absl::Time StartTime() { return absl::FromUnixSeconds(1'700'000'000); }

const convert::StartupFiles& BaseFiles() {
  static const convert::StartupFiles* files = [] {
    auto* files = new convert::StartupFiles;
    auto config = convert::ConfigFromJson(kBaseConfigJson);
    if (!config.ok()) Die("config", config.status());
    auto fleet = convert::FleetFromJson(kBaseFleetJson);
    if (!fleet.ok()) Die("fleet", fleet.status());
    auto queues = convert::QueuesFromJson(kBaseQueuesJson);
    if (!queues.ok()) Die("queues", queues.status());
    files->config = *std::move(config);
    files->fleet = *std::move(fleet);
    files->queues = *std::move(queues);
    return files;
  }();
  return *files;
}

std::unique_ptr<core::Scheduler> BaseScheduler(absl::Time now) {
  auto scheduler = core::Scheduler::Restore(core::LoadedState(), now);
  if (!scheduler.ok()) Die("restore", scheduler.status());
  if (absl::Status s =
          convert::ApplyStartupFiles(**scheduler, BaseFiles(), now);
      !s.ok()) {
    Die("apply", s);
  }
  return *std::move(scheduler);
}

void CheckStorageRoundTrip(const core::Mutation& m) {
  namespace pb = ::phalanx::v1;
  namespace st = ::phalanx::storage::v1;
  for (const core::GangPtr& gang : m.gangs_put) {
    RoundTrip<true, pb::Gang>("gang", *gang, [](const pb::Gang& g) {
      return convert::GangFromProto(g);
    });
  }
  for (const core::Node& node : m.nodes_put) {
    RoundTrip<true, pb::Node>("node", node, [](const pb::Node& n) {
      return convert::NodeFromProto(n, "node");
    });
  }
  for (const core::Queue& queue : m.queues_put) {
    RoundTrip<true, pb::Queue>("queue", queue, [](const pb::Queue& q) {
      return Ok(convert::QueueFromProto(q));
    });
  }
  if (m.config) {
    RoundTrip<true, pb::Config>("config", *m.config, [](const pb::Config& c) {
      return convert::ConfigFromProto(c, "config");
    });
  }
  for (const core::RequestRecord& request : m.requests_put) {
    RoundTrip<true, st::RequestRecord>(
        "request", request, [&](const st::RequestRecord& r) {
          return Ok(
              convert::RequestFromProto(r, request.queue, request.request_id));
        });
  }
  for (const auto& [queue, entry] : m.ledger_put) {
    RoundTrip<true, st::LedgerRecord>("ledger", entry,
                                      [](const st::LedgerRecord& l) {
                                        return Ok(convert::LedgerFromProto(l));
                                      });
  }
  for (const core::Event& event : m.events) {
    RoundTrip<true, pb::GangEvent>("event", event, [](const pb::GangEvent& e) {
      return convert::EventFromProto(e);
    });
  }
  RoundTrip<true, st::MetaRecord>("meta", m.meta, [](const st::MetaRecord& r) {
    return Ok(convert::MetaFromProto(r));
  });
}

}  // namespace phalanx::fuzz

// libFuzzer calls this once before the first input: protobuf's log of every
// invalid UTF-8 string it parses would cost more than the input itself.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}
