// Placement of gangs of several pod sets: the joint search makes the answer
// independent of the order the pod sets are listed in; the tie-breaks keep
// GPUs and nodes whole. Table cases shaped like other schedulers' test
// suites (Kueue TAS, Volcano, Slurm), a property test over every order of
// random small gangs on random small fleets.
#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/placement.h"
#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using ::testing::HasSubstr;
using testing::Spec;

// One node: `gpus` GPUs in block `block`, rack `rack`, id "n<block><rack><i>".
struct NodeAt {
  int block;
  int rack;
  int gpus;
};

Fleet MakeFleet(const std::vector<NodeAt>& nodes) {
  Fleet fleet({"block", "rack"});
  std::vector<Node> specs;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node node;
    node.spec.id = NodeId(absl::StrFormat("n%d%d-%02d", nodes[i].block,
                                          nodes[i].rack, static_cast<int>(i)));
    node.spec.gpu_model = "H100";
    node.spec.gpu_count = nodes[i].gpus;
    node.spec.labels = {
        {"block", absl::StrFormat("b%d", nodes[i].block)},
        {"rack", absl::StrFormat("r%d-%d", nodes[i].block, nodes[i].rack)}};
    specs.push_back(std::move(node));
  }
  fleet.Upsert(specs);
  return fleet;
}

// Takes `gpus` GPUs of node `id` (the lowest indices).
void Occupy(Fleet& fleet, const std::string& id, int gpus) {
  static int seq = 0;
  Gang filler;
  filler.id = GangId(absl::StrCat("filler-", seq++));
  filler.spec = Spec("q").Pods(1, gpus, "p");
  std::vector<int> indices;
  for (int g = 0; g < gpus; ++g) indices.push_back(g);
  ASSERT_TRUE(fleet
                  .Allocate(filler, static_cast<GangHandle>(seq),
                            {{"p", 0, NodeId(id), indices}})
                  .ok());
}

std::map<std::string, int> PodsPerNode(const PlacementResult& result,
                                       const std::string& pod_set = "") {
  std::map<std::string, int> nodes;
  for (const PodPlacement& pod : result.pods) {
    if (pod_set.empty() || pod.pod_set == pod_set) nodes[pod.node.value()]++;
  }
  return nodes;
}

// Hosts with 4, 6 and 5 GPUs in one rack; a 1-GPU
// leader and 14 one-GPU workers in slices of 2 per node, grouped at rack
// level. The only placement puts the leader on the 5-GPU host.
GangSpec LeaderAndWorkers(bool workers_first) {
  Spec spec("q");
  auto leader = [](Spec& s) {
    s.Pods(1, 1, "leader").Required("rack").Group("g");
  };
  auto workers = [](Spec& s) {
    s.Pods(14, 1, "workers").Required("rack").Slices(2, "node").Group("g");
  };
  if (workers_first) {
    workers(spec);
    leader(spec);
  } else {
    leader(spec);
    workers(spec);
  }
  return spec;
}

TEST(JointPlacementTest, LeaderListedFirstStillFindsTheOnlyPlacement) {
  for (bool workers_first : {false, true}) {
    Fleet fleet = MakeFleet({{0, 0, 4}, {0, 0, 6}, {0, 0, 5}});
    PlacementResult result = PlaceGang(LeaderAndWorkers(workers_first), fleet);
    ASSERT_TRUE(result.placed) << workers_first << ": " << result.reason;
    EXPECT_EQ(PodsPerNode(result, "leader"),
              (std::map<std::string, int>{{"n00-02", 1}}));
    EXPECT_EQ(PodsPerNode(result, "workers"),
              (std::map<std::string, int>{
                  {"n00-00", 4}, {"n00-01", 6}, {"n00-02", 4}}));
    // Pods come back in pod-set order whatever order placed them.
    EXPECT_EQ(result.pods.front().pod_set,
              workers_first ? "workers" : "leader");
  }
}

