#include "core/preemptor.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/check.h"
#include "core/elastic.h"
#include "core/reservation.h"

namespace phalanx::core {
namespace {

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
  return absl::ToDoubleSeconds(now - LastSaved(gang, now)) * PlacedGpus(gang);
}

}  // namespace

Preemptor::VictimRules Preemptor::RulesFor(const Gang& preemptor) const {
  // Reclaim: the preemptor's queue stays within nominal quota after
  // admission; the victim's queue is above its nominal quota.
  const Queue& mine = s_.quotas_.queues().at(preemptor.spec.queue);
  return VictimRules{preemptor.spec.queue, preemptor.spec.priority,
                     s_.quotas_.ReclaimableFrom(
                         mine, MinimumSpec(preemptor.spec).TotalGpus())};
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

std::vector<PodPlacement> Preemptor::Released(const Victim& victim) {
  const Gang& gang = *victim.gang;
  if (victim.keep <= 0) return gang.placement;
  const std::string& name = gang.spec.pod_sets[ElasticSetOf(gang.spec)].name;
  std::vector<PodPlacement> released;
  for (const PodPlacement& pod : gang.placement) {
    if (pod.pod_set == name && pod.index >= victim.keep) {
      released.push_back(pod);
    }
  }
  return released;
}

void Preemptor::SetAside(const Victim& victim) {
  Gang part = *victim.gang;
  part.placement = Released(victim);
  s_.fleet_.Release(part, s_.gangs_.HandleOf(part.id), part.placement);
  s_.quotas_.Charge(part, s_.fleet_, -1);
}

void Preemptor::PutBack(const Victim& victim) {
  Gang part = *victim.gang;
  part.placement = Released(victim);
  PHALANX_CHECK(
      s_.fleet_.Allocate(part, s_.gangs_.HandleOf(part.id), part.placement)
          .ok());
  s_.quotas_.Charge(part, s_.fleet_, +1);
}

bool Preemptor::FitsAsIs(const GangPtr& gang) {
  const Queue& queue = s_.quotas_.queues().at(gang->spec.queue);
  PlacementOptions options = s_.OptionsFor(queue);
  const PreemptionBook& holds = s_.preemptions_;
  const Fleet& fleet = s_.fleet_;
  options.node_allowed = [this, &holds, &fleet, &gang](int slot) {
    return (within_.empty() || within_[slot]) &&
           !holds.HeldForOther(slot, gang->id, fleet);
  };
  options.restricted_slots = &s_.RestrictedSlots();
  if (!IsElastic(gang->spec)) {
    return PlaceGang(gang->spec, s_.fleet_, options).placed;
  }
  // An elastic preemptor makes room for its minimum; it is admitted at the
  // largest size that fits once its victims stop.
  return PlaceGang(MinimumSpec(gang->spec), s_.fleet_, options).placed;
}

bool Preemptor::FitsWithout(const GangPtr& gang,
                            const std::vector<Victim>& victims) {
  const uint64_t version = s_.fleet_.version();
  for (const Victim& victim : victims) SetAside(victim);
  const bool fits = FitsAsIs(gang);
  for (const Victim& victim : victims) PutBack(victim);
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
std::vector<Preemptor::Candidate> Preemptor::Candidates(
    const VictimRules& rules) {
  const PreemptionConfig& config = s_.config_.preemption;
  std::vector<Candidate> candidates;
  auto collect = [&](const GangTable::AdmissionOrder& admitted) {
    for (const auto& [admit_time, id] : admitted) {
      const GangPtr& other = s_.gangs_.At(id);
      if (!IsVictim(*other, rules)) continue;
      if (GuardedByMinRuntime(*other)) return;
      // Checkpoint-aware: only a victim that checkpointed (or started)
      // recently is cheap enough to take.
      if (config.max_victim_loss > absl::ZeroDuration() &&
          now_ - LastSaved(*other, now_) > config.max_victim_loss) {
        continue;
      }
      // An elastic victim restarts all its ranks from its checkpoint too,
      // but keeps running: a shrink to its minimum is offered first.
      int keep = 0;
      if (const int set = ElasticSetOf(other->spec);
          set >= 0 &&
          HeldCount(*other, set) > other->spec.pod_sets[set].min_count) {
        keep = other->spec.pod_sets[set].min_count;
      }
      candidates.push_back({LostWork(*other, now_), {other, keep}});
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

bool Preemptor::GuardedByMinRuntime(const Gang& victim) {
  const absl::Time protected_until =
      *victim.admit_time + s_.config_.preemption.min_runtime;
  if (now_ >= protected_until) return false;
  s_.preemptions_.WakeAt(protected_until);  // once it passes, try again
  return true;
}

std::vector<Preemptor::Candidate> Preemptor::LoansOn(
    const Gang& gang, const std::vector<int>& slots) {
  std::vector<Candidate> candidates;
  std::set<GangId> seen;
  for (int slot : slots) {
    for (const Fleet::GangPods& on : s_.fleet_.slots()[slot].gang_pods) {
      const GangPtr& other = s_.gangs_.At(on.gang);
      if (!MayTakeBack(gang, *other) || !other->admit_time ||
          (other->state != GangState::kAdmitted &&
           other->state != GangState::kRunning) ||
          !seen.insert(other->id).second || GuardedByMinRuntime(*other)) {
        continue;
      }
      candidates.push_back({LostWork(*other, now_), {other, 0}});
    }
  }
  return candidates;
}

std::optional<std::string> Preemptor::TakeBackLoans(const GangPtr& gang) {
  const Reservation* reservation = s_.reservations_.Of(gang->id);
  if (!s_.config_.preemption.enabled || reservation == nullptr ||
      !s_.gangs_.AnyOnLoan() || s_.preemptions_.HoldsFor(gang->id)) {
    return std::nullopt;
  }
  const std::vector<int> slots =
      ReservationBook::SlotsOf(*reservation, s_.fleet_);
  std::vector<Candidate> candidates = LoansOn(*gang, slots);
  if (candidates.empty()) return std::nullopt;
  // Where it will be admitted: on its reserved nodes.
  within_.assign(s_.fleet_.slots().size(), 0);
  for (int slot : slots) within_[slot] = 1;
  std::optional<std::vector<Victim>> victims = Choose(
      gang, std::move(candidates), std::numeric_limits<double>::infinity());
  within_.clear();
  if (!victims) return std::nullopt;
  const std::vector<std::string> names = Start(gang, *victims);
  return absl::StrCat("PREEMPTING: taking its reserved nodes back from ",
                      absl::StrJoin(names, ", "), ", on loan there");
}

std::optional<std::string> Preemptor::TryPreempt(const GangPtr& gang) {
  const PreemptionConfig& config = s_.config_.preemption;
  if (!config.enabled || s_.preemptions_.HoldsFor(gang->id) ||
      gang->spec.priority < config.min_preemptor_priority) {
    return std::nullopt;
  }
  // 1. Candidates, cheapest loss first (ties: lower priority, then id);
  //    elastic ones as shrinks.
  std::vector<Candidate> candidates = Candidates(RulesFor(*gang));
  if (candidates.empty()) return std::nullopt;
  const double budget = Budget(*gang);
  std::optional<std::vector<Victim>> victims = Choose(gang, candidates, budget);
  //    Shrinks did not make room: elastic victims may be taken whole.
  const bool shrinks =
      std::any_of(candidates.begin(), candidates.end(),
                  [](const Candidate& c) { return c.victim.keep > 0; });
  if (!victims && shrinks) {
    for (Candidate& candidate : candidates) candidate.victim.keep = 0;
    victims = Choose(gang, std::move(candidates), budget);
  }
  if (!victims) return std::nullopt;
  // 4. Victims go to PREEMPTING; their nodes are held for the preemptor.
  const std::vector<std::string> names = Start(gang, *victims);
  return absl::StrCat("PREEMPTING: waiting for ", absl::StrJoin(names, ", "),
                      " to stop");
}

std::optional<std::vector<Preemptor::Victim>> Preemptor::Choose(
    const GangPtr& gang, std::vector<Candidate> candidates, double budget) {
  // 2. Add victims until the gang fits, within the budget: never throw away
  //    more GPU-seconds than the gang would otherwise wait.
  //    With no loss negative, the walk below stops at the first candidate
  //    that costs more than the whole budget: those are never taken, and
  //    need not be sorted.
  if (std::all_of(candidates.begin(), candidates.end(),
                  [](const Candidate& c) { return c.cost >= 0; })) {
    std::erase_if(candidates,
                  [budget](const Candidate& c) { return c.cost > budget; });
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) {
              const Gang& x = *a.victim.gang;
              const Gang& y = *b.victim.gang;
              return std::tie(a.cost, x.spec.priority, x.id) <
                     std::tie(b.cost, y.spec.priority, y.id);
            });
  //    Each victim is set aside once and all are put back at the end (the
  //    fleet with the first k set aside is the same however it got there).
  std::vector<Victim> victims;
  bool fits = false;
  double lost = 0;
  const uint64_t version = s_.fleet_.version();
  for (const Candidate& candidate : candidates) {
    if ((lost += candidate.cost) > budget) break;
    victims.push_back(candidate.victim);
    SetAside(candidate.victim);
    if ((fits = FitsAsIs(gang))) break;
  }
  for (const Victim& victim : victims) PutBack(victim);
  s_.fleet_.RestoreVersion(version);  // every victim is back as it was
  if (!fits) return std::nullopt;
  // 3. Drop victims that turn out unnecessary, most expensive first.
  for (int i = static_cast<int>(victims.size()) - 2; i >= 0; --i) {
    std::vector<Victim> fewer = victims;
    fewer.erase(fewer.begin() + i);
    if (FitsWithout(gang, fewer)) victims = std::move(fewer);
  }
  return victims;
}

std::vector<std::string> Preemptor::Start(const GangPtr& gang,
                                          const std::vector<Victim>& victims) {
  std::vector<std::string> names;
  for (const Victim& victim : victims) {
    const Gang& current = *victim.gang;
    Gang preempting = current;
    preempting.state = GangState::kPreempting;
    preempting.reason_code = ReasonCode::kPreempted;
    preempting.reason = absl::StrCat("PREEMPTED by ", gang->id.value());
    if (victim.keep > 0) {
      preempting.shrink_to = victim.keep;
      absl::StrAppend(&preempting.reason, ": shrinking to ", victim.keep,
                      victim.keep == 1 ? " pod" : " pods");
    }
    const absl::Time deadline = now_ + s_.config_.preemption.grace_period;
    preempting.grace_deadline = deadline;
    s_.deadlines_.AddGangTimer(deadline, current.id);
    s_.preemptions_.AddVictim(current.id, gang->id, deadline);
    for (const PodPlacement& pod : Released(victim)) {
      s_.preemptions_.Hold(gang->id, pod.node);
    }
    s_.fits_.ForgetRestricted();
    names.push_back(victim.keep > 0
                        ? absl::StrCat(current.id.value(), " (shrinking)")
                        : current.id.value());
    s_.Transition(std::move(preempting), EventType::kPreempting, now_);
  }
  return names;
}

}  // namespace phalanx::core
