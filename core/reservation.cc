#include "core/reservation.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "absl/strings/string_view.h"
#include "core/bits.h"
#include "core/check.h"
#include "core/elastic.h"
#include "core/placement.h"

namespace phalanx::core {
namespace {

// The level a reservation covers first: the widest level a constrained pod
// set names (the node level reserves within the lowest level), or the whole
// fleet when no pod set is constrained.
int ReservationLevel(const GangSpec& spec, const Fleet& fleet) {
  const int depth = static_cast<int>(fleet.levels().size());
  int level = depth;
  bool constrained = false;
  for (const PodSetSpec& set : spec.pod_sets) {
    if (set.topology.mode == TopologyMode::kUnconstrained) continue;
    constrained = true;
    level = std::min(level, fleet.LevelIndex(set.topology.level));
  }
  if (!constrained || depth == 0) return -1;
  return std::min(level, depth - 1);
}

struct Candidate {
  absl::Time start;
  int64_t to_release;
  int domain;
  std::vector<int> slots;  // the nodes to hold (compared last, never tied)
  // GPU-seconds the held nodes stand idle until `start` (by estimates).
  double stranded = 0;
  bool operator<(const Candidate& o) const {
    return std::tie(start, to_release, domain) <
           std::tie(o.start, o.to_release, o.domain);
  }
};

// The idle capacity a reservation costs: the gang's GPUs waiting until its
// start plus what its held nodes strand until then. Infinite without
// estimates (then only the start order decides).
double Cost(const Candidate& c, int64_t gang_gpus, absl::Time now) {
  if (c.start == absl::InfiniteFuture()) {
    return std::numeric_limits<double>::infinity();
  }
  return absl::ToDoubleSeconds(c.start - now) * static_cast<double>(gang_gpus) +
         c.stranded;
}

// Whether `a` is the better reservation (see ReservationConfig).
bool Better(const Candidate& a, const Candidate& b, bool by_stranding,
            int64_t gang_gpus, absl::Time now) {
  if (by_stranding) {
    const double ca = Cost(a, gang_gpus, now);
    const double cb = Cost(b, gang_gpus, now);
    if (ca != cb) return ca < cb;
  }
  return a < b;
}

// What a domain offers the gang once the gangs holding its nodes end.
struct Outcome {
  enum Kind { kNever, kNow, kLater } kind = kNever;
  Candidate candidate;  // kLater
};

// The gangs holding eligible nodes of a domain, released tentatively from
// the fleet in order of expected end (then id), and allocated again on
// destruction (or when fewer are asked for).
class Projection {
 public:
  // A holder's record and its handle.
  struct Holder {
    const Gang* gang;
    GangHandle handle;
  };
  Projection(Fleet& fleet, std::vector<Holder> holders)
      : fleet_(fleet),
        holders_(std::move(holders)),
        version_(fleet.version()) {}
  Projection(const Projection&) = delete;
  Projection& operator=(const Projection&) = delete;
  ~Projection() {
    ReleaseFirst(0);
    fleet_.RestoreVersion(version_);  // as it was: caches stay valid
  }

  size_t size() const { return holders_.size(); }
  const Gang* holder(size_t i) const { return holders_[i].gang; }

  // Leaves exactly the first `k` holders released.
  void ReleaseFirst(size_t k) {
    while (released_ < k) {
      const Holder& h = holders_[released_++];
      fleet_.Release(*h.gang, h.handle, h.gang->placement);
    }
    while (released_ > k) {
      const Holder& h = holders_[--released_];
      PHALANX_CHECK(fleet_.Allocate(*h.gang, h.handle, h.gang->placement).ok());
    }
  }