TEST(JointPlacementTest, CanEverFitUsesTheSameJointSearch) {
  Fleet fleet = MakeFleet({{0, 0, 4}, {0, 0, 6}, {0, 0, 5}});
  EXPECT_TRUE(
      PlaceGang(LeaderAndWorkers(false), fleet, CapacityBasis::kTotal).placed);
}

TEST(JointPlacementTest, ASetThatFitsNowhereAloneNamesItself) {
  Fleet fleet = MakeFleet({{0, 0, 8}, {0, 1, 8}});
  GangSpec spec =
      Spec("q").Pods(1, 1, "leader").Pods(3, 8, "workers").Required("rack");
  PlacementResult result = PlaceGang(spec, fleet);
  EXPECT_FALSE(result.placed);
  EXPECT_EQ(result.reason,
            "pod set workers: NO_FIT at level rack: largest free rack fits 1 "
            "of 3 pods");
}

// Table cases shaped like other schedulers' test suites.
struct Case {
  std::string name;
  std::vector<NodeAt> nodes;
  std::vector<std::pair<std::string, int>> busy;  // node id, GPUs taken
  GangSpec spec;
  bool placed;
  // Expected pods per node per pod set ("" = all pod sets), when placed.
  std::map<std::string, std::map<std::string, int>> expect;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  // Kueue TAS: a leader and workers with a required rack, the leader on a
  // node of its own; the rack with room for both is the second one.
  cases.push_back({"kueue_tas_leader_worker_required_rack",
                   {{0, 0, 8}, {0, 0, 8}, {0, 1, 8}, {0, 1, 8}, {0, 1, 8}},
                   {},
                   Spec("q")
                       .Pods(1, 8, "leader")
                       .Required("rack")
                       .Group("lws")
                       .Pods(2, 8, "workers")
                       .Required("rack")
                       .Group("lws"),
                   true,
                   {{"", {{"n01-02", 1}, {"n01-03", 1}, {"n01-04", 1}}}}});
  // Kueue TAS: PREFERRED rack that no rack holds walks up to the block and
  // uses the fewest nodes.
  cases.push_back({"kueue_tas_preferred_walks_up_fewest_nodes",
                   {{0, 0, 8}, {0, 0, 8}, {0, 0, 8}, {0, 1, 8}, {0, 1, 8}},
                   {{"n00-00", 4}, {"n01-04", 4}},
                   Spec("q").Pods(12, 2).Preferred("rack"),
                   true,
                   {{"", {{"n00-01", 4}, {"n00-02", 4}, {"n01-03", 4}}}}});
  // Kueue TAS: REQUIRED block across racks with mixed GPU counts.
  cases.push_back({"kueue_tas_required_block_mixed_counts",
                   {{0, 0, 4}, {0, 0, 8}, {1, 0, 8}, {1, 1, 8}},
                   {},
                   Spec("q").Pods(4, 4).Required("block"),
                   true,
                   {{"", {{"n10-02", 2}, {"n11-03", 2}}}}});
  // Volcano: a gang (minAvailable = all) of a ps and workers, unconstrained,
  // where the 4-GPU ps listed first would take the only 8-GPU node's room.
  cases.push_back({"volcano_ps_worker_big_pods_first",
                   {{0, 0, 8}, {0, 0, 4}},
                   {},
                   Spec("q").Pods(1, 4, "ps").Pods(1, 8, "worker"),
                   true,
                   {{"worker", {{"n00-00", 1}}}, {"ps", {{"n00-01", 1}}}}});
  // Volcano: a gang that does not fit is refused whole.
  cases.push_back({"volcano_gang_all_or_nothing",
                   {{0, 0, 8}, {0, 0, 8}},
                   {},
                   Spec("q").Pods(1, 8, "ps").Pods(2, 8, "worker"),
                   false,
                   {}});
  // Slurm: --nodes=2 --ntasks-per-node=4 --gpus-per-task=2 as slices of 4
  // pods per node; a node with 6 free GPUs cannot take a slice.
  cases.push_back({"slurm_tasks_per_node_slices",
                   {{0, 0, 8}, {0, 0, 8}, {0, 0, 8}},
                   {{"n00-00", 2}},
                   Spec("q").Pods(8, 2).Slices(4, "node"),
                   true,
                   {{"", {{"n00-01", 4}, {"n00-02", 4}}}}});
  // Slurm: a heterogeneous job (two components) in one rack (--switches=1).
  cases.push_back({"slurm_het_job_one_switch",
                   {{0, 0, 8}, {0, 1, 8}, {0, 1, 8}},
                   {{"n01-01", 6}},
                   Spec("q")
                       .Pods(1, 2, "head")
                       .Required("rack")
                       .Group("het")
                       .Pods(1, 8, "compute")
                       .Required("rack")
                       .Group("het"),
                   true,
                   {{"head", {{"n01-01", 1}}}, {"compute", {{"n01-02", 1}}}}});
  // REQUIRED rack that no rack can hold together.
  cases.push_back({"required_rack_group_never_together",
                   {{0, 0, 8}, {0, 1, 8}},
                   {},
                   Spec("q")
                       .Pods(1, 8, "a")
                       .Required("rack")
                       .Group("g")
                       .Pods(1, 1, "b")
                       .Required("rack")
                       .Group("g"),
                   false,
                   {}});
  return cases;
}

