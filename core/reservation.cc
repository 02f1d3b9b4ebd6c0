#include "core/reservation.h"

#include <algorithm>
#include <tuple>

namespace phalanx::core {
namespace {

// The pod set that dominates the gang's needs (most GPUs in all).
const PodSetSpec& LargestPodSet(const GangSpec& spec) {
  return *std::max_element(spec.pod_sets.begin(), spec.pod_sets.end(),
                           [](const PodSetSpec& a, const PodSetSpec& b) {
                             return int64_t{a.count} * a.gpus <
                                    int64_t{b.count} * b.gpus;
                           });
}

// The level a reservation covers: the constraint's level (node level
// reserves one node's domain, i.e. the lowest level), or the whole fleet.
int ReservationLevel(const PodSetSpec& set, const Fleet& fleet) {
  if (set.topology.mode == TopologyMode::kUnconstrained) return -1;
  const int depth = static_cast<int>(fleet.levels().size());
  return std::min(fleet.LevelIndex(set.topology.level), depth - 1);
}

bool Acceptable(const PodSetSpec& set, const Fleet::Slot& slot) {
  return set.gpu_models.empty() ||
         std::find(set.gpu_models.begin(), set.gpu_models.end(),
                   slot.node.spec.gpu_model) != set.gpu_models.end();
}

struct Candidate {
  absl::Time start;
  int64_t to_release;
  int domain;
  std::vector<int> slots;  // the nodes to hold (compared last, never tied)
  bool operator<(const Candidate& o) const {
    return std::tie(start, to_release, domain) <
           std::tie(o.start, o.to_release, o.domain);
  }
};

// The fewest nodes (most pods first, then fleet order) that hold `set` with
// `free[i]` GPUs free on slot begin + i (-1: not eligible).
std::vector<int> FewestNodes(const std::vector<int>& free, int begin,
                             const PodSetSpec& set) {
  std::vector<std::pair<int64_t, int>> by_pods;  // (-pods, slot)
  for (size_t i = 0; i < free.size(); ++i) {
    const int64_t pods = free[i] > 0 ? free[i] / set.gpus : 0;
    if (pods > 0) by_pods.emplace_back(-pods, begin + static_cast<int>(i));
  }
  std::sort(by_pods.begin(), by_pods.end());
  std::vector<int> slots;
  int64_t pods = 0;
  for (const auto& [negative_pods, slot] : by_pods) {
    if (pods >= set.count) break;
    slots.push_back(slot);
    pods -= negative_pods;
  }
  std::sort(slots.begin(), slots.end());
  return slots;
}

// When enough GPUs free up in `domain` for `set`, releasing the gangs there
// in order of expected end. Keeps the pods that fit as a running total, so
// the cost is one pass over the domain plus the pods of the gangs released.
std::optional<Candidate> Evaluate(
    int domain_index, const PodSetSpec& set, const Fleet& fleet,
    const std::vector<char>& taken,
    const std::function<GangPtr(const GangId&)>& find, absl::Time now) {
  if (set.gpus <= 0) return std::nullopt;
  const Fleet::Domain& domain = fleet.domains()[domain_index];
  const int begin = domain.node_begin;
  std::vector<int> free(domain.node_end - begin, -1);  // -1: not eligible
  std::vector<GangId> holders;
  int64_t capacity = 0;  // pods with every eligible GPU free
  int64_t pods = 0;      // pods that fit now
  for (int i = begin; i < domain.node_end; ++i) {
    const Fleet::Slot& slot = fleet.slots()[i];
    if (taken[i] || slot.node.state != NodeState::kReady ||
        !Acceptable(set, slot)) {
      continue;
    }
    free[i - begin] = slot.FreeGpus();
    capacity += slot.node.spec.gpu_count / set.gpus;
    pods += free[i - begin] / set.gpus;
    for (const auto& [id, count] : slot.gang_pods) holders.push_back(id);
  }
  if (capacity < set.count) return std::nullopt;
  std::sort(holders.begin(), holders.end());
  holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
  std::vector<std::pair<absl::Time, GangPtr>> ends;
  for (const GangId& id : holders) {
    if (GangPtr gang = find(id))
      ends.emplace_back(ExpectedEnd(*gang, now), gang);
  }
  std::sort(ends.begin(), ends.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first, a.second->id) < std::tie(b.first, b.second->id);
  });
  Candidate candidate{now, 0, domain_index, {}};
  for (const auto& [end, gang] : ends) {
    if (pods >= set.count) break;
    // A node's used GPUs are freed when the last gang on it ends; counting
    // a gang's share approximately: free what it holds on each node.
    for (const PodPlacement& pod : gang->placement) {
      const int slot = fleet.Find(pod.node) - begin;
      if (slot < 0 || slot >= static_cast<int>(free.size()) || free[slot] < 0) {
        continue;
      }
      const int released = static_cast<int>(pod.gpu_indices.size());
      pods += (free[slot] + released) / set.gpus - free[slot] / set.gpus;
      free[slot] += released;
      candidate.to_release += released;
    }
    candidate.start = end;
  }
  candidate.slots = FewestNodes(free, begin, set);
  return candidate;
}

std::vector<NodeId> NodesAt(const Fleet& fleet, const std::vector<int>& slots) {
  std::vector<NodeId> nodes;
  for (int slot : slots) nodes.push_back(fleet.slots()[slot].node.spec.id);
  return nodes;
}

}  // namespace

absl::Time ExpectedEnd(const Gang& gang, absl::Time now) {
  if (gang.spec.estimated_runtime <= absl::ZeroDuration() || !gang.admit_time) {
    return absl::InfiniteFuture();
  }
  return std::max(now, *gang.admit_time + gang.spec.estimated_runtime);
}

std::optional<Reservation> PlanReservation(
    const Gang& gang, const Fleet& fleet, const std::vector<char>& taken,
    const std::function<GangPtr(const GangId&)>& find, absl::Time now) {
  const PodSetSpec& set = LargestPodSet(gang.spec);
  // The constraint's level first; when no domain there could ever host it
  // (a PREFERRED gang larger than its level), the levels above it, up to
  // the whole fleet.
  std::optional<Candidate> best;
  for (int level = ReservationLevel(set, fleet); !best && level >= -1;
       --level) {
    const std::vector<int> domains =
        level < 0 ? std::vector<int>{0} : fleet.DomainsAtLevel(level);
    for (int domain : domains) {
      std::optional<Candidate> c =
          Evaluate(domain, set, fleet, taken, find, now);
      if (c && (!best || *c < *best)) best = c;
    }
  }
  if (!best) return std::nullopt;
  const Fleet::Domain& d = fleet.domains()[best->domain];
  return Reservation{gang.id,          best->domain,
                     d.path,           best->start,
                     best->to_release, NodesAt(fleet, best->slots)};
}

std::optional<Reservation> RefreshReservation(
    const Reservation& reservation, const Gang& gang, const Fleet& fleet,
    const std::vector<char>& taken,
    const std::function<GangPtr(const GangId&)>& find, absl::Time now) {
  std::optional<Candidate> again = Evaluate(
      reservation.domain, LargestPodSet(gang.spec), fleet, taken, find, now);
  if (!again) return std::nullopt;
  Reservation refreshed = reservation;
  refreshed.start = again->start;
  refreshed.gpus_to_release = again->to_release;
  refreshed.nodes = NodesAt(fleet, again->slots);
  return refreshed;
}

}  // namespace phalanx::core
