// The admission cycle (DESIGN §4): Scheduler::RunCycle and its helpers.
#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "core/check.h"
#include "core/scheduler.h"

namespace phalanx::core {
namespace {

int64_t Lookup(const std::map<std::string, int64_t>& map,
               const std::string& key) {
  auto it = map.find(key);
  return it == map.end() ? 0 : it->second;
}

// Gangs with the same pod sets in the same queue (and the same backfill
// rights) succeed or fail alike on the same capacity: the key of that
// equivalence class, less the backfill part.
std::string ShapeKey(const GangSpec& spec) {
  std::string key =
      absl::StrCat(spec.queue.value(), "|", spec.allow_mixed_models ? 1 : 0);
  for (const PodSetSpec& set : spec.pod_sets) {
    absl::StrAppend(&key, "|", set.count, "x", set.gpus, ",", set.cpu_millis,
                    ",", set.memory_bytes, ",",
                    static_cast<int>(set.topology.mode), set.topology.level);
    for (const std::string& model : set.gpu_models) {
      absl::StrAppend(&key, ",", model);
    }
  }
  return key;
}

}  // namespace

// Where a queue's head stands among all queues' heads: (-priority, score)
// or, score first, (score, -priority); then submit time and id.
struct Scheduler::HeadKey {
  int before_score;
  FairShareScore score;
  int after_score;
  absl::Time submit_time;
  int64_t seq;
  QueueName queue;

  bool operator<(const HeadKey& o) const {
    return std::tie(before_score, score, after_score, submit_time, seq, queue) <
           std::tie(o.before_score, o.score, o.after_score, o.submit_time,
                    o.seq, o.queue);
  }
};

// Yields pending gangs in admission order. With fair sharing, a queue is
// re-scored after each of its admissions, so one team's burst cannot take
// the whole cycle.
class Scheduler::CycleOrder {
 public:
  explicit CycleOrder(const Scheduler& s) : s_(s) {
    if (s.config_.admission.ordering == Ordering::kSubmitOrder) return;
    for (const auto& [queue, keys] : s.pending_by_queue_) {
      if (keys.empty()) continue;
      cursors_[queue] = {keys.begin(), keys.end()};
      PushHead(queue);
    }
  }

  // The next gang, or null when every pending gang has been offered.
  GangPtr Next() {
    if (s_.config_.admission.ordering == Ordering::kSubmitOrder) {
      // Walk the live index past the last key offered (admissions remove
      // gangs from it as we go).
      auto it = last_fifo_ ? s_.pending_fifo_.upper_bound(*last_fifo_)
                           : s_.pending_fifo_.begin();
      if (it == s_.pending_fifo_.end()) return nullptr;
      last_fifo_ = *it;
      return s_.gangs_.at(it->id);
    }
    if (heads_.empty()) return nullptr;
    const QueueName queue = heads_.begin()->queue;
    heads_.erase(heads_.begin());
    auto& [it, end] = cursors_.at(queue);
    GangPtr gang = s_.gangs_.at(it->id);
    ++it;
    last_queue_ = queue;
    return gang;
  }

  // Called after each offered gang: re-scores its queue and queues its next
  // gang.
  void Advance() {
    if (s_.config_.admission.ordering == Ordering::kSubmitOrder) return;
    PushHead(last_queue_);
  }

 private:
  using Cursor = std::set<PendingKey>::const_iterator;

  void PushHead(const QueueName& queue) {
    auto& [it, end] = cursors_.at(queue);
    if (it == end) return;
    const bool score_first =
        s_.config_.admission.ordering == Ordering::kFairShareFirst;
    heads_.insert(HeadKey{score_first ? 0 : -it->priority, s_.Score(queue),
                          score_first ? -it->priority : 0, it->submit_time,
                          it->seq, queue});
  }

