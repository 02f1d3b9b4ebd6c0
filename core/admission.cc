// The admission cycle (docs/design.md §4): Scheduler::RunCycle and its helpers.
#include <algorithm>
#include <functional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "core/check.h"
#include "core/domain_score.h"
#include "core/saturating.h"
#include "core/scheduler.h"

namespace phalanx::core {
namespace {

int64_t Lookup(const std::map<std::string, int64_t>& map,
               const std::string& key) {
  auto it = map.find(key);
  return it == map.end() ? 0 : it->second;
}

}  // namespace

// Where a queue's head stands among all queues' heads: (-priority, score)
// or, score first, (score, -priority); then submit time and id.
struct Scheduler::HeadKey {
  int64_t before_score;
  FairShareScore score;
  int64_t after_score;
  absl::Time submit_time;
  int64_t seq;
  QueueName queue;

  bool operator<(const HeadKey& o) const {
    return std::tie(before_score, score, after_score, submit_time, seq, queue) <
           std::tie(o.before_score, o.score, o.after_score, o.submit_time,
                    o.seq, o.queue);
  }
};

// Yields pending gangs in admission order: per bucket (a queue; one bucket
// for all in submit order) the heads of its groups, merged. With fair
// sharing, a queue is re-scored after each of its admissions, so one team's
// burst cannot take the whole cycle. Members the cycle knows to fail are
// passed over without being looked at, a whole group at a time.
class Scheduler::CycleOrder {
 public:
  // `could_reserve`: whether a gang known to fail must still be offered
  // (it may make a reservation); null: offer every gang.
  using CouldReserve = std::function<bool(const PendingKey&)>;

  CycleOrder(const Scheduler& s, CouldReserve could_reserve)
      : s_(s),
        submit_order_(s.config_.admission.ordering == Ordering::kSubmitOrder),
        could_reserve_(std::move(could_reserve)) {
    cursors_.reserve(s.pending_.groups().size());
    for (const auto& [key, group] : s.pending_.groups()) {
      if (group.members.empty()) continue;
      cursors_.push_back({&group, group.members.begin()});
      auto [bucket, added] =
          buckets_.try_emplace(BucketOf(group), CursorLess{submit_order_});
      bucket->second.insert(&cursors_.back());
    }
    for (const auto& [name, bucket] : buckets_) PushHead(name);
  }

  struct Offer {
    GangPtr gang;
    PendingGroup* group = nullptr;
    absl::Duration estimate;
  };

  // The next gang, or an empty offer when every pending gang has been
  // offered or passed over.
  Offer Next() {
    while (!heads_.empty()) {
      const QueueName name = heads_.begin()->queue;
      heads_.erase(heads_.begin());
      Bucket& bucket = buckets_.at(name);
      Cursor* cursor = *bucket.begin();
      bucket.erase(bucket.begin());
      if (PassOverKnownFailures(*cursor)) {
        if (cursor->it != cursor->group->members.end()) bucket.insert(cursor);
        PushHead(name);
        continue;
      }
      last_ = {name, cursor};
      const PendingKey& key = *cursor->it++;
      return Offer{s_.gangs_.at(key.id),
                   const_cast<PendingGroup*>(cursor->group), key.estimate};
    }
    return Offer{};
  }

  // Called after each offered gang: puts its group back in line (unless
  // `drop_group`: nothing more of it this cycle) and re-scores its queue.
  void Advance(bool drop_group) {
    auto [name, cursor] = last_;
    if (!drop_group && cursor->it != cursor->group->members.end()) {
      buckets_.at(name).insert(cursor);
    }
    PushHead(name);
  }

 private:
  struct Cursor {
    const PendingGroup* group;
    std::set<PendingKey>::const_iterator it;
  };
  struct CursorLess {
    bool submit_order;
    bool operator()(const Cursor* a, const Cursor* b) const {
      if (submit_order) return SubmitOrderLess(*a->it, *b->it);
      return *a->it < *b->it;
    }
  };
  using Bucket = std::set<Cursor*, CursorLess>;

  QueueName BucketOf(const PendingGroup& group) const {
    return submit_order_ ? QueueName() : group.queue;
  }

