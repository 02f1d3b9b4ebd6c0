#include "core/reservation.h"

#include <algorithm>
#include <map>
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
  bool operator<(const Candidate& o) const {
    return std::tie(start, to_release, domain) <
           std::tie(o.start, o.to_release, o.domain);
  }
};

// When enough GPUs free up in `domain` for `set`, releasing the gangs there
// in order of expected end.
std::optional<Candidate> Evaluate(
    int domain_index, const PodSetSpec& set, const Fleet& fleet,
    const std::vector<char>& taken,
    const std::function<GangPtr(const GangId&)>& find, absl::Time now) {
  const Fleet::Domain& domain = fleet.domains()[domain_index];
  std::map<int, int> free;  // slot -> free GPUs (eligible nodes only)
  std::map<GangId, std::vector<std::pair<int, int>>> held;  // gang -> slot,gpus
  int64_t capacity_total = 0;
  for (int i = domain.node_begin; i < domain.node_end; ++i) {
    const Fleet::Slot& slot = fleet.slots()[i];
    if (taken[i] || slot.node.state != NodeState::kReady ||
        !Acceptable(set, slot)) {
      continue;
    }
    free[i] = slot.FreeGpus();
    capacity_total += set.gpus > 0 ? slot.node.spec.gpu_count / set.gpus : 0;
    for (const auto& [id, pods] : slot.gang_pods) {
      held[id].emplace_back(i, slot.node.spec.gpu_count - slot.FreeGpus());
    }
  }
  if (set.gpus <= 0 || capacity_total < set.count) return std::nullopt;
  auto pods = [&]() {
    int64_t total = 0;
    for (const auto& [slot, gpus] : free) total += gpus / set.gpus;
    return total;
  };
  std::vector<std::pair<absl::Time, GangId>> ends;
  for (const auto& [id, slots] : held) {
    GangPtr gang = find(id);
    ends.emplace_back(gang ? ExpectedEnd(*gang, now) : absl::InfiniteFuture(),
                      id);
  }
  std::sort(ends.begin(), ends.end());
  Candidate candidate{now, 0, domain_index};
  for (const auto& [end, id] : ends) {
    if (pods() >= set.count) break;
    // A node's used GPUs are freed when the last gang on it ends; counting
    // a gang's share approximately: free what it holds on each node.
    GangPtr gang = find(id);
    for (const PodPlacement& pod : gang->placement) {
      const int slot = fleet.Find(pod.node);
      auto it = free.find(slot);
      if (it == free.end()) continue;
      it->second += static_cast<int>(pod.gpu_indices.size());
      candidate.to_release += static_cast<int64_t>(pod.gpu_indices.size());
    }
    candidate.start = end;
  }
  return candidate;
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
  return Reservation{gang.id, best->domain, d.path, best->start,
                     best->to_release};
}

}  // namespace phalanx::core
