#include "bench/perf/workload.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/validate.h"

namespace phalanx::perf {

std::vector<core::Node> MakeFleet(int count) {
  std::vector<core::Node> nodes;
  nodes.reserve(count);
  for (int i = 0; i < count; ++i) {
    const int rack = i / kNodesPerRack;
    const int block = rack / kRacksPerBlock;
    core::Node node;
    node.spec.id = core::NodeId(absl::StrFormat("n-%05d", i));
    node.spec.gpu_model = kGpuModel;
    node.spec.gpu_count = kGpusPerNode;
    node.spec.labels = {
        {"block", absl::StrFormat("b%d", block)},
        {"rack", absl::StrFormat("b%d-r%d", block, rack % kRacksPerBlock)}};
    nodes.push_back(std::move(node));
  }
  return nodes;
}

std::vector<core::Queue> MakeQueues(int64_t total_gpus) {
  std::vector<core::Queue> queues;
  core::Queue cohort;
  cohort.name = core::QueueName("org");
  queues.push_back(cohort);
  for (int i = 0; i < kTeams; ++i) {
    core::Queue queue;
    queue.name = core::QueueName(absl::StrFormat("team-%d", i));
    queue.parent = cohort.name;
    queue.nominal_gpus[kGpuModel] = total_gpus / kTeams;
    queues.push_back(std::move(queue));
  }
  return queues;
}

const std::vector<Shape>& ShapeMix() {
  using core::TopologyMode;
  static const auto* mix = new std::vector<Shape>{
      {"1x1", 1, 1, TopologyMode::kUnconstrained, "", 30},
      {"1x4", 1, 4, TopologyMode::kUnconstrained, "", 15},
      {"1x8", 1, 8, TopologyMode::kUnconstrained, "", 20},
      {"2x8-rack", 2, 8, TopologyMode::kRequired, "rack", 15},
      {"4x8-rack", 4, 8, TopologyMode::kRequired, "rack", 10},
      {"8x8-any", 8, 8, TopologyMode::kUnconstrained, "", 2},
      {"16x8-pref-block", 16, 8, TopologyMode::kPreferred, "block", 5},
      {"32x8-block", 32, 8, TopologyMode::kRequired, "block", 3},
  };
  return *mix;
}

core::GangSpec SpecOf(const Shape& shape, const std::string& queue,
                      int priority) {
  core::GangSpec spec;
  spec.queue = core::QueueName(queue);
  spec.priority = priority;
  core::PodSetSpec pods;
  pods.name = "workers";
  pods.count = shape.pods;
  pods.gpus = shape.gpus;
  pods.topology = {shape.mode, shape.level};
  spec.pod_sets.push_back(std::move(pods));
  return spec;
}

uint64_t GangMix::Below(uint64_t n) {
  // SplitMix64: the same sequence on every standard library.
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (z ^ (z >> 31)) % n;
}

core::GangSpec GangMix::Next() {
  int total = 0;
  for (const Shape& shape : ShapeMix()) total += shape.weight;
  int pick = static_cast<int>(Below(total));
  const Shape* chosen = &ShapeMix().back();
  for (const Shape& shape : ShapeMix()) {
    if (pick < shape.weight) {
      chosen = &shape;
      break;
    }
    pick -= shape.weight;
  }
  const std::string queue = absl::StrFormat("team-%d", Below(kTeams));
  return SpecOf(*chosen, queue, Below(10) == 0 ? 1 : 0);
}

core::Config BenchConfig() {
  core::Config config;
  config.topology_levels = {"block", "rack"};
  return config;
}

absl::Time BenchStart() { return absl::FromUnixSeconds(1'800'000'000); }

namespace {

template <typename T>
T Must(absl::StatusOr<T> value, const char* what) {
  if (!value.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, value.status().ToString().c_str());
    std::abort();
  }
  return *std::move(value);
}

}  // namespace

std::unique_ptr<core::Scheduler> MakeScheduler(int nodes, int pending,
                                               uint64_t seed) {
  return MakeScheduler(nodes, pending, seed, BenchConfig(),
                       core::kWaitingReason);
}

std::unique_ptr<core::Scheduler> MakeScheduler(int nodes, int pending,
                                               uint64_t seed,
                                               const core::Config& config,
                                               const std::string& reason) {
  // Restored rather than submitted: Submit checks each gang against the
  // whole fleet, which would make building 100k gangs take a minute. The
  // gangs are what Submit stores (normalized spec, PENDING, in order).
  core::LoadedState state;
  state.config = config;
  state.nodes = MakeFleet(nodes);
  state.queues = MakeQueues(static_cast<int64_t>(nodes) * kGpusPerNode);
  GangMix mix(seed);
  state.gangs.reserve(pending);
  for (int i = 0; i < pending; ++i) {
    core::Gang gang;
    gang.id = core::GangId(absl::StrFormat("g-%06d", i + 1));
    gang.spec = mix.Next();
    core::NormalizeGangSpec(gang.spec);
    gang.reason = reason;
    gang.submit_time = BenchStart();
    gang.revision = i + 1;
    state.gangs.push_back(std::move(gang));
  }
  state.meta.last_revision = pending;
  state.meta.next_gang_seq = pending + 1;
  auto scheduler =
      Must(core::Scheduler::Restore(std::move(state), BenchStart()), "restore");
  scheduler->TakeMutation();
  return scheduler;
}

int SubmitMany(core::Scheduler& scheduler, GangMix& mix, int count,
               absl::Time now) {
  int accepted = 0;
  for (int i = 0; i < count; ++i) {
    accepted += scheduler.Submit(mix.Next(), now).ok() ? 1 : 0;
  }
  return accepted;
}

void CompleteRandom(core::Scheduler& scheduler,
                    std::vector<core::GangId>& active, GangMix& rng, int count,
                    absl::Time now) {
  for (int i = 0; i < count && !active.empty(); ++i) {
    const size_t pick = rng.Below(active.size());
    std::swap(active[pick], active.back());
    core::GangReport report;
    report.gang_id = active.back();
    report.state = core::GangState::kSucceeded;
    active.pop_back();
    (void)scheduler.Report(report, now);
  }
}

}  // namespace phalanx::perf