  const Scheduler& s_;
  std::optional<PendingKey> last_fifo_;
  std::map<QueueName, std::pair<Cursor, Cursor>> cursors_;
  std::set<HeadKey> heads_;
  QueueName last_queue_;
};

int64_t Scheduler::BorrowedGpus(const QueueName& name) const {
  auto it = queues_.find(name);
  if (it == queues_.end() || it->second.nominal_gpus.empty()) return 0;
  int64_t borrowed = 0;
  for (const auto& [model, gpus] : Held(name)) {
    borrowed +=
        std::max<int64_t>(0, gpus - Lookup(it->second.nominal_gpus, model));
  }
  return borrowed;
}

FairShareScore Scheduler::Score(const QueueName& name) const {
  if (!config_.fair_share.enabled) return FairShareScore{};
  auto it = queues_.find(name);
  const double weight = it == queues_.end() ? 1.0 : it->second.weight;
  return ledger_.Score(name, weight, Held(name));
}

std::string Scheduler::QuotaReason(const Queue& queue, const std::string& model,
                                   int64_t gpus) const {
  if (queue.nominal_gpus.empty()) return "";  // no quota declared: unlimited
  const int64_t nominal = Lookup(queue.nominal_gpus, model);
  const int64_t held = Lookup(Held(queue.name), model);
  const int64_t over = held + gpus - nominal;
  if (over <= 0) return "";
  auto refuse = [&](absl::string_view why) {
    return absl::StrCat("QUOTA: queue ", queue.name.value(), " would hold ",
                        over, " ", model, " GPUs above its nominal ", nominal,
                        "; ", why);
  };
  if (queue.borrowing_limit_gpus >= 0 && over > queue.borrowing_limit_gpus) {
    return refuse(
        absl::StrCat("its borrowing limit is ", queue.borrowing_limit_gpus));
  }
  if (queue.parent.empty()) return refuse("it has no cohort to borrow from");
  // Borrowing in the cohort after this admission must not exceed what the
  // siblings can lend from their idle nominal quota.
  int64_t borrowed = over;
  int64_t lendable = 0;
  for (const auto& [name, sibling] : queues_) {
    if (sibling.parent != queue.parent || name == queue.name ||
        sibling.nominal_gpus.empty()) {
      continue;
    }
    const int64_t spare =
        Lookup(sibling.nominal_gpus, model) - Lookup(Held(name), model);
    if (spare < 0) {
      borrowed += -spare;
    } else {
      lendable += sibling.lending_limit_gpus < 0
                      ? spare
                      : std::min(spare, sibling.lending_limit_gpus);
    }
  }
  if (borrowed <= lendable) return "";
  const int64_t already =
      borrowed - over + std::max<int64_t>(0, held - nominal);
  return refuse(absl::StrCat("cohort ", queue.parent.value(), " lends ",
                             lendable, " and ", already, " are borrowed"));
}

PlacementOptions Scheduler::OptionsFor(const Queue& queue) const {
  PlacementOptions options;
  options.first_fit = config_.placement.first_fit;
  options.model_gate = [this, &queue](const std::string& model, int64_t gpus) {
    return QuotaReason(queue, model, gpus);
  };
  return options;
}

void Scheduler::SampleLedger(absl::Time now) {
  if (now - last_ledger_sample_ < config_.fair_share.sample_interval) return;
  last_ledger_sample_ = now;
  for (const auto& [name, queue] : queues_) {
    ledger_.Accrue(name, Held(name), now);
  }
}

void Scheduler::Admit(const GangPtr& gang, std::vector<PodPlacement> pods,
                      absl::Time now) {
  Gang admitted = *gang;
  admitted.placement = std::move(pods);
  PHALANX_CHECK(fleet_.Allocate(admitted, admitted.placement).ok());
  admitted.state = GangState::kAdmitted;
  admitted.reason.clear();
  admitted.admit_time = now;
  ++admitted.attempts;
  ledger_.Accrue(admitted.spec.queue, Held(admitted.spec.queue), now);
  Charge(admitted, +1);
  ArmTimers(admitted);
  Transition(std::move(admitted), EventType::kAdmitted, now);
}

std::string Scheduler::TryAdmit(
    const GangPtr& gang, absl::Time now,
    std::map<std::string, std::string>& failed_shapes) {
  const Queue& queue = queues_.at(gang->spec.queue);
  if (queue.held) {
    return absl::StrCat("QUEUE_HELD: queue ", queue.name.value(), " is held");
  }
  // Nothing that could make it fit has happened since it last failed.
  if (SkippedAtThisEpoch(*gang)) return gang->reason;
  std::string shape = ShapeKey(gang->spec);
  for (const Reservation& reservation : reservations_) {
    shape += MayBackfill(*gang, reservation, now) ? "|b" : "|-";
  }
  if (auto it = failed_shapes.find(shape); it != failed_shapes.end()) {
    failed_at_epoch_[gang->id] = capacity_epoch_;
    return it->second;
  }
  PlacementOptions options = OptionsFor(queue);
  if (!reservations_.empty() || !held_for_.empty()) {
    options.node_allowed = [this, &gang, now](int slot) {
      const int r = reserved_slot_[slot];
      return (r < 0 || MayBackfill(*gang, reservations_[r], now)) &&
             !HeldForOther(slot, gang->id);
    };
  }
  PlacementResult placement = PlaceGang(gang->spec, fleet_, options);
  if (!placement.placed) {
    if (!reservations_.empty() && !placement.reason.starts_with("QUOTA")) {
      if (auto why = BlockedByReservation(gang, queue)) {
        placement.reason = *std::move(why);
      }
    }
    failed_shapes[shape] = placement.reason;
    failed_at_epoch_[gang->id] = capacity_epoch_;
    return placement.reason;
  }
  Admit(gang, std::move(placement.pods), now);
  return "";
}

int64_t Scheduler::FreeReadyGpus() const {
  int64_t free = 0;
  for (const Fleet::Slot& slot : fleet_.slots()) {
    if (slot.node.state == NodeState::kReady) free += slot.FreeGpus();
  }
  return free;
}

bool Scheduler::SkippedAtThisEpoch(const Gang& gang) const {
  auto it = failed_at_epoch_.find(gang.id);
  return it != failed_at_epoch_.end() && it->second == capacity_epoch_;
}

void Scheduler::ReleaseHoldsIfVictimsGone(const GangId& preemptor) {
  if (!held_for_.contains(preemptor)) return;
  for (const auto& [victim, preemption] : preemptor_of_) {
    if (preemption.preemptor == preemptor) return;
  }
  held_for_.erase(preemptor);  // it did not fit even so; it may try again
}

bool Scheduler::MayBackfill(const Gang& gang, const Reservation& reservation,
                            absl::Time now) const {
  if (gang.id == reservation.gang) return true;
  const absl::Duration estimate = gang.spec.estimated_runtime;
  return estimate > absl::ZeroDuration() && now + estimate <= reservation.start;
}

bool Scheduler::MayReserve(const Gang& gang, absl::Time now) const {
  const ReservationConfig& config = config_.reservation;
  if (static_cast<int>(reservations_.size()) >= config.depth) return false;
  return gang.spec.priority >= config.min_priority ||
         (config.after > absl::ZeroDuration() &&
          now - gang.submit_time >= config.after);
}

std::optional<std::string> Scheduler::Reserve(const GangPtr& gang,
                                              absl::Time now) {
  std::vector<char> taken(reserved_slot_.size());
  for (size_t i = 0; i < taken.size(); ++i) taken[i] = reserved_slot_[i] >= 0;
  std::optional<Reservation> reservation = PlanReservation(
      *gang, fleet_, taken, [this](const GangId& id) { return FindGang(id); },
      now);
  if (!reservation) return std::nullopt;
  const int index = static_cast<int>(reservations_.size());
  const Fleet::Domain& domain = fleet_.domains()[reservation->domain];
  for (int i = domain.node_begin; i < domain.node_end; ++i) {
    if (reserved_slot_[i] < 0) reserved_slot_[i] = index;
  }
  reservations_.push_back(*reservation);
  return absl::StrCat(
      "RESERVED: ", domain.path.empty() ? "the fleet" : domain.path,
      " is held for it until ", reservation->gpus_to_release,
      " GPUs are released");
}

std::optional<std::string> Scheduler::BlockedByReservation(const GangPtr& gang,
                                                           const Queue& queue) {
  PlacementResult free_for_all =
      PlaceGang(gang->spec, fleet_, OptionsFor(queue));
  if (!free_for_all.placed) return std::nullopt;
  for (const PodPlacement& pod : free_for_all.pods) {
    const int r = reserved_slot_[fleet_.Find(pod.node)];
    if (r < 0) continue;
    const Reservation& reservation = reservations_[r];
    return absl::StrCat(
        "RESERVED_FOR ", reservation.gang.value(), ": it would fit in ",
        reservation.path.empty() ? "the fleet" : reservation.path,
        ", held for that gang; ",
        gang->spec.estimated_runtime > absl::ZeroDuration()
            ? "it is not expected to end before that gang starts"
            : "without estimated_runtime it cannot backfill");
  }
  return std::nullopt;
}

void Scheduler::RunCycle(absl::Time now) {
  // 1. Housekeeping: expire idempotency keys, apply retention, sample the
  //    fair-share ledger at least every sample interval, fire lifecycle
  //    timers and heartbeat timeouts.
  ExpireAndTrim(now);
  SampleLedger(now);
  ExpireTimers(now);
  CheckHeartbeats(now);
  std::vector<Reservation> previous = std::move(reservations_);
  reservations_.clear();
  reserved_slot_.assign(fleet_.slots().size(), -1);

  // 2. Order: priority, fair-share score, submit time, id (or as configured);
  //    a queue is re-scored after each admission from it.
  CycleOrder order(*this);
  std::map<std::string, std::string> failed_shapes;  // 4b. equivalence
  GangPtr blocker;
  int64_t free_gpus = FreeReadyGpus();
  for (GangPtr gang = order.Next(); gang != nullptr; gang = order.Next()) {
    // 3. Stop early when nothing further can change: a strict-FIFO head
    //    blocks everyone behind it; with no free GPU, no reservation left
    //    to make and no preemption, no later gang can be admitted. The
    //    gangs not reached keep their reasons.
    if (blocker != nullptr) break;
    if (free_gpus == 0 && !config_.preemption.enabled &&
        static_cast<int>(reservations_.size()) >= config_.reservation.depth &&
        gang->spec.TotalGpus() > 0) {
      break;
    }
    // 4. Gate (held queue), skip unchanged (capacity epoch and shape
    //    classes), quota, then place all pod sets at once — all or nothing;
    //    nodes reserved for others only for gangs that end before.
    const bool fresh_attempt = !SkippedAtThisEpoch(*gang);
    std::string reason = TryAdmit(gang, now, failed_shapes);
    // 5. Preempt: cheapest sufficient victims of lower priority (or
    //    borrowing beyond nominal in the cohort), only on a fresh attempt.
    if (!reason.empty() && fresh_attempt && !reason.starts_with("QUEUE_HELD")) {
      ReleaseHoldsIfVictimsGone(gang->id);
      if (auto preempting = TryPreempt(gang, now)) reason = *preempting;
    }
    // 6. Reserve: a head gang that does not fit reserves the domain where
    //    it can start soonest.
    if (!reason.empty() && !reason.starts_with("QUOTA") &&
        !reason.starts_with("QUEUE_HELD") &&
        !reason.starts_with("PREEMPTING") && MayReserve(*gang, now)) {
      if (auto reserved = Reserve(gang, now)) {
        // Keep why it does not fit now; a skipped gang's old reason already
        // carries it.
        const size_t cause = reason.find(" (");
        if (reason.starts_with("RESERVED: ") && cause != std::string::npos) {
          reason = reason.substr(cause + 2, reason.size() - cause - 3);
        }
        reason = absl::StrCat(*reserved, " (", reason, ")");
      }
    }
    // 7. Every gang left pending carries its reason.
    if (!reason.empty()) {
      SetReason(gang, std::move(reason));
      if (config_.admission.strict_fifo) blocker = gang;
    } else {
      free_gpus -= gang->spec.TotalGpus();
    }
    order.Advance();
  }
  // 8. New reservations are events; a changed set may let others fit.
  AnnounceReservations(previous, now);
}

void Scheduler::AnnounceReservations(const std::vector<Reservation>& previous,
                                     absl::Time now) {
  bool changed = previous.size() != reservations_.size();
  for (const Reservation& reservation : reservations_) {
    const bool known = std::any_of(
        previous.begin(), previous.end(), [&](const Reservation& p) {
          return p.gang == reservation.gang && p.domain == reservation.domain;
        });
    if (known) continue;
    changed = true;
    Transition(*gangs_.at(reservation.gang), EventType::kReserved, now);
  }
  if (changed) BumpEpoch();
}

std::vector<GangPtr> Scheduler::StaticOrder() const {
  std::vector<GangPtr> out;
  CycleOrder order(*this);
  for (GangPtr gang = order.Next(); gang != nullptr; gang = order.Next()) {
    out.push_back(gang);
    order.Advance();
  }
  return out;
}

}  // namespace phalanx::core
