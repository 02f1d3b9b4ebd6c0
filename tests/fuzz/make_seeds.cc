// make_seeds OUT: writes seed inputs that are made, not written by hand:
// OUT/record_fuzzer/<kind>-<n>, storage records exactly as the store writes
// them (the record fuzzer's kind byte, then the record's bytes), from a short
// scheduler session; and OUT/<file>_json_fuzzer/base.json, the base start-up
// files of fixture.h. Run at build time by seeds.cmake.
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/check.h"
#include "core/scheduler.h"
#include "phalanx/storage/v1/records.pb.h"
#include "phalanx/v1/types.pb.h"
#include "proto/convert.h"
#include "tests/fuzz/fixture.h"

namespace phalanx::fuzz {
namespace {

namespace pb = ::phalanx::v1;
namespace st = ::phalanx::storage::v1;

constexpr int kPerKind = 3;

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  PHALANX_CHECK(out.good());
}

class RecordWriter {
 public:
  explicit RecordWriter(std::string dir) : dir_(std::move(dir)) {}

  // Writes up to kPerKind records of each kind of `m`.
  void Add(const core::Mutation& m) {
    for (const core::GangPtr& gang : m.gangs_put) Put<pb::Gang>(0, *gang);
    for (const core::Node& node : m.nodes_put) Put<pb::Node>(1, node);
    for (const core::Queue& queue : m.queues_put) Put<pb::Queue>(2, queue);
    if (m.config) Put<pb::Config>(3, *m.config);
    for (const core::Event& event : m.events) Put<pb::GangEvent>(4, event);
    for (const core::RequestRecord& r : m.requests_put) {
      Put<st::RequestRecord>(5, r);
    }
    for (const auto& [queue, entry] : m.ledger_put) {
      Put<st::LedgerRecord>(6, entry);
    }
    Put<st::MetaRecord>(7, m.meta);
  }

 private:
  template <typename Record, typename Value>
  void Put(int kind, const Value& value) {
    int& n = written_[kind];
    if (n >= kPerKind) return;
    Record record;
    convert::ToProto(value, &record);
    Write(absl::StrCat(dir_, "/", kind, "-", n++),
          std::string(1, static_cast<char>(kind)) + Bytes(record));
  }

  std::string dir_;
  std::map<int, int> written_;
};

core::GangSpec Spec(const std::string& queue, int pods, int gpus,
                    core::TopologyMode mode, const std::string& level) {
  core::GangSpec spec;
  spec.queue = core::QueueName(queue);
  core::PodSetSpec set;
  set.name = "workers";
  set.count = pods;
  set.gpus = gpus;
  set.topology = {mode, level};
  spec.pod_sets.push_back(set);
  return spec;
}

}  // namespace
}  // namespace phalanx::fuzz

int main(int argc, char** argv) {
  using namespace phalanx;
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds OUT\n");
    return 2;
  }
  const std::string out = argv[1];
  fuzz::Write(out + "/config_json_fuzzer/base.json", fuzz::kBaseConfigJson);
  fuzz::Write(out + "/fleet_json_fuzzer/base.json", fuzz::kBaseFleetJson);
  fuzz::Write(out + "/queues_json_fuzzer/base.json", fuzz::kBaseQueuesJson);

  fuzz::RecordWriter records(out + "/record_fuzzer");
  absl::Time now = fuzz::StartTime();
  std::unique_ptr<core::Scheduler> s = fuzz::BaseScheduler(now);
  records.Add(s->TakeMutation());

  core::GangSpec a =
      fuzz::Spec("llm-pretrain", 4, 8, core::TopologyMode::kRequired, "block");
  a.request_id = "launch-1";
  a.estimated_runtime = absl::Hours(2);
  core::GangSpec b =
      fuzz::Spec("eval", 2, 4, core::TopologyMode::kPreferred, "rack");
  b.pod_sets[0].gpu_models = {"H200"};
  core::GangSpec c =
      fuzz::Spec("solo", 2, 8, core::TopologyMode::kRequired, "rack");
  c.pod_sets[0].slice = {1, "node"};
  for (const core::GangSpec& spec : {a, b, c}) {
    PHALANX_CHECK(s->Submit(spec, now).ok());
  }
  s->RunCycle(now);
  records.Add(s->TakeMutation());

  now += absl::Minutes(5);
  core::GangReport running;
  running.gang_id = core::GangId("g-000001");
  running.state = core::GangState::kRunning;
  running.last_checkpoint_time = now;
  (void)s->Report(running, now);
  (void)s->SetNodeState(core::NodeId("a1"), core::NodeState::kUnhealthy,
                        "xid 79", now);
  (void)s->Cancel(core::GangId("g-000002"), "done", now);
  s->RunCycle(now);
  records.Add(s->TakeMutation());
  return 0;
}