TEST(JointPlacementTest, OtherSchedulersCases) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    GangSpec spec = c.spec;
    std::vector<size_t> order(spec.pod_sets.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    // Every listed order gives the same answer.
    do {
      GangSpec permuted = spec;
      for (size_t i = 0; i < order.size(); ++i) {
        permuted.pod_sets[i] = spec.pod_sets[order[i]];
      }
      Fleet fleet = MakeFleet(c.nodes);
      for (const auto& [node, gpus] : c.busy) Occupy(fleet, node, gpus);
      PlacementResult result = PlaceGang(permuted, fleet);
      ASSERT_EQ(result.placed, c.placed) << result.reason;
      for (const auto& [set, nodes] : c.expect) {
        EXPECT_EQ(PodsPerNode(result, set), nodes) << "pod set " << set;
      }
    } while (std::next_permutation(order.begin(), order.end()));
  }
}

// Ties between nodes that hold as many whole slices (or pods): the one that
// leaves the fewest GPUs unused.
TEST(TieBreakTest, EqualSliceCountsTakeTheNodeLeavingFewestGpus) {
  // Both nodes hold one slice of 2 pods x 3 GPUs; the 6-free node is used
  // up by it, the 7-free one would keep a stranded GPU.
  Fleet fleet = MakeFleet({{0, 0, 8}, {0, 0, 8}});
  Occupy(fleet, "n00-00", 1);
  Occupy(fleet, "n00-01", 2);
  PlacementResult result =
      PlaceGang(Spec("q").Pods(2, 3).Slices(2, "node"), fleet);
  ASSERT_TRUE(result.placed) << result.reason;
  EXPECT_EQ(PodsPerNode(result), (std::map<std::string, int>{{"n00-01", 2}}));
}

TEST(TieBreakTest, EqualPodCountsTakeTheNodeLeavingFewestGpus) {
  Fleet fleet = MakeFleet({{0, 0, 8}, {0, 0, 8}});
  Occupy(fleet, "n00-00", 1);
  Occupy(fleet, "n00-01", 2);
  PlacementResult result =
      PlaceGang(Spec("q").Pods(2, 3).Required("rack"), fleet);
  ASSERT_TRUE(result.placed) << result.reason;
  EXPECT_EQ(PodsPerNode(result), (std::map<std::string, int>{{"n00-01", 2}}));
}

