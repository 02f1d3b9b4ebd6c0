// Seeded property tests over random fleets and workloads: the invariants of
// STYLE.md hold after every cycle, and replays are identical.
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/elastic.h"
#include "core/scheduler.h"
#include "core/testing.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using testing::kT0;
using testing::MakeNodes;
using testing::Spec;

struct World {
  std::unique_ptr<Scheduler> scheduler;
  std::map<GangId, absl::Time> ends;  // admitted gang -> when it finishes
  std::vector<std::string> log;       // every event, for replay comparison
};

GangSpec RandomSpec(std::mt19937_64& rng) {
  static const int kGpus[] = {1, 2, 4, 8};
  static const char* kLevels[] = {"block", "rack", "node"};
  const int gpus = kGpus[rng() % 4];
  const int pods = gpus == 8 ? 1 + rng() % 6 : 1 + rng() % 3;
  GangSpec spec =
      Spec(rng() % 2 ? "a" : "b").Pods(pods, gpus).Priority(rng() % 3);
  const int mode = rng() % 3;
  if (mode == 1)
    spec.pod_sets[0].topology = {TopologyMode::kRequired, kLevels[rng() % 3]};
  if (mode == 2) spec.pod_sets[0].topology = {TopologyMode::kPreferred, "rack"};
  if (spec.pod_sets[0].topology.level == "node" && gpus * pods > 8) {
    spec.pod_sets[0].topology = {};
  }
  if (rng() % 3) spec.estimated_runtime = absl::Minutes(10 + rng() % 300);
  return spec;
}

// RandomSpec, and for `elastic` half of the gangs of several pods elastic
// (some of full nodes in slices of two per rack).
GangSpec RandomSpec(std::mt19937_64& rng, bool elastic) {
  GangSpec spec = RandomSpec(rng);
  PodSetSpec& set = spec.pod_sets[0];
  if (!elastic || set.count < 2 || rng() % 2) return spec;
  if (set.gpus == 8 && set.count % 2 == 0 && rng() % 2 &&
      set.topology.level != "node") {
    set.slice = {2, "rack"};
    set.min_count = 2 * (1 + rng() % (set.count / 2));
  } else {
    set.min_count = 1 + rng() % set.count;
  }
  return spec;
}

// Domain label at `level` of a node id made by MakeNodes ("H100-<b><r><nn>").
std::string DomainOf(const NodeId& node, const std::string& level) {
  const std::string& id = node.value();
  if (level == "block") return id.substr(5, 1);
  if (level == "rack") return id.substr(5, 2);
  return id;
}

// Each slice of a pod set shares one domain of its slice level.
void CheckSlices(const Gang& gang) {
  for (const PodSetSpec& set : gang.spec.pod_sets) {
    if (set.slice.size <= 0) continue;
    std::map<int, std::set<std::string>> domains;  // slice -> domains
    for (const PodPlacement& pod : gang.placement) {
      if (pod.pod_set != set.name) continue;
      domains[pod.index / set.slice.size].insert(
          DomainOf(pod.node, set.slice.level));
    }
    for (const auto& [slice, in] : domains) {
      EXPECT_EQ(in.size(), 1u) << gang.id << " slice " << slice;
    }
  }
}

// No gang holds a pod on an unhealthy node, or on a draining node past its
// deadline: repair or eviction moved it off.
void CheckNodesLeft(const Scheduler& s, const Gang& gang, absl::Time now) {
  for (const PodPlacement& pod : gang.placement) {
    const Node& node = s.fleet().slots()[s.fleet().Find(pod.node)].node;
    EXPECT_NE(node.state, NodeState::kUnhealthy) << gang.id << " " << pod.node;
    if (node.state == NodeState::kDraining && node.drain_deadline) {
      EXPECT_GT(*node.drain_deadline, now) << gang.id << " " << pod.node;
    }
  }
}