 private:
  Fleet& fleet_;
  std::vector<Holder> holders_;
  const uint64_t version_;
  size_t released_ = 0;
};

// Free GPUs on the READY nodes of `domain` that are not taken (from the
// free index, less the taken slots there).
int64_t EligibleFreeGpus(const Fleet& fleet, int domain,
                         const std::vector<int>& taken_slots) {
  const FreeIndex& index = fleet.free_index();
  const Fleet::Domain& d = fleet.domains()[domain];
  int64_t free = 0;
  for (int gpus = 1; gpus <= index.max_gpus(); ++gpus) {
    free += gpus * index.Nodes(domain, index.any_model(), gpus);
  }
  for (auto it = std::lower_bound(taken_slots.begin(), taken_slots.end(),
                                  d.node_begin);
       it != taken_slots.end() && *it < d.node_end; ++it) {
    const Fleet::Slot& slot = fleet.slots()[*it];
    if (slot.node.state == NodeState::kReady) free -= slot.FreeGpus();
  }
  return free;
}

// When the gang could start in `domain_index`: the fewest holders (in order
// of expected end) whose release lets the placer place the whole gang
// inside the domain, on nodes not `taken`. Found by a galloping search
// over that count (releasing more never takes room away): O(log answer)
// placements restricted to the domain and O(answer) releases.
//
// `best`, when set, is the candidate to beat: releasing k holders offers
// (start, to_release) no earlier and no smaller than releasing fewer, so
// the search stops (kNever, as far as the caller can tell) once the count
// it still could find offers no better than `best`. A count whose released
// GPUs plus the free ones fall short of the gang's is not placed: it
// cannot fit. Neither shortcut changes which candidate wins.
Outcome Evaluate(int domain_index, const Gang& gang, Fleet& fleet,
                 const std::vector<char>& taken,
                 const std::vector<int>& taken_slots, const HolderLookup& find,
                 absl::Time now, int64_t eligible_free, const Candidate* best,
                 bool loans_leave_now) {
  auto release_time = [&gang, now, loans_leave_now](const Gang& holder) {
    return loans_leave_now ? ReleaseTime(holder, gang, now)
                           : ExpectedEnd(holder, now);
  };
  const Fleet::Domain& domain = fleet.domains()[domain_index];
  int64_t capacity = 0;  // healthy GPUs of eligible nodes
  for (int i = domain.node_begin; i < domain.node_end; ++i) {
    const Fleet::Slot& slot = fleet.slots()[i];
    if (taken[i] || slot.node.state != NodeState::kReady) continue;
    capacity +=
        slot.node.spec.gpu_count - CountOnes(slot.node.unhealthy_gpu_mask);
  }
  const int64_t need = gang.spec.TotalGpus();
  if (capacity < need) return {};
  // Each holder once (a gang spans several nodes), by the handle the
  // fleet stores; the sort below puts them in a total order (by expected
  // end, then id), so the order they are met in does not matter.
  std::vector<GangHandle> seen;
  for (int i = domain.node_begin; i < domain.node_end; ++i) {
    const Fleet::Slot& slot = fleet.slots()[i];
    if (taken[i] || slot.node.state != NodeState::kReady) continue;
    for (const Fleet::GangPods& on : slot.gang_pods) seen.push_back(on.gang);
  }
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  std::vector<std::pair<absl::Time, Projection::Holder>> ends;
  ends.reserve(seen.size());
  for (GangHandle handle : seen) {
    if (const Gang* holder = find(handle)) {
      ends.emplace_back(release_time(*holder),
                        Projection::Holder{holder, handle});
    }
  }
  std::sort(ends.begin(), ends.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first, a.second.gang->id) <
           std::tie(b.first, b.second.gang->id);
  });
  std::vector<Projection::Holder> holders;
  holders.reserve(ends.size());
  for (const auto& [end, holder] : ends) holders.push_back(holder);
  Projection projection(fleet, holders);

  // released[k]: GPUs the first k holders hold on eligible nodes here.
  std::vector<int64_t> released = {0};
  auto released_by = [&](size_t k) {
    while (released.size() <= k) {
      const Gang& holder = *holders[released.size() - 1].gang;
      int64_t gpus = released.back();
      for (const PodPlacement& pod : holder.placement) {
        const int slot = fleet.Find(pod.node);
        if (slot >= domain.node_begin && slot < domain.node_end &&
            !taken[slot]) {
          gpus += static_cast<int64_t>(pod.gpu_indices.size());
        }
      }
      released.push_back(gpus);
    }
    return released[k];
  };

