// The free index against brute force, and indexed placement against placement
// that counts every node, over seeded random fleets.
#include "core/free_index.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/fleet.h"
#include "core/placement.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

// Random fleets, partly allocated, with two models, some nodes not READY and
// some with so little CPU or memory that they bind before GPUs.
class RandomFleet {
 public:
  explicit RandomFleet(uint32_t seed) : rng_(seed) {}

  Fleet Make() {
    Fleet fleet({"block", "rack"});
    std::vector<Node> nodes;
    const int blocks = Between(1, 3);
    for (int b = 0; b < blocks; ++b) {
      const int racks = Between(1, 4);
      for (int r = 0; r < racks; ++r) {
        const int count = Between(1, 6);
        for (int n = 0; n < count; ++n) nodes.push_back(MakeNode(b, r, n));
      }
    }
    fleet.Upsert(nodes);
    for (const Node& node : nodes) Fill(fleet, node.spec);
    return fleet;
  }

  GangSpec MakeSpec() {
    PodSetSpec set;
    set.name = "p";
    set.count = Between(1, 24);
    set.gpus = Between(0, 8);
    if (Between(0, 2) == 0) set.cpu_millis = Between(1, 24) * 1000;
    if (Between(0, 2) == 0 || set.gpus == 0) {
      set.memory_bytes = Between(1, 64) * kGiB;
    }
    const int mode = Between(0, 2);
    const char* levels[] = {"block", "rack", "node"};
    if (mode == 1)
      set.topology = {TopologyMode::kRequired, levels[Between(0, 2)]};
    if (mode == 2) {
      set.topology = {TopologyMode::kPreferred, levels[Between(0, 2)]};
    }
    if (Between(0, 3) == 0) set.gpu_models = {Between(0, 1) ? "H200" : "H100"};
    if (Between(0, 3) == 0) Slice(set);
    GangSpec spec;
    spec.queue = QueueName("q");
    spec.allow_mixed_models = Between(0, 4) == 0;
    spec.pod_sets.push_back(std::move(set));
    return spec;
  }

  // Slices of a size that divides the count, no wider than the topology.
  void Slice(PodSetSpec& set) {
    const std::vector<std::string> levels = {"block", "rack", "node"};
    int widest = 0;
    if (set.topology.mode != TopologyMode::kUnconstrained) {
      widest = static_cast<int>(
          std::find(levels.begin(), levels.end(), set.topology.level) -
          levels.begin());
    }
    int size = Between(2, 4);
    while (set.count % size != 0) --size;
    set.slice = {size, levels[Between(widest, 2)]};
  }

  int Between(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng_);
  }

 private:
  Node MakeNode(int block, int rack, int index) {
    Node node;
    node.spec.id = NodeId(absl::StrFormat("n-%d-%d-%d", block, rack, index));
    node.spec.gpu_model = Between(0, 3) == 0 ? "H200" : "H100";
    node.spec.gpu_count = Between(0, 4) == 0 ? 4 : 8;
    if (Between(0, 1)) node.spec.cpu_millis = Between(8, 128) * 1000;
    if (Between(0, 1)) node.spec.memory_bytes = Between(16, 512) * kGiB;
    node.spec.labels = {{"block", absl::StrFormat("b%d", block)},
                        {"rack", absl::StrFormat("r%d-%d", block, rack)}};
    const int state = Between(0, 9);
    node.state = state == 0   ? NodeState::kCordoned
                 : state == 1 ? NodeState::kUnhealthy
                              : NodeState::kReady;
    return node;
  }

  // Allocates a random subset of the node's GPUs, one-GPU pods each.
  void Fill(Fleet& fleet, const NodeSpec& node) {
    Gang filler;
    filler.id = GangId(absl::StrCat("filler-", node.id.value()));
    PodSetSpec set;
    set.name = "f";
    set.gpus = 1;
    set.cpu_millis = Between(0, 8) * 1000;
    set.memory_bytes = Between(0, 32) * kGiB;
    filler.spec.pod_sets = {set};
    std::vector<PodPlacement> pods;
    for (int gpu = 0; gpu < node.gpu_count; ++gpu) {
      if (Between(0, 2) != 0) continue;
      pods.push_back({"f", static_cast<int>(pods.size()), node.id, {gpu}});
    }
    const auto handle = static_cast<GangHandle>(fleet.Find(node.id));
    ASSERT_TRUE(fleet.Allocate(filler, handle, pods).ok());
  }

  std::mt19937 rng_;
};