void CheckInvariants(const Scheduler& s, absl::Time now) {
  std::set<std::pair<std::string, int>> held;
  std::map<std::string, uint64_t> used;
  for (const auto& [id, gang] : s.gangs()) {
    if (!HoldsCapacity(gang->state)) {
      // Only a final gang keeps a placement, and it is released.
      EXPECT_EQ(gang->placement_released, !gang->placement.empty()) << id;
      if (!IsFinal(gang->state)) {
        EXPECT_TRUE(gang->placement.empty()) << id;
      }
      if (gang->state == GangState::kPending) {
        EXPECT_FALSE(gang->reason.empty()) << id;
      }
      continue;
    }
    ASSERT_TRUE(HeldSizeAllowed(*gang)) << id;
    CheckNodesLeft(s, *gang, now);
    CheckSlices(*gang);
    std::set<std::string> domains;
    for (const PodPlacement& pod : gang->placement) {
      for (int gpu : pod.gpu_indices) {
        EXPECT_TRUE(held.insert({pod.node.value(), gpu}).second)
            << "GPU held twice: " << pod.node << "/" << gpu;
        used[pod.node.value()] |= uint64_t{1} << gpu;
      }
      const TopologyConstraint& topo = gang->spec.pod_sets[0].topology;
      if (topo.mode == TopologyMode::kRequired) {
        domains.insert(DomainOf(pod.node, topo.level));
      }
    }
    EXPECT_LE(domains.size(), 1u) << "REQUIRED constraint broken for " << id;
  }
  for (const Fleet::Slot& slot : s.fleet().slots()) {
    EXPECT_EQ(slot.used_gpu_mask, used[slot.node.spec.id.value()])
        << slot.node.spec.id;
  }
  // No queue holds more than its quota lets it (nominal + borrowing).
  for (const auto& [name, queue] : s.queues()) {
    if (queue.nominal_gpus.empty() || queue.borrowing_limit_gpus < 0) continue;
    const auto held = s.Usage(name).held_gpus;
    const int64_t h100 = held.contains("H100") ? held.at("H100") : 0;
    EXPECT_LE(h100, queue.nominal_gpus.at("H100") + queue.borrowing_limit_gpus)
        << name;
  }
}

// Runs a random workload for `steps` minutes; returns the event log.
std::vector<std::string> RunWorkload(uint64_t seed, bool preemption, int steps,
                                     bool elastic = false, bool binding = false,
                                     bool loans = false) {
  std::mt19937_64 rng(seed);
  Config config;
  config.topology_levels = {"block", "rack"};
  config.preemption.enabled = preemption;
  config.preemption.min_runtime = absl::Minutes(5);
  config.planning.binding = binding;
  config.reservation.preemptible_backfill = loans;
  config.reservation.for_quota_waits = loans;
  Scheduler s(config);
  EXPECT_TRUE(s.UpsertNodes(MakeNodes(2, 2, 3), kT0).ok());
  if (elastic) config.elastic.grow_interval = absl::Minutes(rng() % 20);
  for (const char* name : {"a", "b"}) {
    Queue queue;
    queue.name = QueueName(name);
    if (elastic) {  // half the fleet each, borrowing up to a quarter more
      queue.nominal_gpus = {{"H100", 48}};
      queue.borrowing_limit_gpus = 24;
    }
    EXPECT_TRUE(s.PutQueue(queue).ok());
  }
  std::map<GangId, absl::Time> ends;
  std::map<NodeId, absl::Time> back;  // failed or drained node -> when back
  std::vector<std::string> log;
  absl::Time now = kT0;
  auto busy = [&s]() {
    for (const auto& [id, gang] : s.gangs()) {
      if (!IsFinal(gang->state)) return true;
    }
    return false;
  };
  // Submit for `steps` minutes, then drain (bounded) until all is done.
  for (int step = 0; step < steps || (busy() && step < steps * 20); ++step) {
    now += absl::Minutes(1);
    // Finish what is due; acknowledge preemptions at once.
    for (auto it = ends.begin(); it != ends.end();) {
      GangPtr gang = s.FindGang(it->first);
      if (gang && gang->state == GangState::kPreempting) {
        // A shrunk gang runs on; a preempted one is requeued.
        const bool shrink = gang->shrink_to > 0;
        EXPECT_TRUE(s.Report({gang->id, std::nullopt, {}, true, ""}, now).ok());
        it = shrink ? std::next(it) : ends.erase(it);
      } else if (gang && HoldsCapacity(gang->state) && it->second <= now) {
        EXPECT_TRUE(
            s.Report({gang->id, GangState::kSucceeded, {}, false, ""}, now)
                .ok());
        it = ends.erase(it);
      } else {
        ++it;
      }
    }
    if (step < steps && rng() % 3 == 0) {
      auto result = s.Submit(RandomSpec(rng, elastic), now);
      EXPECT_TRUE(result.ok() || absl::IsFailedPrecondition(result.status()))
          << result.status();
    }
    if (step < steps && rng() % 15 == 0) {  // a node fails or is drained
      const auto& slots = s.fleet().slots();
      const NodeId node = slots[rng() % slots.size()].node.spec.id;
      const bool drain = rng() % 2 == 0;
      const absl::Time deadline = now + absl::Minutes(rng() % 10);
      EXPECT_TRUE(
          s.SetNodeState(
               node, drain ? NodeState::kDraining : NodeState::kUnhealthy,
               "xid", now, drain ? std::optional(deadline) : std::nullopt)
              .ok());
      back[node] = now + absl::Minutes(5 + rng() % 20);
    }
    for (auto it = back.begin(); it != back.end();) {  // and comes back
      if (it->second > now) {
        ++it;
        continue;
      }
      EXPECT_TRUE(
          s.SetNodeState(it->first, NodeState::kReady, "fixed", now).ok());
      it = back.erase(it);
    }
    s.RunCycle(now);
    CheckInvariants(s, now);
    for (const Event& event : s.TakeMutation().events) {
      std::string line =
          absl::StrCat(event.revision, " ", EventTypeName(event.type), " ",
                       event.gang->id.value());
      for (const PodPlacement& pod : event.gang->placement) {
        absl::StrAppend(&line, " ", pod.node.value(), ":",
                        pod.gpu_indices.size());
      }
      if (event.gang->on_loan) absl::StrAppend(&line, " on-loan");
      log.push_back(line);
      if (event.type == EventType::kAdmitted) {
        ends[event.gang->id] = now + absl::Minutes(1 + rng() % 120);
      }
    }
  }
  // With reservations on, every gang gets through: nothing waits forever.
  for (const auto& [id, gang] : s.gangs()) {
    EXPECT_TRUE(IsFinal(gang->state))
        << id << " " << GangStateName(gang->state) << " " << gang->reason;
  }
  return log;
}