TEST(TieBreakTest, PreferredAboveItsLevelUsesTheFewestNodes) {
  // 12 pods of 2 GPUs, no rack holds them. Racks hold
  // 4+4+2 and 4+2 pods; three whole nodes suffice.
  Fleet fleet =
      MakeFleet({{0, 0, 8}, {0, 0, 8}, {0, 0, 4}, {0, 1, 8}, {0, 1, 4}});
  PlacementResult result =
      PlaceGang(Spec("q").Pods(12, 2).Preferred("rack"), fleet);
  ASSERT_TRUE(result.placed) << result.reason;
  EXPECT_EQ(PodsPerNode(result),
            (std::map<std::string, int>{
                {"n00-00", 4}, {"n00-01", 4}, {"n01-03", 4}}));
}

// Property: on random small fleets, every order of a random small gang's
// pod sets is placed, or none is.
TEST(JointPlacementPropertyTest, PodSetOrderNeverMatters) {
  std::mt19937_64 rng(20261201);
  static const int kGpus[] = {1, 2, 4, 8};
  static const char* kLevels[] = {"block", "rack", "node"};
  int placed = 0;
  int refused = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<NodeAt> nodes;
    const int count = 2 + static_cast<int>(rng() % 6);
    for (int i = 0; i < count; ++i) {
      nodes.push_back({static_cast<int>(rng() % 2), static_cast<int>(rng() % 2),
                       kGpus[rng() % 4]});
    }
    std::vector<std::pair<std::string, int>> busy;
    for (int i = 0; i < count; ++i) {
      if (rng() % 3 == 0) continue;
      Fleet probe = MakeFleet(nodes);
      const Fleet::Slot& slot = probe.slots()[i];
      const int take = static_cast<int>(rng() % (slot.node.spec.gpu_count + 1));
      if (take > 0) busy.emplace_back(slot.node.spec.id.value(), take);
    }
    GangSpec spec;
    spec.queue = QueueName("q");
    const int sets = 2 + static_cast<int>(rng() % 2);
    const bool grouped = rng() % 2;
    const TopologyConstraint group_topo{
        rng() % 2 ? TopologyMode::kRequired : TopologyMode::kPreferred,
        kLevels[rng() % 2]};
    for (int s = 0; s < sets; ++s) {
      PodSetSpec set;
      set.name = absl::StrCat("s", s);
      set.gpus = kGpus[rng() % 3];
      set.count = 1 + static_cast<int>(rng() % 4);
      if (grouped) {
        set.topology = group_topo;
        set.group = "g";
      } else if (rng() % 2) {
        set.topology = {TopologyMode::kRequired, kLevels[rng() % 3]};
        if (set.topology.level == std::string("node") &&
            set.count * set.gpus > 8) {
          set.topology = {};
        }
      }
      if (set.count % 2 == 0 && rng() % 3 == 0) set.slice = {2, "node"};
      spec.pod_sets.push_back(set);
    }
    std::vector<size_t> order(sets);
    for (int i = 0; i < sets; ++i) order[i] = i;
    std::map<CapacityBasis, bool> expected;
    do {
      GangSpec permuted = spec;
      for (int i = 0; i < sets; ++i) {
        permuted.pod_sets[i] = spec.pod_sets[order[i]];
      }
      for (CapacityBasis basis :
           {CapacityBasis::kFree, CapacityBasis::kTotal}) {
        Fleet fleet = MakeFleet(nodes);
        for (const auto& [node, gpus] : busy) Occupy(fleet, node, gpus);
        PlacementResult result = PlaceGang(permuted, fleet, basis);
        auto [it, first] = expected.try_emplace(basis, result.placed);
        ASSERT_EQ(result.placed, it->second)
            << "trial " << trial << " basis " << static_cast<int>(basis) << ": "
            << result.reason;
        if (result.placed) {
          EXPECT_EQ(static_cast<int>(result.pods.size()), spec.TotalPods());
        }
      }
    } while (std::next_permutation(order.begin(), order.end()));
    const std::optional<bool> placed_now = expected[CapacityBasis::kFree];
    (*placed_now ? placed : refused)++;
  }
  // Both outcomes occur, so the property says something.
  EXPECT_GT(placed, 50);
  EXPECT_GT(refused, 50);
}

}  // namespace
}  // namespace phalanx::core