  PlacementOptions options;
  options.within_domain = domain_index;
  options.node_allowed = [&taken](int slot) { return !taken[slot]; };
  options.restricted_slots = &taken_slots;
  auto place = [&](size_t k) {
    if (eligible_free + released_by(k) < need) return PlacementResult{};
    projection.ReleaseFirst(k);
    return PlaceGang(gang.spec, fleet, options);
  };
  if (place(0).placed) return {Outcome::kNow, {}};
  // Galloping search: 1, 2, 4, ... holders gone until the gang fits (the
  // answer is mostly a few gangs, so this costs O(answer) releases, not
  // O(holders)), then a binary search below the first count that fits.
  const size_t count = projection.size();
  if (count == 0) return {};  // nothing to wait for, and it does not fit
  // The most holders whose release could still beat `best`.
  size_t limit = count;
  if (best != nullptr) {
    for (size_t k = 1; k <= count; ++k) {
      if (!(Candidate{ends[k - 1].first, released_by(k), domain_index, {}} <
            *best)) {
        limit = k - 1;
        break;
      }
    }
  }
  PlacementResult placed;
  size_t lo = 1;  // the gang does not fit with fewer than lo gone
  size_t hi = 0;  // it fits with hi gone (0: not found yet)
  for (size_t k = 1; hi == 0; k = std::min(count, k * 2)) {
    if (lo > limit) return {};  // the answer could not beat `best`
    if (PlacementResult r = place(k); r.placed) {
      hi = k;
      placed = std::move(r);
    } else if (k == count) {
      return {};  // not even with the domain empty
    } else {
      lo = k + 1;
    }
  }
  while (lo < hi) {
    if (lo > limit) return {};
    const size_t mid = lo + (hi - lo) / 2;
    if (PlacementResult r = place(mid); r.placed) {
      hi = mid;
      placed = std::move(r);
    } else {
      lo = mid + 1;
    }
  }
  if (hi > limit) return {};
  // `placed` is the placement with the first `hi` holders gone.
  Candidate candidate{now, released_by(hi), domain_index, {}};
  for (size_t i = 0; i < hi; ++i) {
    candidate.start = std::max(candidate.start, ends[i].first);
  }
  for (const PodPlacement& pod : placed.pods) {
    candidate.slots.push_back(fleet.Find(pod.node));
  }
  std::sort(candidate.slots.begin(), candidate.slots.end());
  candidate.slots.erase(
      std::unique(candidate.slots.begin(), candidate.slots.end()),
      candidate.slots.end());
  // What the held nodes strand: with every holder back, each held node's
  // free GPUs idle from now, and a released holder's GPUs there from its
  // expected end, until the start.
  projection.ReleaseFirst(0);
  if (candidate.start != absl::InfiniteFuture()) {
    std::vector<char> held(fleet.slots().size(), 0);
    for (int slot : candidate.slots) {
      held[slot] = 1;
      candidate.stranded +=
          static_cast<double>(fleet.slots()[slot].FreeGpus()) *
          absl::ToDoubleSeconds(candidate.start - now);
    }
    for (size_t i = 0; i < hi; ++i) {
      const Gang& holder = *projection.holder(i);
      const double idle =
          absl::ToDoubleSeconds(candidate.start - release_time(holder));
      for (const PodPlacement& pod : holder.placement) {
        const int slot = fleet.Find(pod.node);
        if (slot >= 0 && held[slot]) {
          candidate.stranded +=
              static_cast<double>(pod.gpu_indices.size()) * idle;
        }
      }
    }
  }
  return {Outcome::kLater, std::move(candidate)};
}

std::vector<int> TakenSlots(const std::vector<char>& taken) {
  std::vector<int> slots;
  for (size_t i = 0; i < taken.size(); ++i) {
    if (taken[i]) slots.push_back(static_cast<int>(i));
  }
  return slots;
}

std::vector<NodeId> NodesAt(const Fleet& fleet, const std::vector<int>& slots) {
  std::vector<NodeId> nodes;
  for (int slot : slots) nodes.push_back(fleet.slots()[slot].node.spec.id);
  return nodes;
}

}  // namespace

absl::Time ReleaseTime(const Gang& holder, const Gang& reserving,
                       absl::Time now) {
  return MayTakeBack(reserving, holder) ? now : ExpectedEnd(holder, now);
}

bool MayTakeBack(const Gang& taker, const Gang& borrower) {
  return borrower.on_loan && borrower.spec.priority <= taker.spec.priority;
}