TEST(FreeIndexTest, HistogramsAndBucketsMatchTheNodes) {
  for (uint32_t seed = 1; seed <= 50; ++seed) {
    Fleet fleet = RandomFleet(seed).Make();
    const FreeIndex& index = fleet.free_index();
    for (size_t d = 0; d < fleet.domains().size(); ++d) {
      const Fleet::Domain& domain = fleet.domains()[d];
      std::vector<int64_t> expected(index.max_gpus() + 1, 0);
      for (int i = domain.node_begin; i < domain.node_end; ++i) {
        const Fleet::Slot& slot = fleet.slots()[i];
        if (slot.node.state != NodeState::kReady) continue;
        if (slot.FreeGpus() > 0) ++expected[slot.FreeGpus()];
      }
      for (int free = 1; free <= index.max_gpus(); ++free) {
        EXPECT_EQ(index.Nodes(d, index.any_model(), free), expected[free])
            << "seed " << seed << " domain " << domain.path << " free " << free;
      }
    }
    for (int free = 1; free <= index.max_gpus(); ++free) {
      for (int slot : index.SlotsWithFree(index.any_model(), free)) {
        EXPECT_EQ(fleet.slots()[slot].FreeGpus(), free) << "seed " << seed;
      }
    }
  }
}

TEST(FreeIndexTest, MinimaOverRanges) {
  Fleet fleet = RandomFleet(7).Make();
  const FreeIndex& index = fleet.free_index();
  const int n = static_cast<int>(fleet.slots().size());
  for (int begin = 0; begin < n; ++begin) {
    for (int end = begin + 1; end <= n; ++end) {
      double least = std::numeric_limits<double>::infinity();
      for (int i = begin; i < end; ++i) {
        const Fleet::Slot& slot = fleet.slots()[i];
        const int free = slot.FreeGpus();
        if (slot.node.state != NodeState::kReady || free == 0) continue;
        if (slot.node.spec.cpu_millis == 0) continue;
        least = std::min(
            least, static_cast<double>(std::max<int64_t>(
                       slot.node.spec.cpu_millis - slot.used_cpu_millis, 0)) /
                       free);
      }
      EXPECT_EQ(index.MinCpuPerGpu(begin, end), least) << begin << ".." << end;
    }
  }
}

std::string PodsText(const PlacementResult& r) {
  std::string out;
  for (const PodPlacement& pod : r.pods) {
    absl::StrAppend(&out, pod.pod_set, "#", pod.index, "@", pod.node.value(),
                    " ");
  }
  return out;
}

// Indexed placement (a node filter that names the slots it restricts) gives
// exactly the result of counting every node (the same filter over all slots).
TEST(FreeIndexTest, IndexedPlacementEqualsCountingEveryNode) {
  int placed = 0;
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    RandomFleet random(seed);
    Fleet fleet = random.Make();
    std::vector<int> restricted;
    std::vector<char> refused(fleet.slots().size(), 0);
    for (size_t i = 0; i < fleet.slots().size(); ++i) {
      if (random.Between(0, 4) != 0) continue;
      restricted.push_back(static_cast<int>(i));
      refused[i] = random.Between(0, 1);
    }
    auto allowed = [&](int slot) { return !refused[slot]; };
    for (int trial = 0; trial < 10; ++trial) {
      const GangSpec spec = random.MakeSpec();
      PlacementOptions indexed;
      indexed.node_allowed = allowed;
      indexed.restricted_slots = &restricted;
      PlacementOptions counted;
      counted.node_allowed = allowed;
      const PlacementResult a = PlaceGang(spec, fleet, indexed);
      const PlacementResult b = PlaceGang(spec, fleet, counted);
      ASSERT_EQ(a.placed, b.placed) << "seed " << seed << " trial " << trial;
      EXPECT_EQ(a.reason, b.reason) << "seed " << seed << " trial " << trial;
      EXPECT_EQ(a.pods, b.pods) << "seed " << seed << " trial " << trial << "\n"
                                << PodsText(a) << "\n"
                                << PodsText(b) << "\n"
                                << PlacementShapeKey(spec);
      placed += a.placed;
    }
  }
  EXPECT_GT(placed, 300);  // the random specs are not all hopeless
}

}  // namespace
}  // namespace phalanx::core
