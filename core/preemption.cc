// Preemption (docs/design.md §4 step 6). A gang that does not fit may preempt
// lower-priority gangs of its own queue, or reclaim its nominal quota from
// gangs of sibling queues that borrow. Victims are chosen by the work they
// would lose (GPU-seconds since their last checkpoint), gangs younger than
// min_runtime are spared, victims that turn out unnecessary are dropped, and
// no preemption throws away more GPU-seconds than the preemptor would wait
// for capacity to free up on its own (so one that is due soon just waits).
// Two optional limits: only gangs of a priority tier preempt
// (min_preemptor_priority), and only victims that checkpointed recently are
// taken (max_victim_loss).
// Victims go to PREEMPTING for a grace period while their GPUs stay held for
// the preemptor.
//
// No loops: a victim has strictly lower priority than its preemptor in the
// same queue, or belongs to a queue above its nominal quota while the
// preemptor's queue stays within its own — so a victim can never preempt its
// preemptor back.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/check.h"
#include "core/saturating.h"
#include "core/scheduler.h"

namespace phalanx::core {
namespace {

int64_t HeldGpusOf(const Gang& gang) {
  int64_t gpus = 0;
  for (const PodPlacement& pod : gang.placement) gpus += pod.gpu_indices.size();
  return gpus;
}

// Since when the gang's work would be lost: its last checkpoint of this
// run, else its admission.
absl::Time LastSaved(const Gang& gang, absl::Time now) {
  absl::Time since = gang.admit_time.value_or(now);
  if (gang.last_checkpoint_time && *gang.last_checkpoint_time > since) {
    since = *gang.last_checkpoint_time;
  }
  return since;
}

// GPU-seconds of work the gang would lose now.
double LostWork(const Gang& gang, absl::Time now) {
  return absl::ToDoubleSeconds(now - LastSaved(gang, now)) * HeldGpusOf(gang);
}

int64_t Lookup(const std::map<std::string, int64_t>& map,
               const std::string& key) {
  auto it = map.find(key);
  return it == map.end() ? 0 : it->second;
}

}  // namespace

Scheduler::VictimRules Scheduler::VictimRulesFor(const Gang& preemptor) const {
  VictimRules rules{preemptor.spec.queue, preemptor.spec.priority, {}};
  // Reclaim: the preemptor's queue stays within nominal quota after
  // admission; the victim's queue is above its nominal quota.
  const Queue& mine = queues_.at(preemptor.spec.queue);
  if (mine.parent.empty() || mine.nominal_gpus.empty()) return rules;
  int64_t total_held = 0;
  int64_t total_nominal = 0;
  for (const auto& [model, gpus] : Held(mine.name)) total_held += gpus;
  for (const auto& [model, gpus] : mine.nominal_gpus) {
    total_nominal = SaturatingAdd(total_nominal, gpus);
  }
  if (total_held + preemptor.spec.TotalGpus() > total_nominal) return rules;
  for (const auto& [name, theirs] : queues_) {
    if (name == mine.name || theirs.parent != mine.parent ||
        theirs.nominal_gpus.empty()) {
      continue;
    }
    for (const auto& [model, gpus] : Held(name)) {
      if (gpus > Lookup(theirs.nominal_gpus, model)) {
        rules.reclaim_from.insert(name);
        break;
      }
    }
  }
  return rules;
}

bool Scheduler::IsVictim(const Gang& victim, const VictimRules& rules) {
  if (victim.state != GangState::kAdmitted &&
      victim.state != GangState::kRunning) {
    return false;
  }
  if (!victim.admit_time) return false;
  if (victim.spec.queue == rules.queue) {
    return victim.spec.priority < rules.priority;
  }
  return rules.reclaim_from.contains(victim.spec.queue);
}

void Scheduler::SetAside(const Gang& victim) {
  fleet_.Release(victim, victim.placement);
  Charge(victim, -1);
}

void Scheduler::PutBack(const Gang& victim) {
  PHALANX_CHECK(fleet_.Allocate(victim, victim.placement).ok());
  Charge(victim, +1);
}

bool Scheduler::FitsAsIs(const GangPtr& gang) {
  const Queue& queue = queues_.at(gang->spec.queue);
  PlacementOptions options = OptionsFor(queue);
  options.node_allowed = [this, &gang](int slot) {
    return !HeldForOther(slot, gang->id);
  };
  options.restricted_slots = &RestrictedSlots();
  return PlaceGang(gang->spec, fleet_, options).placed;
}

bool Scheduler::FitsWithout(const GangPtr& gang,
                            const std::vector<GangPtr>& victims) {
  const uint64_t version = fleet_.version();
  for (const GangPtr& victim : victims) SetAside(*victim);
  const bool fits = FitsAsIs(gang);
  for (const GangPtr& victim : victims) PutBack(*victim);
  fleet_.RestoreVersion(version);  // every victim is back as it was
  return fits;
}

Scheduler::NaturalStart Scheduler::WhenItFits(const Gang& gang,
                                              absl::Time now) const {
  Fleet& fleet = const_cast<Fleet&>(fleet_);  // placement restores it
  // No running gang is expected to end before the earliest of their ends:
  // the bound Reserve gives the plan too (it skips domains that cannot
  // win, never changing which one does).
  const absl::Time earliest_end =
      active_ends_.empty() ? absl::InfiniteFuture() : *active_ends_.begin();
  // The answer is a function of the placement shape, the fleet (its
  // version), `now` and that bound alone: preemptors of one shape in a
  // cycle ask once.
  BudgetMemo& memo = budget_memo_;
  if (memo.fleet_version != fleet_.version() || memo.now != now ||
      memo.earliest_end != earliest_end) {
    memo = BudgetMemo{fleet_.version(), now, earliest_end, {}};
  }
  auto [it, fresh] = memo.starts.try_emplace(PlacementShapeKey(gang.spec));
  NaturalStart& answer = it->second;
  if (!fresh) return answer;
  // Kept out only by reservations or holds: it is about to fit.
  if (PlaceGang(gang.spec, fleet).placed) {
    answer.fits_now = true;
    return answer;
  }
  const std::vector<char> none(fleet_.slots().size());
  // PlanReservation releases gangs tentatively and restores them.
  const std::optional<Reservation> natural = PlanReservation(
      gang, fleet, none, [this](const GangId& id) { return PeekGang(id); }, now,
      earliest_end);
  if (natural) answer.start = natural->start;
  return answer;
}

double Scheduler::PreemptionBudget(const Gang& gang, absl::Time now) const {
  const NaturalStart natural = WhenItFits(gang, now);
  if (natural.fits_now) return 0;
  const absl::Duration wait =
      natural.start ? *natural.start - now : absl::InfiniteDuration();
  if (wait <= config_.preemption.grace_period) return 0;  // about to fit
  return absl::ToDoubleSeconds(std::min(wait, config_.preemption.horizon)) *
         static_cast<double>(gang.spec.TotalGpus());
}

std::optional<std::string> Scheduler::TryPreempt(const GangPtr& gang,
                                                 absl::Time now) {
  const PreemptionConfig& config = config_.preemption;
  if (!config.enabled || held_for_.contains(gang->id) ||
      gang->spec.priority < config.min_preemptor_priority) {
    return std::nullopt;
  }
  // 1. Candidates, cheapest loss first (ties: lower priority, then id).
  //    Only the preemptor's queue (its lower priorities) and the queues it
  //    reclaims from hold victims; each priority there is walked in order
  //    of admission, so the first victim min_runtime still guards ends the
  //    walk (every later one is guarded longer) and sets the wake-up.
  const VictimRules rules = VictimRulesFor(*gang);
  std::vector<std::pair<double, GangPtr>> candidates;
  auto collect = [&](const AdmissionOrder& admitted) {
    for (const auto& [admit_time, id] : admitted) {
      const GangPtr& other = gangs_.at(id);
      if (!IsVictim(*other, rules)) continue;
      // The min-runtime guard: once it passes, try again.
      const absl::Time protected_until =
          *other->admit_time + config_.preemption.min_runtime;
      if (now < protected_until) {
        wakeup_ = std::min(wakeup_, protected_until);
        return;
      }
      // Checkpoint-aware: only a victim that checkpointed (or started)
      // recently is cheap enough to take.
      if (config.max_victim_loss > absl::ZeroDuration() &&
          now - LastSaved(*other, now) > config.max_victim_loss) {
        continue;
      }
      candidates.emplace_back(LostWork(*other, now), other);
    }
  };
  if (auto mine = active_by_queue_.find(rules.queue);
      mine != active_by_queue_.end()) {
    for (const auto& [priority, admitted] : mine->second) {
      if (priority >= rules.priority) break;
      collect(admitted);
    }
  }
  for (const QueueName& queue : rules.reclaim_from) {
    const auto theirs = active_by_queue_.find(queue);
    if (theirs == active_by_queue_.end()) continue;
    for (const auto& [priority, admitted] : theirs->second) collect(admitted);
  }
  if (candidates.empty()) return std::nullopt;
  // 2. Add victims until the gang fits, within the budget: never throw away
  //    more GPU-seconds than the gang would otherwise wait.
  const double budget = PreemptionBudget(*gang, now);
  //    With no loss negative, the walk below stops at the first candidate
  //    that costs more than the whole budget: those are never taken, and
  //    need not be sorted.
  if (std::all_of(candidates.begin(), candidates.end(),
                  [](const auto& c) { return c.first >= 0; })) {
    std::erase_if(candidates,
                  [budget](const auto& c) { return c.first > budget; });
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const auto& a, const auto& b) {
              return std::tie(a.first, a.second->spec.priority, a.second->id) <
                     std::tie(b.first, b.second->spec.priority, b.second->id);
            });
  //    Each victim is set aside once and all are put back at the end (the
  //    fleet with the first k set aside is the same however it got there).
  std::vector<GangPtr> victims;
  bool fits = false;
  double lost = 0;
  const uint64_t version = fleet_.version();
  for (const auto& [cost, candidate] : candidates) {
    if ((lost += cost) > budget) break;
    victims.push_back(candidate);
    SetAside(*candidate);
    if ((fits = FitsAsIs(gang))) break;
  }
  for (const GangPtr& victim : victims) PutBack(*victim);
  fleet_.RestoreVersion(version);  // every victim is back as it was
  if (!fits) return std::nullopt;
  // 3. Drop victims that turn out unnecessary, most expensive first.
  for (int i = static_cast<int>(victims.size()) - 2; i >= 0; --i) {
    std::vector<GangPtr> fewer = victims;
    fewer.erase(fewer.begin() + i);
    if (FitsWithout(gang, fewer)) victims = std::move(fewer);
  }
  // 4. Victims go to PREEMPTING; their nodes are held for the preemptor.
  std::vector<std::string> names;
  for (const GangPtr& victim : victims) {
    Gang preempting = *victim;
    preempting.state = GangState::kPreempting;
    preempting.reason = absl::StrCat("PREEMPTED by ", gang->id.value());
    const absl::Time deadline = now + config_.preemption.grace_period;
    preempting.grace_deadline = deadline;
    timers_.insert({deadline, victim->id});
    preemptor_of_[victim->id] = Preemption{gang->id, deadline};
    for (const PodPlacement& pod : victim->placement) {
      held_for_[gang->id].insert(pod.node);
    }
    ForgetHeldSlots();
    names.push_back(victim->id.value());
    Transition(std::move(preempting), EventType::kPreempting, now);
  }
  return absl::StrCat("PREEMPTING: waiting for ", absl::StrJoin(names, ", "),
                      " to stop");
}