  // Moves the cursor past members known to fail; whether it moved. The
  // oldest member left may still reserve: then nothing is passed over (the
  // younger ones of the group can reserve only if it can).
  bool PassOverKnownFailures(Cursor& cursor) const {
    if (!could_reserve_ || could_reserve_(*cursor.it)) return false;
    const auto start = cursor.it;
    cursor.it = cursor.group->FirstNotKnownToFail(s_.capacity_epoch_, start);
    return cursor.it != start;
  }

  void PushHead(const QueueName& name) {
    const Bucket& bucket = buckets_.at(name);
    if (bucket.empty()) return;
    const PendingKey& key = *(*bucket.begin())->it;
    if (submit_order_) {
      heads_.insert(HeadKey{0, {}, 0, key.submit_time, key.seq, name});
      return;
    }
    const auto [before, after] = TierKeys(s_.config_.admission, key.priority);
    heads_.insert(
        HeadKey{before, s_.Score(name), after, key.submit_time, key.seq, name});
  }

  const Scheduler& s_;
  const bool submit_order_;
  CouldReserve could_reserve_;
  std::vector<Cursor> cursors_;
  std::map<QueueName, Bucket> buckets_;
  std::set<HeadKey> heads_;
  std::pair<QueueName, Cursor*> last_;
};

int64_t Scheduler::BorrowedGpus(const QueueName& name) const {
  auto it = queues_.find(name);
  if (it == queues_.end() || it->second.nominal_gpus.empty()) return 0;
  int64_t borrowed = 0;
  for (const auto& [model, gpus] : Held(name)) {
    borrowed = SaturatingAdd(
        borrowed,
        std::max<int64_t>(
            0, SaturatingSub(gpus, Lookup(it->second.nominal_gpus, model))));
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
  // Quotas are bounded (limits.max_quota_gpus) but queues are not, so every
  // sum below saturates rather than wraps.
  const int64_t over = SaturatingSub(SaturatingAdd(held, gpus), nominal);
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
    const int64_t spare = SaturatingSub(Lookup(sibling.nominal_gpus, model),
                                        Lookup(Held(name), model));
    if (spare < 0) {
      borrowed = SaturatingSub(borrowed, spare);
    } else {
      lendable = SaturatingAdd(
          lendable, sibling.lending_limit_gpus < 0
                        ? spare
                        : std::min(spare, sibling.lending_limit_gpus));
    }
  }
  if (borrowed <= lendable) return "";
  const int64_t already =
      SaturatingAdd(SaturatingSub(borrowed, over),
                    std::max<int64_t>(0, SaturatingSub(held, nominal)));
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
  if (admitted.spec.lease_duration > absl::ZeroDuration()) {
    admitted.lease_expire_time = now + admitted.spec.lease_duration;
  }
  ++admitted.attempts;
  ledger_.Accrue(admitted.spec.queue, Held(admitted.spec.queue), now);
  Charge(admitted, +1);
  ArmTimers(admitted);
  Transition(std::move(admitted), EventType::kAdmitted, now);
}

Scheduler::Attempt Scheduler::TryAdmit(const GangPtr& gang, absl::Time now) {
  const Queue& queue = queues_.at(gang->spec.queue);
  if (queue.held) {
    return {absl::StrCat("QUEUE_HELD: queue ", queue.name.value(), " is held")};
  }
  PlacementOptions options = OptionsFor(queue);
  options.node_rank = NodeRanker(*gang, now);
  if (!reservations_.empty() || !held_for_.empty()) {
    options.node_allowed = [this, &gang, now](int slot) {
      const int r = reserved_slot_[slot];
      return (r < 0 || MayBackfill(*gang, reservations_[r], now)) &&
             !HeldForOther(slot, gang->id);
    };
    options.restricted_slots = &RestrictedSlots();
  }
  PlacementResult placement = PlaceGang(gang->spec, fleet_, options);
  if (!placement.placed) {
    // With rights to every reservation it was offered all the nodes.
    const bool may_use_all = std::all_of(
        reservations_.begin(), reservations_.end(),
        [&](const Reservation& r) { return MayBackfill(*gang, r, now); });
    if (!may_use_all && !placement.reason.starts_with("QUOTA")) {
      if (auto why = BlockedByReservation(gang, queue)) {
        return {*std::move(why), /*backfill_matters=*/true};
      }
    }
    return {std::move(placement.reason)};
  }
  if (config_.placement.domain_end_time_packing) {
    PackByDomainEnd(*gang, options, placement, now);
  }
  Admit(gang, std::move(placement.pods), now);
  return {};
}

namespace {

// The level at which every pod set of `spec` is REQUIRED, or -1.
int CommonRequiredLevel(const GangSpec& spec, const Fleet& fleet) {
  int level = -1;
  for (const PodSetSpec& set : spec.pod_sets) {
    if (set.topology.mode != TopologyMode::kRequired) return -1;
    const int l = fleet.LevelIndex(set.topology.level);
    if (l < 0 || l >= static_cast<int>(fleet.levels().size()) ||
        (level >= 0 && l != level)) {
      return -1;
    }
    level = l;
  }
  return level;
}

}  // namespace

absl::Time Scheduler::LatestEndIn(int domain, absl::Time now) const {
  const Fleet::Domain& d = fleet_.domains()[domain];
  absl::Time latest = absl::InfinitePast();
  for (int i = d.node_begin; i < d.node_end; ++i) {
    for (const auto& [id, pods] : fleet_.slots()[i].gang_pods) {
      if (const GangPtr holder = FindGang(id)) {
        latest = std::max(latest, ExpectedEnd(*holder, now));
      }
    }
  }
  return latest;
}

void Scheduler::PackByDomainEnd(const Gang& gang,
                                const PlacementOptions& options,
                                PlacementResult& placement, absl::Time now) {
  if (gang.spec.estimated_runtime <= absl::ZeroDuration() ||
      config_.placement.first_fit) {
    return;
  }
  const int level = CommonRequiredLevel(gang.spec, fleet_);
  if (level < 0 || placement.pods.empty()) return;
  const int first = fleet_.Find(placement.pods.front().node);
  const absl::Time end = now + gang.spec.estimated_runtime;
  // Rank every domain of the level (best fit's choice first among equals,
  // the others in fleet order), then take the best-ranked one the gang
  // fits in: best fit's own placement when that is its domain.
  std::vector<std::pair<DomainRank, int>> ranked;
  int order = 1;
  for (int domain : fleet_.DomainsAtLevel(level)) {
    const Fleet::Domain& d = fleet_.domains()[domain];
    const bool chosen = first >= d.node_begin && first < d.node_end;
    ranked.emplace_back(
        RankDomain(LatestEndIn(domain, now), end, now, chosen ? 0 : order++),
        domain);
  }
  std::sort(ranked.begin(), ranked.end());
  for (const auto& [rank, domain] : ranked) {
    if (rank.best_fit_order == 0) return;  // best fit's placement stands
    PlacementOptions inside = options;
    inside.within_domain = domain;
    PlacementResult there = PlaceGang(gang.spec, fleet_, inside);
    if (!there.placed) continue;
    placement = std::move(there);
    return;
  }
}

std::function<NodeRank(int, int)> Scheduler::NodeRanker(const Gang& gang,
                                                        absl::Time now) const {
  const PlacementConfig& config = config_.placement;
  if (!config.end_time_packing && !config.fragmentation_scoring) return {};
  const absl::Time end = gang.spec.estimated_runtime > absl::ZeroDuration()
                             ? now + gang.spec.estimated_runtime
                             : absl::InfiniteFuture();
  return [this, end, now, config](int slot, int gpus) {
    const Fleet::Slot& s = fleet_.slots()[slot];
    ScoredNode node{s.node.spec.gpu_count, s.FreeGpus(), absl::InfinitePast()};
    if (config.end_time_packing) {
      for (const auto& [id, pods] : s.gang_pods) {
        if (const GangPtr holder = FindGang(id)) {
          node.latest_end =
              std::max(node.latest_end, ExpectedEnd(*holder, now));
        }
      }
    }
    return RankNode(node, ScoredPod{gpus, end}, config.fragmentation_scoring,
                    config.end_time_packing);
  };
}

int64_t Scheduler::FreeReadyGpus() const {
  const FreeIndex& index = fleet_.free_index();
  int64_t free = 0;
  for (int gpus = 1; gpus <= index.max_gpus(); ++gpus) {
    free += gpus * index.Nodes(/*domain=*/0, index.any_model(), gpus);
  }
  return free;
}

void Scheduler::AdmitPreemptors(absl::Time now) {
  if (held_for_.empty()) return;
  std::set<GangId> waiting;
  for (const auto& [victim, preemption] : preemptor_of_) {
    waiting.insert(preemption.preemptor);
  }
  std::vector<GangId> ready;
  for (const auto& [preemptor, nodes] : held_for_) {
    if (!waiting.contains(preemptor)) ready.push_back(preemptor);
  }
  for (const GangId& id : ready) {
    const GangPtr gang = FindGang(id);
    if (gang == nullptr || gang->state != GangState::kPending) {
      DropHolds(id);
      continue;
    }
    Attempt attempt = TryAdmit(gang, now);
    if (attempt.reason.empty()) continue;
    DropHolds(id);  // it did not fit even so; it may try again
    SetReason(gang, std::move(attempt.reason));
  }
}

bool Scheduler::MayBackfill(const Gang& gang, const Reservation& reservation,
                            absl::Time now) const {
  if (gang.id == reservation.gang) return true;
  const absl::Duration estimate = gang.spec.estimated_runtime;
  return estimate > absl::ZeroDuration() && now + estimate <= reservation.start;
}

bool Scheduler::MayReserve(int priority, absl::Time submit_time,
                           absl::Time now) const {
  const ReservationConfig& config = config_.reservation;
  if (static_cast<int>(reservations_.size()) >= config.depth) return false;
  return priority >= config.min_priority ||
         (config.after > absl::ZeroDuration() &&
          now - submit_time >= config.after);
}

std::optional<std::string> Scheduler::ReserveFor(const GangPtr& gang,
                                                 absl::Time now) {
  if (const Reservation* held = ReservationOf(gang->id)) {
    return ReservedReason(*held);
  }
  if (!MayReserve(gang->spec.priority, gang->submit_time, now)) {
    return std::nullopt;
  }
  return Reserve(gang, now);
}

const Reservation* Scheduler::ReservationOf(const GangId& id) const {
  for (const Reservation& reservation : reservations_) {
    if (reservation.gang == id) return &reservation;
  }
  return nullptr;
}

std::optional<std::string> Scheduler::Reserve(const GangPtr& gang,
                                              absl::Time now) {
  std::vector<char> taken(reserved_slot_.size());
  for (size_t i = 0; i < taken.size(); ++i) {
    taken[i] =
        reserved_slot_[i] >= 0 || HeldForOther(static_cast<int>(i), gang->id);
  }
  // No running gang is expected to end before the earliest of their ends:
  // a bound that lets the plan skip domains that cannot win.
  const absl::Time earliest_end =
      active_ends_.empty() ? absl::InfiniteFuture() : *active_ends_.begin();
  std::optional<Reservation> reservation = PlanReservation(
      *gang, fleet_, taken, [this](const GangId& id) { return PeekGang(id); },
      now, earliest_end, config_.reservation.choose_by_stranding);
  if (!reservation || !WithinWindow(*reservation, now)) return std::nullopt;
  const int index = static_cast<int>(reservations_.size());
  for (int slot : ReservedSlots(*reservation)) {
    if (reserved_slot_[slot] < 0) reserved_slot_[slot] = index;
  }
  reservations_.push_back(*reservation);
  restricted_slots_.reset();
  return ReservedReason(*reservation);
}

bool Scheduler::WithinWindow(const Reservation& reservation,
                             absl::Time now) const {
  const absl::Duration window = config_.reservation.window;
  return window <= absl::ZeroDuration() || reservation.start <= now + window;
}

std::vector<int> Scheduler::ReservedSlots(
    const Reservation& reservation) const {
  std::vector<int> slots;
  for (const NodeId& node : reservation.nodes) {
    if (const int slot = fleet_.Find(node); slot >= 0) slots.push_back(slot);
  }
  return slots;
}

std::string Scheduler::ReservedReason(const Reservation& reservation) const {
  return absl::StrCat("RESERVED: ", reservation.nodes.size(), " nodes in ",
                      reservation.path.empty() ? "the fleet" : reservation.path,
                      " are held for it until ", reservation.gpus_to_release,
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
    // The reason names no gang: it is shown to this gang's owner, who may
    // not see the queue of the gang the nodes are held for.
    return absl::StrCat(
        "RESERVED_FOR: it would fit in ",
        reservation.path.empty() ? "the fleet" : reservation.path,
        ", held for a gang ahead of it in line; ",
        gang->spec.estimated_runtime > absl::ZeroDuration()
            ? "it is not expected to end before that gang starts"
            : "without estimated_runtime it cannot backfill");
  }
  return std::nullopt;
}

bool Scheduler::MayPreemptFrom(const Gang& gang) const {
  if (!config_.preemption.enabled) return false;
  // In priority order every later gang has at most this one's priority: below
  // the preemptors' tier, none of them may preempt either. With a fair-share
  // tier, a later gang of that tier may have a higher priority than this
  // one, but stays below the tier's bound.
  const AdmissionConfig& admission = config_.admission;
  const int min_priority = config_.preemption.min_preemptor_priority;
  if (admission.ordering != Ordering::kPriorityFairShareAge ||
      gang.spec.priority >= min_priority) {
    return true;
  }
  return gang.spec.priority < admission.fair_share_first_below_priority &&
         admission.fair_share_first_below_priority > min_priority;
}

void Scheduler::RunCycle(absl::Time now) {
  // 1. Housekeeping: expire idempotency keys, apply retention, sample the
  //    fair-share ledger at least every sample interval, fire lifecycle
  //    timers, fail gangs whose lease lapsed, heartbeat timeouts and drain
  //    deadlines (their gangs are repaired or evicted), wake up for time-based
  //    eligibility. Reservations are kept while nothing changed; when the
  //    capacity epoch moved they are re-estimated on their own nodes, and
  //    re-planned from scratch at most every kFullReplanInterval.
  ExpireAndTrim(now);
  SampleLedger(now);
  ExpireTimers(now);
  ExpireLeases(now);
  CheckHeartbeats(now);
  ExpireDrains(now);
  if (now >= wakeup_) {
    wakeup_ = absl::InfiniteFuture();
    BumpEpoch();
  }
  const std::vector<Reservation> previous = reservations_;
  KeepOrReplanReservations(now);

  // 2. Preemptors whose victims have all stopped take the capacity held for
  //    them first (their holds set them apart from their groups); one that
  //    still does not fit lets it go.
  AdmitPreemptors(now);

  // 3. Order: priority, fair-share score, submit time, id (or as configured);
  //    a queue is re-scored after each admission from it. Gangs known to
  //    fail at this epoch (5b) are passed over, a whole group at a time,
  //    unless one of them could still make a reservation.
  CycleOrder order(*this, CouldReserveNow(now));
  GangPtr blocker;
  std::string stopped_because;
  int64_t free_gpus = FreeReadyGpus();
  for (auto offer = order.Next(); offer.gang != nullptr; offer = order.Next()) {
    const GangPtr& gang = offer.gang;
    PendingGroup& group = *offer.group;
    // 4. Stop early when nothing further can change: a strict-FIFO head
    //    blocks everyone behind it; with no free GPU, no reservation left
    //    to make and no preemption, no later gang can be admitted. The
    //    gangs not reached get the shared cause as their reason (4b).
    if (blocker != nullptr) {
      stopped_because =
          absl::StrCat("WAITING: strict FIFO: behind gang ",
                       blocker->id.value(), ", which does not fit");
      break;
    }
    if (free_gpus == 0 && !MayPreemptFrom(*gang) &&
        static_cast<int>(reservations_.size()) >= config_.reservation.depth &&
        gang->spec.TotalGpus() > 0) {
      stopped_because = kNoFreeGpuReason;
      break;
    }
    // 5. Gate (held queue), quota, then place all pod sets at once — all or
    //    nothing; nodes reserved for others only for gangs that end before.
    //    5b. A member of a group that failed at this epoch with an estimate
    //    no longer than its own fails alike, without trying.
    //    5c. With accept_unfit_gangs, a gang that can never fit the fleet
    //    as built is not tried (the answer is cached per shape until the
    //    nodes change).
    const bool known = group.KnownToFail(capacity_epoch_, offer.estimate);
    std::string never = known ? "" : NeverFitsPending(gang->spec);
    Attempt attempt = known           ? Attempt{group.reason}
                      : never.empty() ? TryAdmit(gang, now)
                                      : Attempt{std::move(never)};
    std::string& reason = attempt.reason;
    const bool never_fits = reason.starts_with(kNeverFitsPrefix);
    // 6. Preempt: cheapest sufficient victims of lower priority (or
    //    borrowing beyond nominal in the cohort), only on a fresh attempt.
    bool preempting = false;
    if (!reason.empty() && !known && !never_fits &&
        !reason.starts_with("QUEUE_HELD")) {
      if (auto started = TryPreempt(gang, now)) {
        reason = *started;
        preempting = true;
      }
    }
    // Unless reserved nodes were what it lacked, a shorter estimate would
    // not have helped: the whole group fails alike.
    if (!reason.empty() && !preempting) {
      group.RecordFailure(
          capacity_epoch_,
          attempt.backfill_matters ? offer.estimate : -absl::InfiniteDuration(),
          reason);
    }
    // 7. Reserve: a head gang that does not fit reserves the domain where
    //    it can start soonest.
    if (!reason.empty() && !preempting && !never_fits &&
        !reason.starts_with("QUOTA") && !reason.starts_with("QUEUE_HELD")) {
      if (auto reserved = ReserveFor(gang, now)) {
        reason = absl::StrCat(*reserved, " (", reason, ")");
      }
    }
    // 8. Every gang left pending carries its reason.
    if (!reason.empty()) {
      SetReason(gang, std::move(reason));
      if (config_.admission.strict_fifo) blocker = gang;
    } else {
      free_gpus -= gang->spec.TotalGpus();
    }
    // A group known to fail is left for this cycle, unless this gang now
    // holds a reservation and more may be made (depth > 1): its next
    // member may reserve too (at most `depth` members are offered so).
    const bool reserve_more =
        ReservationOf(gang->id) != nullptr &&
        MayReserve(gang->spec.priority, gang->submit_time, now);
    order.Advance(group.AllKnownToFail(capacity_epoch_) &&
                  !config_.admission.strict_fifo && !reserve_more);
  }
  // 4b. The gangs an early stop did not reach: the shared cause, once per
  //     group whose members do not all carry it yet (so a stalled cycle
  //     still costs the number of groups).
  if (!stopped_because.empty()) StampUnreached(stopped_because);
  // 9. New reservations are events; a changed set may let others fit.
  //    Gangs that joined a group known to fail get its reason; gangs whose
  //    reservation went (a config change, a re-plan) lose its reason.
  AnnounceReservations(previous, now);
  reservations_epoch_ = capacity_epoch_;
  SettleJoinedGangs();
  ClearLostReservations(previous);
}

void Scheduler::StampUnreached(const std::string& reason) {
  for (auto& [key, group] : pending_.groups()) {
    // A group that failed at this epoch was reached (or is known to fail):
    // its reasons are true. A group stamped with this reason already needs
    // only the members that joined or changed since.
    const bool again = group.keeps_any_stamp || group.stamped == reason;
    if (group.members.empty() || group.failed_epoch == capacity_epoch_ ||
        (again && group.unstamped.empty())) {
      continue;
    }
    // A gang holding a reservation keeps saying so, and one an attempt
    // found not to fit keeps its NO_FIT reason (both still true; rewriting
    // them every time the cycle stops at another place would only churn
    // writes). The group counts as stamped all the same: a holder that
    // loses its reservation gets another reason through SetReason
    // (ClearLostReservations), which lists it in `unstamped`, so the next
    // stamp visits it then — and the group is not walked again on every
    // stalled cycle while the reservation stands.
    auto stamp = [&](const GangId& id) {
      // A preemptor waiting for its victims was reached: PREEMPTING holds.
      if (ReservationOf(id) != nullptr || held_for_.contains(id)) return;
      const GangPtr& gang = gangs_.at(id);
      if (gang->reason.starts_with("NO_FIT")) return;
      SetReason(gang, reason);
    };
    const std::vector<GangId> unstamped = std::move(group.unstamped);
    group.unstamped.clear();
    if (again) {
      for (const GangId& id : unstamped) {
        if (pending_.GroupOf(id) == &group) stamp(id);
      }
    } else {
      for (const PendingKey& member : group.members) stamp(member.id);
    }
    group.unstamped.clear();
    group.stamped = reason;
    group.keeps_any_stamp = false;
  }
}

void Scheduler::ClearLostReservations(
    const std::vector<Reservation>& previous) {
  for (const Reservation& lost : previous) {
    if (ReservationOf(lost.gang) != nullptr) continue;
    const GangPtr gang = FindGang(lost.gang);
    if (gang == nullptr || gang->state != GangState::kPending ||
        !gang->reason.starts_with("RESERVED: ")) {
      continue;
    }
    // "RESERVED: … (why it did not fit)": keep the cause, drop the hold.
    std::string reason = kWaitingReason;
    if (const size_t open = gang->reason.find(" (");
        open != std::string::npos && gang->reason.ends_with(")")) {
      reason = gang->reason.substr(open + 2, gang->reason.size() - open - 3);
    }
    SetReason(gang, std::move(reason));
  }
}

// A full plan weighs every domain of a level (a pass over the fleet), so
// like Slurm's backfill interval it runs at most this often while capacity
// keeps changing; in between, each kept reservation is re-estimated on its
// own domain.
constexpr absl::Duration kFullReplanInterval = absl::Seconds(10);

void Scheduler::KeepOrReplanReservations(absl::Time now) {
  const bool moved = reservations_epoch_ != capacity_epoch_;
  const bool resized = reserved_slot_.size() != fleet_.slots().size();
  const bool due = now - reservations_planned_at_ >= kFullReplanInterval;
  if (!resized && !(moved || (reservations_refreshed_ && due))) return;
  if (resized || due) {
    reservations_.clear();
    reservations_planned_at_ = now;
    reservations_refreshed_ = false;
  } else {
    reservations_refreshed_ = true;  // a full plan is owed once due
  }
  std::vector<Reservation> kept;
  std::vector<char> taken(fleet_.slots().size(), 0);
  for (const Reservation& reservation : reservations_) {
    if (static_cast<int>(kept.size()) >= config_.reservation.depth) break;
    const GangPtr gang = FindGang(reservation.gang);
    if (gang == nullptr || gang->state != GangState::kPending) continue;
    std::optional<Reservation> again = RefreshReservation(
        reservation, *gang, fleet_, taken,
        [this](const GangId& id) { return PeekGang(id); }, now);
    if (!again || !WithinWindow(*again, now)) continue;
    for (int slot : ReservedSlots(*again)) taken[slot] = 1;
    kept.push_back(*std::move(again));
  }
  reservations_ = std::move(kept);
  reserved_slot_.assign(fleet_.slots().size(), -1);
  for (size_t r = 0; r < reservations_.size(); ++r) {
    for (int slot : ReservedSlots(reservations_[r])) {
      if (reserved_slot_[slot] < 0) reserved_slot_[slot] = static_cast<int>(r);
    }
  }
  restricted_slots_.reset();
}

std::function<bool(const PendingKey&)> Scheduler::CouldReserveNow(
    absl::Time now) {
  if (config_.admission.strict_fifo) return nullptr;
  return [this, now](const PendingKey& key) {
    return MayReserve(key.priority, key.submit_time, now);
  };
}

void Scheduler::SettleJoinedGangs() {
  for (auto& [key, group] : pending_.groups()) {
    const bool known = group.failed_epoch == capacity_epoch_;
    for (const GangId& id : group.joined) {
      if (!known || pending_.GroupOf(id) != &group) continue;
      const GangPtr& gang = gangs_.at(id);
      if (gang->reason == kWaitingReason &&
          group.KnownToFail(capacity_epoch_, PendingKeyOf(*gang).estimate)) {
        SetReason(gang, group.reason);
      }
    }
    group.joined.clear();
  }
  pending_.DropEmptyGroups();
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
  CycleOrder order(*this, nullptr);
  for (auto offer = order.Next(); offer.gang != nullptr; offer = order.Next()) {
    out.push_back(offer.gang);
    order.Advance(false);
  }
  return out;
}

}  // namespace phalanx::core
