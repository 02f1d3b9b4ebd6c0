// Reservations planned by the placer on the projected free capacity: never
// one for a gang that fits now or that would not fit on its nodes once they
// free up, and only the nodes its placement needs are held.
#include "core/reservation.h"

#include <map>
#include <random>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/scheduler.h"
#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using ::testing::HasSubstr;
using testing::kT0;
using testing::Spec;
using ::testing::StartsWith;

Node MakeNode(const std::string& id, const std::string& rack, int gpus) {
  Node node;
  node.spec.id = NodeId(id);
  node.spec.gpu_model = "H100";
  node.spec.gpu_count = gpus;
  node.spec.labels = {{"block", "b0"}, {"rack", rack}};
  return node;
}

// A running gang of one pod of `gpus` GPUs on `node` (GPUs from `first`),
// admitted at kT0 and expected to run `estimate`.
Gang Running(const std::string& id, const std::string& node, int gpus,
             int first, absl::Duration estimate) {
  Gang gang;
  gang.id = GangId(id);
  gang.spec = Spec("q").Pods(1, gpus, "p");
  gang.spec.estimated_runtime = estimate;
  gang.state = GangState::kRunning;
  gang.submit_time = kT0;
  gang.admit_time = kT0;
  PodPlacement pod{"p", 0, NodeId(node), {}};
  for (int g = first; g < first + gpus; ++g) pod.gpu_indices.push_back(g);
  gang.placement = {pod};
  return gang;
}

std::unique_ptr<Scheduler> RestoreWith(std::vector<Node> nodes,
                                       std::vector<Gang> gangs) {
  LoadedState state;
  Config config;
  config.topology_levels = {"block", "rack"};
  state.config = config;
  state.nodes = std::move(nodes);
  Queue queue;
  queue.name = QueueName("q");
  state.queues = {queue};
  state.gangs = std::move(gangs);
  state.meta.next_gang_seq = 100;
  auto restored = Scheduler::Restore(std::move(state), kT0);
  EXPECT_TRUE(restored.ok()) << restored.status();
  return restored.ok() ? *std::move(restored) : nullptr;
}

// Node a has 8 GPUs free; b and c have 6 each (2 held by gangs ending in 1 h
// and 2 h). A gang of 2 slices of 4 two-GPU pods per node needs two whole
// nodes: its pods would fit now (4 + 3 + 3 >= 8) but its slices do not. The
// old planner, counting pods, reserved "until 0 GPUs are released" with a
// start of now; the placer waits for b to free up, and holds a and b only.
TEST(ReservationPlanTest, SlicesNeedReleasesThatPodCountsMiss) {
  auto s = RestoreWith(
      {MakeNode("a", "r0", 8), MakeNode("b", "r0", 8), MakeNode("c", "r0", 8)},
      {Running("g-000001", "b", 2, 0, absl::Hours(1)),
       Running("g-000002", "c", 2, 0, absl::Hours(2))});
  ASSERT_NE(s, nullptr);
  GangSpec spec = Spec("q").Pods(8, 2).Required("rack").Slices(4, "node");
  spec.priority = 1;
  auto big = s->Submit(spec, kT0);
  ASSERT_TRUE(big.ok()) << big.status();
  s->RunCycle(kT0 + absl::Seconds(1));
  ASSERT_EQ(s->reservations().size(), 1u);
  const Reservation& r = s->reservations()[0];
  EXPECT_EQ(r.gpus_to_release, 2);
  EXPECT_EQ(r.start, kT0 + absl::Hours(1));
  EXPECT_THAT(r.nodes, ::testing::ElementsAre(NodeId("a"), NodeId("b")));
  EXPECT_THAT(s->FindGang(big->gang->id)->reason,
              StartsWith("RESERVED: 2 nodes in b0/r0 are held for it until 2 "
                         "GPUs are released"));
  // Node c is not needed: a short gang backfills there even though it would
  // not end before the reservation starts.
  GangSpec small = Spec("q").Pods(1, 1);
  small.estimated_runtime = absl::Hours(5);
  auto later = s->Submit(small, kT0 + absl::Seconds(1));
  ASSERT_TRUE(later.ok());
  s->RunCycle(kT0 + absl::Seconds(2));
  const GangPtr admitted = s->FindGang(later->gang->id);
  ASSERT_EQ(admitted->state, GangState::kAdmitted) << admitted->reason;
  EXPECT_EQ(admitted->placement[0].node, NodeId("c"));
}