std::string Scheduler::PreemptedReason(const GangId& victim) const {
  const auto it = preemptor_of_.find(victim);
  if (it == preemptor_of_.end() || it->second.preemptor.empty()) {
    return "REQUEUED: preempted";
  }
  return absl::StrCat("REQUEUED: preempted by ", it->second.preemptor.value());
}

void Scheduler::FinishPreemption(Gang victim, absl::Time now) {
  victim.reason = PreemptedReason(victim.id);
  ReleaseCapacity(victim, now);
  victim.state = GangState::kPending;
  Transition(std::move(victim), EventType::kRequeued, now);
}

bool Scheduler::HeldForOther(int slot, const GangId& gang) const {
  if (held_for_.empty()) return false;
  if (held_slots_.size() != fleet_.slots().size()) {
    held_slots_.assign(fleet_.slots().size(), {});
    for (const auto& [preemptor, nodes] : held_for_) {
      for (const NodeId& node : nodes) {
        const int held = fleet_.Find(node);
        if (held >= 0) held_slots_[held].push_back(preemptor);
      }
    }
  }
  for (const GangId& preemptor : held_slots_[slot]) {
    if (preemptor != gang) return true;
  }
  return false;
}

const std::vector<int>& Scheduler::RestrictedSlots() const {
  if (restricted_slots_) return *restricted_slots_;
  std::vector<int> slots;
  for (const Reservation& reservation : reservations_) {
    for (int slot : ReservedSlots(reservation)) slots.push_back(slot);
  }
  for (const auto& [preemptor, nodes] : held_for_) {
    for (const NodeId& node : nodes) {
      if (const int slot = fleet_.Find(node); slot >= 0) slots.push_back(slot);
    }
  }
  std::sort(slots.begin(), slots.end());
  slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
  return restricted_slots_.emplace(std::move(slots));
}

void Scheduler::DropHolds(const GangId& preemptor) {
  if (held_for_.erase(preemptor) == 0) return;
  ForgetHeldSlots();
  BumpEpoch();  // the held nodes are free for others again
}

}  // namespace phalanx::core