absl::Time ExpectedEnd(const Gang& gang, absl::Time now) {
  if (gang.spec.estimated_runtime <= absl::ZeroDuration() || !gang.admit_time) {
    return absl::InfiniteFuture();
  }
  if (IsElastic(gang.spec)) {
    return std::max(now, ElasticEnd(gang, gang.spec.estimated_runtime));
  }
  return std::max(now, *gang.admit_time + gang.spec.estimated_runtime);
}

std::optional<Reservation> PlanReservation(
    const Gang& gang, Fleet& fleet, const std::vector<char>& taken,
    const HolderLookup& find, absl::Time now, absl::Time earliest_end,
    bool by_stranding, bool loans_leave_now) {
  const std::vector<int> taken_slots = TakenSlots(taken);
  const int64_t need = gang.spec.TotalGpus();
  const absl::Time start_floor = std::max(now, earliest_end);
  // The constraint's level first; when no domain there could ever host the
  // gang (a PREFERRED gang larger than its level, pod sets that fit no one
  // rack together), the levels above it, up to the whole fleet.
  std::optional<Candidate> best;
  for (int level = ReservationLevel(gang.spec, fleet); !best && level >= -1;
       --level) {
    const std::vector<int> domains =
        level < 0 ? std::vector<int>{0} : fleet.DomainsAtLevel(level);
    // Domains by the least they must release (need less their free GPUs),
    // so a good candidate comes early and bounds the rest: a domain whose
    // bound cannot beat it is skipped unless the gang could fit there now
    // (which would end the plan). The winner is the least candidate, so
    // the order of visits does not change it.
    std::vector<std::tuple<int64_t, int, int64_t>>
        order;  // bound, domain, free
    order.reserve(domains.size());
    for (int domain : domains) {
      const int64_t free = EligibleFreeGpus(fleet, domain, taken_slots);
      order.emplace_back(std::max<int64_t>(0, need - free), domain, free);
    }
    std::sort(order.begin(), order.end());
    // The bound orders candidates by (start, to_release): it prunes only
    // when that order picks the winner, not when stranding does.
    for (const auto& [bound, domain, free] : order) {
      const Candidate* to_beat = best && !by_stranding ? &*best : nullptr;
      if (to_beat != nullptr && free < need &&
          !(Candidate{start_floor, bound, domain, {}} < *to_beat)) {
        continue;
      }
      Outcome outcome = Evaluate(domain, gang, fleet, taken, taken_slots, find,
                                 now, free, to_beat, loans_leave_now);
      // It fits now: nothing is to be waited for, and holding nodes for it
      // would only keep others out.
      if (outcome.kind == Outcome::kNow) return std::nullopt;
      if (outcome.kind == Outcome::kLater &&
          (!best ||
           Better(outcome.candidate, *best, by_stranding, need, now))) {
        best = std::move(outcome.candidate);
      }
    }
  }
  if (!best) return std::nullopt;
  const Fleet::Domain& d = fleet.domains()[best->domain];
  return Reservation{gang.id,          best->domain,
                     d.path,           best->start,
                     best->to_release, NodesAt(fleet, best->slots)};
}

std::optional<Reservation> RefreshReservation(const Reservation& reservation,
                                              const Gang& gang, Fleet& fleet,
                                              const std::vector<char>& taken,
                                              const HolderLookup& find,
                                              absl::Time now) {
  if (reservation.domain >= static_cast<int>(fleet.domains().size()) ||
      fleet.domains()[reservation.domain].path != reservation.path) {
    return std::nullopt;
  }
  const std::vector<int> taken_slots = TakenSlots(taken);
  Outcome again = Evaluate(
      reservation.domain, gang, fleet, taken, taken_slots, find, now,
      EligibleFreeGpus(fleet, reservation.domain, taken_slots), nullptr,
      /*loans_leave_now=*/true);
  if (again.kind != Outcome::kLater) return std::nullopt;
  Reservation refreshed = reservation;
  refreshed.start = again.candidate.start;
  refreshed.gpus_to_release = again.candidate.to_release;
  refreshed.nodes = NodesAt(fleet, again.candidate.slots);
  return refreshed;
}

}  // namespace phalanx::core