// The plan visits racks by the least they must release (need less free
// GPUs) and skips those that cannot beat the best so far — but the rack
// with the most free GPUs is not always the one that releases least. Rack
// r1 has 11 free GPUs, yet its first holder in line (g-000003) frees a
// node that the next one must complete (9 GPUs released); rack r0 has 8
// free and frees a whole node by releasing one 8-GPU gang.
TEST(ReservationPlanTest, TheRackWithMoreFreeGpusCanLose) {
  const absl::Duration unknown = absl::ZeroDuration();
  auto s = RestoreWith({MakeNode("a0", "r0", 8), MakeNode("a1", "r0", 8),
                        MakeNode("a2", "r0", 8), MakeNode("b0", "r1", 8),
                        MakeNode("b1", "r1", 8), MakeNode("b2", "r1", 8)},
                       {Running("g-000001", "a1", 8, 0, unknown),
                        Running("g-000002", "a2", 8, 0, unknown),
                        Running("g-000003", "b2", 8, 0, unknown),
                        Running("g-000004", "b0", 1, 0, unknown),
                        Running("g-000005", "b1", 4, 0, unknown)});
  ASSERT_NE(s, nullptr);
  GangSpec spec = Spec("q").Pods(2, 8).Required("rack");
  spec.priority = 1;
  auto big = s->Submit(spec, kT0);
  ASSERT_TRUE(big.ok()) << big.status();
  s->RunCycle(kT0 + absl::Seconds(1));
  ASSERT_EQ(s->reservations().size(), 1u);
  const Reservation& r = s->reservations()[0];
  EXPECT_EQ(r.path, "b0/r0");
  EXPECT_EQ(r.gpus_to_release, 8);
  EXPECT_THAT(r.nodes, ::testing::ElementsAre(NodeId("a0"), NodeId("a1")));
}

// A gang kept out only by something other than capacity gets no
// reservation: it fits the projected fleet at once.
TEST(ReservationPlanTest, NoReservationForAGangThatFitsNow) {
  auto s = RestoreWith({MakeNode("a", "r0", 8)}, {});
  ASSERT_NE(s, nullptr);
  Gang gang;
  gang.id = GangId("g-000009");
  gang.spec = Spec("q").Pods(1, 4);
  Fleet fleet = s->fleet();
  EXPECT_FALSE(PlanReservation(
                   gang, fleet, std::vector<char>(1, 0),
                   [](GangHandle) { return nullptr; }, kT0)
                   .has_value());
}

// The nodes of a reservation alone, with every gang on them gone, place the
// gang: the reservation promises only what the placer can deliver.
void CheckReservationsDeliver(const Scheduler& s, absl::Time now) {
  for (const Reservation& r : s.reservations()) {
    const GangPtr gang = s.FindGang(r.gang);
    ASSERT_NE(gang, nullptr);
    ASSERT_EQ(gang->state, GangState::kPending);
    EXPECT_FALSE(r.nodes.empty());
    EXPECT_GT(r.gpus_to_release, 0) << r.gang;
    EXPECT_GE(r.start, now - absl::Seconds(1));
    Fleet fleet = s.fleet();
    std::set<int> reserved;
    std::set<GangHandle> holders;
    for (const NodeId& node : r.nodes) {
      const int slot = fleet.Find(node);
      ASSERT_GE(slot, 0);
      reserved.insert(slot);
      for (const Fleet::GangPods& on : fleet.slots()[slot].gang_pods) {
        holders.insert(on.gang);
      }
    }
    for (GangHandle handle : holders) {
      const Gang* holder = s.GangAt(handle);
      fleet.Release(*holder, handle, holder->placement);
    }
    PlacementOptions options;
    options.node_allowed = [&](int slot) { return reserved.contains(slot); };
    PlacementResult placed = PlaceGang(gang->spec, fleet, options);
    EXPECT_TRUE(placed.placed)
        << r.gang << " reserved " << r.nodes.size() << " nodes in " << r.path
        << ": " << placed.reason;
  }
}

