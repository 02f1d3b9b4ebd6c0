#include "core/preemptor.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/check.h"

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

}  // namespace

Preemptor::VictimRules Preemptor::RulesFor(const Gang& preemptor) const {
  // Reclaim: the preemptor's queue stays within nominal quota after
  // admission; the victim's queue is above its nominal quota.
  const Queue& mine = s_.quotas_.queues().at(preemptor.spec.queue);
  return VictimRules{
      preemptor.spec.queue, preemptor.spec.priority,
      s_.quotas_.ReclaimableFrom(mine, preemptor.spec.TotalGpus())};
}

bool Preemptor::IsVictim(const Gang& victim, const VictimRules& rules) {
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

void Preemptor::SetAside(const Gang& victim) {
  s_.fleet_.Release(victim, s_.gangs_.HandleOf(victim.id), victim.placement);
  s_.quotas_.Charge(victim, s_.fleet_, -1);
}

void Preemptor::PutBack(const Gang& victim) {
  PHALANX_CHECK(
      s_.fleet_
          .Allocate(victim, s_.gangs_.HandleOf(victim.id), victim.placement)
          .ok());
  s_.quotas_.Charge(victim, s_.fleet_, +1);
}

bool Preemptor::FitsAsIs(const GangPtr& gang) {
  const Queue& queue = s_.quotas_.queues().at(gang->spec.queue);
  PlacementOptions options = s_.OptionsFor(queue);
  const PreemptionBook& holds = s_.preemptions_;
  const Fleet& fleet = s_.fleet_;
  options.node_allowed = [&holds, &fleet, &gang](int slot) {
    return !holds.HeldForOther(slot, gang->id, fleet);
  };
  options.restricted_slots = &s_.RestrictedSlots();
  return PlaceGang(gang->spec, s_.fleet_, options).placed;
}

bool Preemptor::FitsWithout(const GangPtr& gang,
                            const std::vector<GangPtr>& victims) {
  const uint64_t version = s_.fleet_.version();
  for (const GangPtr& victim : victims) SetAside(*victim);
  const bool fits = FitsAsIs(gang);
  for (const GangPtr& victim : victims) PutBack(*victim);
  s_.fleet_.RestoreVersion(version);  // every victim is back as it was
  return fits;
}

double Preemptor::Budget(const Gang& gang) {
  const FitCache::NaturalStart natural =
      s_.fits_.WhenItFits(gang, s_.fleet_, s_.gangs_, now_);
  if (natural.fits_now) return 0;
  const absl::Duration wait =
      natural.start ? *natural.start - now_ : absl::InfiniteDuration();
  const PreemptionConfig& config = s_.config_.preemption;
  if (wait <= config.grace_period) return 0;  // about to fit
  return absl::ToDoubleSeconds(std::min(wait, config.horizon)) *
         static_cast<double>(gang.spec.TotalGpus());
}

// Only the preemptor's queue (its lower priorities) and the queues it
// reclaims from hold victims; each priority there is walked in order of
// admission, so the first victim min_runtime still guards ends the walk
// (every later one is guarded longer) and sets the wake-up.
std::vector<std::pair<double, GangPtr>> Preemptor::Candidates(
    const VictimRules& rules) {
  const PreemptionConfig& config = s_.config_.preemption;
  std::vector<std::pair<double, GangPtr>> candidates;
  auto collect = [&](const GangTable::AdmissionOrder& admitted) {
    for (const auto& [admit_time, id] : admitted) {
      const GangPtr& other = s_.gangs_.At(id);
      if (!IsVictim(*other, rules)) continue;
      // The min-runtime guard: once it passes, try again.
      const absl::Time protected_until =
          *other->admit_time + config.min_runtime;
      if (now_ < protected_until) {
        s_.preemptions_.WakeAt(protected_until);
        return;
      }
      // Checkpoint-aware: only a victim that checkpointed (or started)
      // recently is cheap enough to take.
      if (config.max_victim_loss > absl::ZeroDuration() &&
          now_ - LastSaved(*other, now_) > config.max_victim_loss) {
        continue;
      }
      candidates.emplace_back(LostWork(*other, now_), other);
    }
  };
  if (const auto* mine = s_.gangs_.ActiveIn(rules.queue)) {
    for (const auto& [priority, admitted] : *mine) {
      if (priority >= rules.priority) break;
      collect(admitted);
    }
  }
  for (const QueueName& queue : rules.reclaim_from) {
    const auto* theirs = s_.gangs_.ActiveIn(queue);
    if (theirs == nullptr) continue;
    for (const auto& [priority, admitted] : *theirs) collect(admitted);
  }
  return candidates;
}

std::optional<std::string> Preemptor::TryPreempt(const GangPtr& gang) {
  const PreemptionConfig& config = s_.config_.preemption;
  if (!config.enabled || s_.preemptions_.HoldsFor(gang->id) ||
      gang->spec.priority < config.min_preemptor_priority) {
    return std::nullopt;
  }
  // 1. Candidates, cheapest loss first (ties: lower priority, then id).
  std::vector<std::pair<double, GangPtr>> candidates =
      Candidates(RulesFor(*gang));
  if (candidates.empty()) return std::nullopt;
  // 2. Add victims until the gang fits, within the budget: never throw away
  //    more GPU-seconds than the gang would otherwise wait.
  const double budget = Budget(*gang);
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
  const uint64_t version = s_.fleet_.version();
  for (const auto& [cost, candidate] : candidates) {
    if ((lost += cost) > budget) break;
    victims.push_back(candidate);
    SetAside(*candidate);
    if ((fits = FitsAsIs(gang))) break;
  }
  for (const GangPtr& victim : victims) PutBack(*victim);
  s_.fleet_.RestoreVersion(version);  // every victim is back as it was
  if (!fits) return std::nullopt;
  // 3. Drop victims that turn out unnecessary, most expensive first.
  for (int i = static_cast<int>(victims.size()) - 2; i >= 0; --i) {
    std::vector<GangPtr> fewer = victims;
    fewer.erase(fewer.begin() + i);
    if (FitsWithout(gang, fewer)) victims = std::move(fewer);
  }
  // 4. Victims go to PREEMPTING; their nodes are held for the preemptor.
  const std::vector<std::string> names = Start(gang, victims);
  return absl::StrCat("PREEMPTING: waiting for ", absl::StrJoin(names, ", "),
                      " to stop");
}

std::vector<std::string> Preemptor::Start(const GangPtr& gang,
                                          const std::vector<GangPtr>& victims) {
  std::vector<std::string> names;
  for (const GangPtr& victim : victims) {
    Gang preempting = *victim;
    preempting.state = GangState::kPreempting;
    preempting.reason_code = ReasonCode::kPreempted;
    preempting.reason = absl::StrCat("PREEMPTED by ", gang->id.value());
    const absl::Time deadline = now_ + s_.config_.preemption.grace_period;
    preempting.grace_deadline = deadline;
    s_.deadlines_.AddGangTimer(deadline, victim->id);
    s_.preemptions_.AddVictim(victim->id, gang->id, deadline);
    for (const PodPlacement& pod : victim->placement) {
      s_.preemptions_.Hold(gang->id, pod.node);
    }
    s_.fits_.ForgetRestricted();
    names.push_back(victim->id.value());
    s_.Transition(std::move(preempting), EventType::kPreempting, now_);
  }
  return names;
}

}  // namespace phalanx::core
