#include "core/resizer.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "core/elastic.h"
#include "core/plan.h"
#include "core/planner.h"
#include "core/reservation.h"

namespace phalanx::core {

void Resizer::GrowRunning(int64_t free_gpus) {
  if (s_.elastic_.empty() || free_gpus <= 0) return;
  SchedulerState::GrowMemo& memo = s_.grow_memo_;
  if (memo.epoch == s_.capacity_epoch_ &&
      memo.elastic_version == s_.elastic_version_ && now_ < memo.next_due) {
    return;  // nothing that growth reads has changed
  }
  const absl::Duration interval = s_.config_.elastic.grow_interval;
  absl::Time next_due = absl::InfiniteFuture();
  std::vector<GangPtr> due;
  for (const GangId& id : s_.elastic_) {
    GangPtr gang = s_.gangs_.Find(id);
    if (gang == nullptr || gang->state != GangState::kRunning ||
        !gang->admit_time) {
      continue;
    }
    const absl::Time since =
        std::max(*gang->admit_time,
                 gang->last_resize_time.value_or(absl::InfinitePast()));
    if (now_ < since + interval) {
      next_due = std::min(next_due, since + interval);
      continue;
    }
    const int set = ElasticSetOf(gang->spec);
    if (HeldCount(*gang, set) >= gang->spec.pod_sets[set].count) continue;
    due.push_back(std::move(gang));
  }
  std::sort(due.begin(), due.end(), [](const GangPtr& a, const GangPtr& b) {
    return std::tuple(-a->spec.priority, *a->admit_time, a->id) <
           std::tuple(-b->spec.priority, *b->admit_time, b->id);
  });
  bool grew = false;
  for (const GangPtr& gang : due) grew |= Grow(gang);
  memo = grew ? SchedulerState::GrowMemo{}
              : SchedulerState::GrowMemo{s_.capacity_epoch_,
                                         s_.elastic_version_, next_due};
}

bool Resizer::Grow(const GangPtr& gang) {
  const Queue* queue = s_.quotas_.FindQueue(gang->spec.queue);
  if (queue == nullptr || queue->held) return false;
  const PodSetSpec& elastic = gang->spec.pod_sets[ElasticSetOf(gang->spec)];
  const int step = SizeStepOf(elastic);
  const int steps =
      (elastic.count - HeldCount(*gang, ElasticSetOf(gang->spec))) / step;
  if (steps <= 0) return false;
  // The most steps that fit, assuming fewer fit whenever more do.
  std::vector<PodPlacement> added = PlaceDelta(*gang, steps * step);
  int lo = 0;
  int hi = added.empty() ? steps - 1 : 0;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    std::vector<PodPlacement> tried = PlaceDelta(*gang, mid * step);
    if (tried.empty()) {
      hi = mid - 1;
    } else {
      added = std::move(tried);
      lo = mid;
    }
  }
  if (added.empty()) return false;
  std::vector<PodPlacement> pods = gang->placement;
  pods.insert(pods.end(), added.begin(), added.end());
  s_.Resize(*gang, std::move(pods), now_);
  return true;
}

std::optional<int> Resizer::DomainOfSet(const Gang& gang, int set) const {
  const PodSetSpec& spec = gang.spec.pod_sets[set];
  const Fleet& fleet = s_.fleet_;
  const int level = fleet.LevelIndex(spec.topology.level);
  if (spec.topology.mode == TopologyMode::kUnconstrained || level < 0 ||
      level >= static_cast<int>(fleet.levels().size())) {
    return std::nullopt;
  }
  for (const PodPlacement& pod : gang.placement) {
    if (pod.pod_set != spec.name) continue;
    const int slot = fleet.Find(pod.node);
    for (int domain : fleet.DomainsAtLevel(level)) {
      const Fleet::Domain& d = fleet.domains()[domain];
      if (slot >= d.node_begin && slot < d.node_end) return domain;
    }
  }
  return std::nullopt;
}

std::vector<PodPlacement> Resizer::PlaceDelta(const Gang& gang, int count) {
  const int set = ElasticSetOf(gang.spec);
  const PodSetSpec& elastic = gang.spec.pod_sets[set];
  Fleet& fleet = s_.fleet_;
  GangSpec delta;
  delta.queue = gang.spec.queue;
  delta.priority = gang.spec.priority;
  delta.allow_mixed_models = gang.spec.allow_mixed_models;
  PodSetSpec& pods = delta.pod_sets.emplace_back(elastic);
  pods.count = count;
  pods.min_count = 0;
  pods.group.clear();
  if (!gang.spec.allow_mixed_models && !gang.placement.empty()) {
    const int slot = fleet.Find(gang.placement.front().node);
    pods.gpu_models = {fleet.slots()[slot].node.spec.gpu_model};
  }
  // Only capacity no one else may claim: not reserved, not held for a
  // preemptor, not planned for a pending gang by a binding plan.
  const Queue& queue = s_.quotas_.queues().at(gang.spec.queue);
  PlacementOptions options = s_.OptionsFor(queue);
  std::optional<PlanRoom> room;
  if (s_.config_.planning.binding && !s_.plan_.BindingSlots().empty()) {
    room.emplace(s_.plan_, 0, gang.spec.priority, now_, ExpectedEnd(gang, now_),
                 /*behind_too=*/true);
  }
  options.node_allowed = [this, &gang, &room](int slot) {
    return s_.reservations_.AtSlot(slot) == nullptr &&
           !s_.preemptions_.HeldForOther(slot, gang.id, s_.fleet_) &&
           (!room || room->Allows(slot));
  };
  options.restricted_slots = &s_.RestrictedSlots();
  const std::optional<int> domain = DomainOfSet(gang, set);
  PlacementResult placed;
  if (domain) {
    options.within_domain = *domain;
    placed = PlaceGang(delta, fleet, options);
    options.within_domain = 0;
  }
  if (!placed.placed && elastic.topology.mode != TopologyMode::kRequired) {
    placed = PlaceGang(delta, fleet, options);
  }
  if (!placed.placed || (room && !room->Excess(placed.pods, fleet).empty())) {
    return {};
  }
  const int held = HeldCount(gang, set);
  for (PodPlacement& pod : placed.pods) pod.index += held;
  return std::move(placed.pods);
}

GangPtr Resizer::FinishShrink(Gang gang) {
  const PodSetSpec& elastic = gang.spec.pod_sets[ElasticSetOf(gang.spec)];
  std::vector<PodPlacement> kept;
  for (const PodPlacement& pod : gang.placement) {
    if (pod.pod_set != elastic.name || pod.index < gang.shrink_to) {
      kept.push_back(pod);
    }
  }
  gang.state = GangState::kRunning;
  gang.reason_code = ReasonCode::kNone;
  gang.reason.clear();
  return s_.Resize(std::move(gang), std::move(kept), now_);
}

}  // namespace phalanx::core