GangSpec RandomGang(std::mt19937_64& rng) {
  static const int kGpus[] = {1, 2, 4, 8};
  static const char* kLevels[] = {"block", "rack", "node"};
  GangSpec spec;
  spec.queue = QueueName("q");
  spec.priority = static_cast<int>(rng() % 3);
  const int sets = 1 + static_cast<int>(rng() % 2);
  const bool grouped = sets > 1 && rng() % 2;
  const TopologyConstraint group_topo{TopologyMode::kRequired,
                                      kLevels[rng() % 2]};
  for (int i = 0; i < sets; ++i) {
    PodSetSpec set;
    set.name = absl::StrCat("s", i);
    set.gpus = kGpus[rng() % 4];
    set.count = 1 + static_cast<int>(rng() % (set.gpus == 8 ? 5 : 4));
    if (grouped) {
      set.topology = group_topo;
      set.group = "g";
    } else if (rng() % 2) {
      set.topology = {
          rng() % 3 ? TopologyMode::kRequired : TopologyMode::kPreferred,
          kLevels[rng() % 3]};
      if (set.topology.level == std::string("node") &&
          set.count * set.gpus > 8) {
        set.topology = {};
      }
    }
    if (set.count % 2 == 0 && rng() % 3 == 0) set.slice = {2, "node"};
    spec.pod_sets.push_back(set);
  }
  if (rng() % 4) spec.estimated_runtime = absl::Minutes(5 + rng() % 120);
  return spec;
}

// Property: over random fleets and workloads (several pod sets, slices,
// groups, mixed node sizes), after every cycle each reservation's nodes
// place its gang once the gangs on them are gone.
TEST(ReservationPropertyTest, EveryReservationFitsOnItsNodesOnceTheyFree) {
  int reservations_seen = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    std::mt19937_64 rng(seed);
    Config config;
    config.topology_levels = {"block", "rack"};
    config.reservation.depth = 1 + static_cast<int>(rng() % 3);
    Scheduler s(config);
    std::vector<Node> nodes;
    for (int b = 0; b < 2; ++b) {
      for (int r = 0; r < 2; ++r) {
        for (int n = 0; n < 3; ++n) {
          Node node =
              MakeNode(absl::StrFormat("n%d%d%d", b, r, n),
                       absl::StrFormat("r%d-%d", b, r), rng() % 3 ? 8 : 4);
          node.spec.labels["block"] = absl::StrFormat("b%d", b);
          nodes.push_back(node);
        }
      }
    }
    ASSERT_TRUE(s.UpsertNodes(nodes, kT0).ok());
    Queue queue;
    queue.name = QueueName("q");
    ASSERT_TRUE(s.PutQueue(queue).ok());
    absl::Time now = kT0;
    std::map<GangId, absl::Time> ends;
    for (int step = 0; step < 60; ++step) {
      now += absl::Minutes(1);
      for (int i = 0; i < 3; ++i) {
        (void)s.Submit(RandomGang(rng), now);  // never-fit gangs are refused
      }
      s.RunCycle(now);
      CheckReservationsDeliver(s, now);
      reservations_seen += static_cast<int>(s.reservations().size());
      // Finish admitted gangs after their estimate (or a random while).
      std::vector<GangId> admitted;
      for (const auto& [id, gang] : s.gangs()) {
        if (gang->state == GangState::kAdmitted && !ends.contains(id)) {
          admitted.push_back(id);
        }
      }
      std::sort(admitted.begin(), admitted.end());
      for (const GangId& id : admitted) {
        const absl::Duration run = s.FindGang(id)->spec.estimated_runtime;
        ends[id] =
            now +
            (run > absl::ZeroDuration() ? run : absl::Minutes(5 + rng() % 60));
      }
      for (auto it = ends.begin(); it != ends.end();) {
        if (it->second <= now) {
          (void)s.Report({it->first, GangState::kSucceeded, {}, false, ""},
                         now);
          it = ends.erase(it);
        } else {
          ++it;
        }
      }
    }
  }
  EXPECT_GT(reservations_seen, 20);
}

}  // namespace
}  // namespace phalanx::core