TEST(PropertyTest, InvariantsHoldAndReplaysAreIdentical) {
  std::map<std::string, int> vacated;  // REPAIRED / EVICTED events
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE(seed);
    const bool preemption = seed % 2 == 0;
    std::vector<std::string> first = RunWorkload(seed, preemption, 300);
    EXPECT_GT(first.size(), 50u);
    EXPECT_EQ(first, RunWorkload(seed, preemption, 300));
    for (const std::string& line : first) {
      for (const char* type : {" REPAIRED ", " EVICTED "}) {
        if (line.find(type) != std::string::npos) ++vacated[type];
      }
    }
  }
  // Both ways off a failed or drained node are exercised.
  EXPECT_GT(vacated[" REPAIRED "], 10);
  EXPECT_GT(vacated[" EVICTED "], 10);
}

// Four of the workloads above (two with preemption) with the plan binding:
// the plan is made every cycle there, so the runs are the slowest of these.
TEST(PropertyTest, ABindingPlanKeepsTheInvariantsAndLetsEveryGangThrough) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(seed);
    const bool preemption = seed % 2 == 0;
    std::vector<std::string> first =
        RunWorkload(seed, preemption, 300, /*elastic=*/false, /*binding=*/true);
    EXPECT_EQ(first, RunWorkload(seed, preemption, 300, /*elastic=*/false,
                                 /*binding=*/true));
  }
}

// Loans of reserved nodes (and reservations for gangs waiting on their
// cohort's quota), with quotas, elastic gangs, node failures and
// preemption: the invariants hold, every gang gets through, replays are
// identical, and loans are taken back.
TEST(PropertyTest, LoansOfReservedNodesKeepTheInvariants) {
  int loans = 0;
  int taken_back = 0;
  for (uint64_t seed = 201; seed <= 204; ++seed) {
    SCOPED_TRACE(seed);
    std::vector<std::string> first =
        RunWorkload(seed, true, 300, /*elastic=*/true, /*binding=*/false,
                    /*loans=*/true);
    EXPECT_EQ(first, RunWorkload(seed, true, 300, /*elastic=*/true,
                                 /*binding=*/false, /*loans=*/true));
    for (const std::string& line : first) {
      if (line.find(" on-loan") == std::string::npos) continue;
      if (line.find(" ADMITTED ") != std::string::npos) ++loans;
      if (line.find(" PREEMPTING ") != std::string::npos) ++taken_back;
    }
  }
  // Loans are made, and some are taken back.
  EXPECT_GT(loans, 0);
  EXPECT_GT(taken_back, 0);
}

TEST(PropertyTest, ElasticGangsKeepTheInvariantsAndReplayIdentically) {
  std::map<std::string, int> seen;  // RESIZED / PREEMPTING events
  for (uint64_t seed = 101; seed <= 108; ++seed) {
    SCOPED_TRACE(seed);
    std::vector<std::string> first = RunWorkload(seed, true, 300, true);
    EXPECT_EQ(first, RunWorkload(seed, true, 300, true));
    for (const std::string& line : first) {
      for (const char* type : {" RESIZED ", " PREEMPTING "}) {
        if (line.find(type) != std::string::npos) ++seen[type];
      }
    }
  }
  // Growth and shrinks are exercised.
  EXPECT_GT(seen[" RESIZED "], 10);
  EXPECT_GT(seen[" PREEMPTING "], 5);
}

}  // namespace
}  // namespace phalanx::core
