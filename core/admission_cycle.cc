// The admission cycle (docs/design.md §4) and its helpers.
#include "core/admission_cycle.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "core/check.h"
#include "core/domain_score.h"
#include "core/elastic.h"
#include "core/housekeeping.h"
#include "core/planner.h"
#include "core/preemptor.h"
#include "core/resizer.h"
#include "core/scheduler_types.h"
#include "core/spec_checks.h"

namespace phalanx::core {
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

void AdmissionCycle::Run() {
  // 1. Housekeeping: expire idempotency keys, apply retention, sample the
  //    fair-share ledger at least every sample interval, fire lifecycle
  //    timers, fail gangs whose lease lapsed, heartbeat timeouts and drain
  //    deadlines (their gangs are repaired or evicted), wake up for time-based
  //    eligibility. Reservations are kept while nothing changed; when the
  //    capacity epoch moved they are re-estimated on their own nodes, and
  //    re-planned from scratch at most every few seconds.
  Housekeeping(s_, now_).Run();
  if (s_.preemptions_.TakeWakeup(now_)) s_.BumpEpoch();
  const std::vector<Reservation> previous = s_.reservations_.all();
  if (s_.reservations_.KeepOrReplan(s_.config_.reservation, s_.capacity_epoch_,
                                    s_.fleet_, s_.gangs_, now_)) {
    s_.fits_.ForgetRestricted();
  }

  // 2. Preemptors whose victims have all stopped take the capacity held for
  //    them first (their holds set them apart from their groups); one that
  //    still does not fit lets it go.
  AdmitPreemptors();

  // 3. Order: priority, fair-share score, submit time, id (or as configured);
  //    a queue is re-scored after each admission from it. Gangs known to
  //    fail at this epoch (5b) are passed over, a whole group at a time,
  //    unless one of them could still make a reservation.
  const int64_t& epoch = s_.capacity_epoch_;
  const Config& config = s_.config_;
  CycleOrder order(s_.gangs_, s_.quotas_, config.admission, epoch,
                   CouldReserveNow(), now_);
  GangPtr blocker;
  ReasonCode stopped_code = ReasonCode::kNone;
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
      stopped_code = ReasonCode::kStrictFifo;
      stopped_because =
          absl::StrCat("WAITING: strict FIFO: behind gang ",
                       blocker->id.value(), ", which does not fit");
      break;
    }
    if (free_gpus == 0 && !MayPreemptFrom(*gang) &&
        s_.reservations_.size() >= config.reservation.depth &&
        gang->spec.TotalGpus() > 0) {
      stopped_code = ReasonCode::kNoFit;
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
    const bool known = group.KnownToFail(epoch, offer.estimate);
    std::string never =
        known ? ""
              : NeverFitsPending(gang->spec, s_.config_, s_.fleet_, s_.fits_);
    Attempt attempt = known ? Attempt{group.reason_code, group.reason}
                      : never.empty()
                          ? TryAdmit(gang)
                          : Attempt{ReasonCode::kNeverFits, std::move(never)};
    ReasonCode& code = attempt.code;
    std::string& reason = attempt.reason;
    const bool never_fits = code == ReasonCode::kNeverFits;
    // 6. Preempt: cheapest sufficient victims of lower priority (or
    //    borrowing beyond nominal in the cohort), only on a fresh attempt.
    bool preempting = false;
    bool took_back_tried = false;
    if (!reason.empty() && !known && !never_fits &&
        code != ReasonCode::kQueueHeld) {
      // A gang holding a reservation first takes back its nodes on loan.
      Preemptor preemptor(s_, now_);
      std::optional<std::string> started = preemptor.TakeBackLoans(gang);
      took_back_tried = s_.reservations_.Of(gang->id) != nullptr;
      if (!started) started = preemptor.TryPreempt(gang);
      if (started) {
        code = ReasonCode::kPreempting;
        reason = *started;
        preempting = true;
      }
    }
    // Unless reserved nodes were what it lacked, a shorter estimate would
    // not have helped: the whole group fails alike.
    if (!reason.empty() && !preempting) {
      group.RecordFailure(
          epoch,
          attempt.backfill_matters ? offer.estimate : -absl::InfiniteDuration(),
          code, reason);
    }
    // 7. Reserve: a head gang that does not fit reserves the domain where
    //    it can start soonest.
    if (!reason.empty() && !preempting && !never_fits &&
        (code != ReasonCode::kQuota || QuotaWaitsForLending(*gang)) &&
        code != ReasonCode::kQueueHeld) {
      if (auto reserved = ReserveFor(gang, {code, reason})) {
        code = ReasonCode::kReserved;
        reason = absl::StrCat(*reserved, " (", reason, ")");
        // 7b. Its nodes are taken back from gangs on loan there once they
        //     are all it waits for (their capacity, or the quota they
        //     borrow), unless step 6 already tried on this reservation.
        std::optional<std::string> taking_back;
        if (!took_back_tried) {
          taking_back = Preemptor(s_, now_).TakeBackLoans(gang);
        }
        if (taking_back) {
          code = ReasonCode::kPreempting;
          reason = *std::move(taking_back);
        }
      }
    }
    // 8. Every gang left pending carries its reason.
    if (!reason.empty()) {
      s_.SetReason(gang, code, std::move(reason));
      if (config.admission.strict_fifo) blocker = gang;
    } else {
      free_gpus -= PlacedGpus(*s_.gangs_.Find(gang->id));
    }
    // A group known to fail is left for this cycle, unless this gang now
    // holds a reservation and more may be made (depth > 1): its next
    // member may reserve too (at most `depth` members are offered so).
    const bool reserve_more =
        s_.reservations_.Of(gang->id) != nullptr && MayReserve(*gang);
    order.Advance(group.AllKnownToFail(epoch) &&
                  !config.admission.strict_fifo && !reserve_more);
  }
  // 4b. The gangs an early stop did not reach: the shared cause, once per
  //     group whose members do not all carry it yet (so a stalled cycle
  //     still costs the number of groups).
  if (!stopped_because.empty()) StampUnreached(stopped_code, stopped_because);
  // 4c. Running elastic gangs grow onto what no pending gang could take
  //     (core/resizer.h).
  Resizer(s_, now_).GrowRunning(FreeReadyGpus());
  // 9. New reservations are events; a changed set may let others fit.
  //    Gangs that joined a group known to fail get its reason; gangs whose
  //    reservation went (a config change, a re-plan) lose its reason.
  AnnounceReservations(previous);
  s_.reservations_.PlannedAt(s_.capacity_epoch_);
  SettleJoinedGangs();
  ClearLostReservations(previous);
  // 10. A binding plan: every pending gang's expected start, made again
  //     every planning interval, new arrivals appended between. (A plan
  //     that only estimates is made when read: Scheduler::UpdatePlan.)
  if (s_.config_.planning.binding) Planner(s_, now_).Run();
}

AdmissionCycle::Attempt AdmissionCycle::TryAdmit(const GangPtr& gang) {
  const Queue& queue = s_.quotas_.queues().at(gang->spec.queue);
  if (queue.held) {
    return {ReasonCode::kQueueHeld,
            absl::StrCat("QUEUE_HELD: queue ", queue.name.value(), " is held")};
  }
  PlacementOptions options = s_.OptionsFor(queue);
  options.node_rank = NodeRanker(*gang);
  const ReservationBook& reservations = s_.reservations_;
  const PreemptionBook& holds = s_.preemptions_;
  const Plan& plan = s_.plan_;
  const bool planned =
      s_.config_.planning.binding && !plan.BindingSlots().empty();
  std::optional<PlanRoom> room;
  if (planned) {
    const int rank = plan.RankOf(gang->id);
    // A planned gang runs as long as the plan expects (gangs behind it were
    // planned around that); one the plan has not seen needs an estimate.
    const absl::Time end =
        rank > 0
            ? now_ + PlannedRuntime(*gang, s_.config_.planning.default_runtime)
            : BackfillEnd(*gang, now_);
    room.emplace(plan, rank, gang->spec.priority, now_, end);
  }
  if (!reservations.empty() || !holds.held_for().empty() || planned) {
    options.node_allowed = [this, &gang, &reservations, &holds](int slot) {
      const Reservation* r = reservations.AtSlot(slot);
      return (r == nullptr || MayUse(*gang, *r)) &&
             !holds.HeldForOther(slot, gang->id, s_.fleet_);
    };
    options.restricted_slots = &s_.RestrictedSlots();
  }
  PlacementResult placement = PlaceWithinPlan(*gang, options, room);
  // An elastic gang that does not fit whole starts at the largest size
  // that fits.
  Gang sized;
  const Gang* shape = gang.get();
  if (!placement.placed && IsElastic(gang->spec)) {
    sized = *gang;
    placement = PlaceLargestSize(
        gang->spec,
        [&](const GangSpec& spec) {
          sized.spec = spec;
          return PlaceWithinPlan(sized, options, room);
        },
        &sized.spec);
    if (placement.placed) shape = &sized;
  }
  if (!placement.placed) ReleaseOverduePlan(*gang);
  if (!placement.placed && planned && placement.code != ReasonCode::kQuota) {
    if (auto why = BlockedByPlan(gang, queue)) {
      return {ReasonCode::kBlockedByReservation, *std::move(why),
              /*backfill_matters=*/true};
    }
  }
  if (!placement.placed) {
    // With rights to every reservation it was offered all the nodes.
    const bool may_use_all =
        std::all_of(reservations.all().begin(), reservations.all().end(),
                    [&](const Reservation& r) { return MayUse(*gang, r); });
    if (!may_use_all && placement.code != ReasonCode::kQuota) {
      if (auto why = BlockedByReservation(gang, queue)) {
        return {ReasonCode::kBlockedByReservation, *std::move(why),
                /*backfill_matters=*/true};
      }
    }
    return {placement.code, std::move(placement.reason)};
  }
  if (s_.config_.placement.domain_end_time_packing) {
    PackByDomainEnd(*shape, options, room, placement);
  }
  const bool on_loan = OnLoan(*gang, placement.pods);
  s_.Admit(gang, std::move(placement.pods), now_, on_loan);
  return {};
}

bool AdmissionCycle::MayBorrow(const Gang& gang,
                               const Reservation& reservation) const {
  const Config& config = s_.config_;
  if (!config.reservation.preemptible_backfill || !config.preemption.enabled ||
      gang.id == reservation.gang) {
    return false;
  }
  const Gang* holder = s_.gangs_.Peek(reservation.gang);
  return holder != nullptr && gang.spec.priority <= holder->spec.priority;
}

bool AdmissionCycle::MayUse(const Gang& gang,
                            const Reservation& reservation) const {
  return ReservationBook::MayBackfill(gang, reservation, now_) ||
         MayBorrow(gang, reservation);
}

bool AdmissionCycle::OnLoan(const Gang& gang,
                            const std::vector<PodPlacement>& pods) const {
  // Without the lever no placement takes a node it could not backfill.
  if (!s_.config_.reservation.preemptible_backfill ||
      s_.reservations_.empty()) {
    return false;
  }
  for (const PodPlacement& pod : pods) {
    const int slot = s_.fleet_.Find(pod.node);
    const Reservation* r = slot < 0 ? nullptr : s_.reservations_.AtSlot(slot);
    if (r != nullptr && !ReservationBook::MayBackfill(gang, *r, now_)) {
      return true;
    }
  }
  return false;
}

absl::Time AdmissionCycle::LatestEndIn(int domain) const {
  const Fleet& fleet = s_.fleet_;
  const Fleet::Domain& d = fleet.domains()[domain];
  absl::Time latest = absl::InfinitePast();
  for (int i = d.node_begin; i < d.node_end; ++i) {
    for (const Fleet::GangPods& on : fleet.slots()[i].gang_pods) {
      if (const Gang* holder = s_.gangs_.Peek(on.gang)) {
        latest = std::max(latest, ExpectedEnd(*holder, now_));
      }
    }
  }
  return latest;
}

void AdmissionCycle::PackByDomainEnd(const Gang& gang,
                                     const PlacementOptions& options,
                                     std::optional<PlanRoom>& room,
                                     PlacementResult& placement) {
  const Fleet& fleet = s_.fleet_;
  if (gang.spec.estimated_runtime <= absl::ZeroDuration() ||
      s_.config_.placement.first_fit) {
    return;
  }
  const int level = CommonRequiredLevel(gang.spec, fleet);
  if (level < 0 || placement.pods.empty()) return;
  const int first = fleet.Find(placement.pods.front().node);
  const absl::Time end = now_ + gang.spec.estimated_runtime;
  // Rank every domain of the level (best fit's choice first among equals,
  // the others in fleet order), then take the best-ranked one the gang
  // fits in: best fit's own placement when that is its domain.
  std::vector<std::pair<DomainRank, int>> ranked;
  int order = 1;
  for (int domain : fleet.DomainsAtLevel(level)) {
    const Fleet::Domain& d = fleet.domains()[domain];
    const bool chosen = first >= d.node_begin && first < d.node_end;
    ranked.emplace_back(
        RankDomain(LatestEndIn(domain), end, now_, chosen ? 0 : order++),
        domain);
  }
  std::sort(ranked.begin(), ranked.end());
  for (const auto& [rank, domain] : ranked) {
    if (rank.best_fit_order == 0) return;  // best fit's placement stands
    PlacementOptions inside = options;
    inside.within_domain = domain;
    PlacementResult there = PlaceGang(gang.spec, s_.fleet_, inside);
    if (!there.placed || (room && !room->Excess(there.pods, fleet).empty())) {
      continue;
    }
    placement = std::move(there);
    return;
  }
}

std::function<NodeRank(int, int)> AdmissionCycle::NodeRanker(
    const Gang& gang) const {
  const PlacementConfig& config = s_.config_.placement;
  if (!config.end_time_packing && !config.fragmentation_scoring) return {};
  const absl::Time end = gang.spec.estimated_runtime > absl::ZeroDuration()
                             ? now_ + gang.spec.estimated_runtime
                             : absl::InfiniteFuture();
  const Fleet& fleet = s_.fleet_;
  const GangTable& gangs = s_.gangs_;
  return [&fleet, &gangs, end, now = now_, config](int slot, int gpus) {
    const Fleet::Slot& s = fleet.slots()[slot];
    ScoredNode node{s.node.spec.gpu_count, s.FreeGpus(), absl::InfinitePast()};
    if (config.end_time_packing) {
      for (const Fleet::GangPods& on : s.gang_pods) {
        if (const Gang* holder = gangs.Peek(on.gang)) {
          node.latest_end =
              std::max(node.latest_end, ExpectedEnd(*holder, now));
        }
      }
    }
    return RankNode(node, ScoredPod{gpus, end}, config.fragmentation_scoring,
                    config.end_time_packing);
  };
}

int64_t AdmissionCycle::FreeReadyGpus() const {
  const FreeIndex& index = s_.fleet_.free_index();
  int64_t free = 0;
  for (int gpus = 1; gpus <= index.max_gpus(); ++gpus) {
    free += gpus * index.Nodes(/*domain=*/0, index.any_model(), gpus);
  }
  return free;
}

void AdmissionCycle::AdmitPreemptors() {
  if (s_.preemptions_.held_for().empty()) return;
  for (const GangId& id : s_.preemptions_.ReadyPreemptors()) {
    const GangPtr gang = s_.gangs_.Find(id);
    if (gang == nullptr || gang->state != GangState::kPending) {
      s_.DropHolds(id);
      continue;
    }
    Attempt attempt = TryAdmit(gang);
    if (attempt.reason.empty()) continue;
    s_.DropHolds(id);  // it did not fit even so; it may try again
    s_.SetReason(gang, attempt.code, std::move(attempt.reason));
  }
}

bool AdmissionCycle::QuotaWaitsForLending(const Gang& gang) const {
  if (!s_.config_.reservation.for_quota_waits) return false;
  const Queue& queue = s_.quotas_.queues().at(gang.spec.queue);
  // An elastic gang reserves for its minimum size (Reserve).
  const int64_t gpus = MinimumSpec(gang.spec).TotalGpus();
  for (const std::string& model : s_.fleet_.Models()) {
    if (AcceptsModel(gang.spec, model) &&
        !s_.quotas_.QuotaReason(queue, model, gpus).empty() &&
        s_.quotas_.WaitsForLending(queue, model, gpus)) {
      return true;
    }
  }
  return false;
}

bool AdmissionCycle::MayReserve(const Gang& gang) const {
  return s_.reservations_.MayReserve(s_.config_.reservation, gang.spec.priority,
                                     gang.submit_time, now_);
}

std::optional<std::string> AdmissionCycle::ReserveFor(
    const GangPtr& gang, const ReservationBook::Cause& cause) {
  std::optional<std::string> reserved;
  if (const Reservation* held = s_.reservations_.Of(gang->id)) {
    reserved = ReservedReason(*held);
  } else if (MayReserve(*gang)) {
    reserved = Reserve(gang);
  }
  if (reserved) s_.reservations_.NoteCause(gang->id, cause);
  return reserved;
}

bool AdmissionCycle::KnownUnreservable(const std::string& shape) {
  Unreservable& memo = unreservable_;
  const uint64_t version = s_.fleet_.version();
  const size_t reservations = s_.reservations_.all().size();
  const uint64_t holds = s_.preemptions_.hold_changes();
  if (memo.fleet_version != version || memo.reservations != reservations ||
      memo.hold_changes != holds) {
    memo = Unreservable{version, reservations, holds, {}};
  }
  return memo.shapes.contains(shape);
}

std::optional<std::string> AdmissionCycle::Reserve(const GangPtr& gang) {
  // An elastic gang reserves for its minimum size.
  if (IsElastic(gang->spec)) {
    Gang minimum = *gang;
    minimum.spec = MinimumSpec(gang->spec);
    return Reserve(std::make_shared<const Gang>(std::move(minimum)));
  }
  // A plan reads the gang's placement shape only, unless the gang holds
  // nodes of its own (they are not taken for it).
  std::string shape;
  if (!s_.preemptions_.HoldsFor(gang->id)) {
    shape = PlacementShapeKey(gang->spec);
    if (KnownUnreservable(shape)) return std::nullopt;
  }
  std::vector<char> taken = s_.reservations_.TakenSlots();
  for (size_t i = 0; i < taken.size(); ++i) {
    taken[i] = taken[i] || s_.preemptions_.HeldForOther(static_cast<int>(i),
                                                        gang->id, s_.fleet_);
  }
  // No running gang is expected to end before the earliest of their ends:
  // a bound that lets the plan skip domains that cannot win.
  const GangTable& gangs = s_.gangs_;
  std::optional<Reservation> reservation = PlanReservation(
      *gang, s_.fleet_, taken, [&gangs](GangHandle h) { return gangs.Peek(h); },
      now_, gangs.EarliestEnd(), s_.config_.reservation.choose_by_stranding);
  if (!reservation || !ReservationBook::WithinWindow(s_.config_.reservation,
                                                     *reservation, now_)) {
    if (!shape.empty()) unreservable_.shapes.insert(std::move(shape));
    return std::nullopt;
  }
  std::string reason = ReservedReason(*reservation);
  s_.reservations_.Add(*std::move(reservation), s_.fleet_);
  s_.fits_.ForgetRestricted();
  return reason;
}

std::string ReservedReason(const Reservation& reservation) {
  return absl::StrCat("RESERVED: ", reservation.nodes.size(), " nodes in ",
                      reservation.path.empty() ? "the fleet" : reservation.path,
                      " are held for it until ", reservation.gpus_to_release,
                      " GPUs are released");
}

std::optional<std::string> AdmissionCycle::BlockedByReservation(
    const GangPtr& gang, const Queue& queue) {
  PlacementResult free_for_all =
      PlaceGang(gang->spec, s_.fleet_, s_.OptionsFor(queue));
  if (!free_for_all.placed) return std::nullopt;
  for (const PodPlacement& pod : free_for_all.pods) {
    const Reservation* reservation =
        s_.reservations_.AtSlot(s_.fleet_.Find(pod.node));
    if (reservation == nullptr) continue;
    // The reason names no gang: it is shown to this gang's owner, who may
    // not see the queue of the gang the nodes are held for.
    return absl::StrCat(
        "RESERVED_FOR: it would fit in ",
        reservation->path.empty() ? "the fleet" : reservation->path,
        ", held for a gang ahead of it in line; ",
        gang->spec.estimated_runtime > absl::ZeroDuration()
            ? "it is not expected to end before that gang starts"
            : "without estimated_runtime it cannot backfill");
  }
  return std::nullopt;
}

void AdmissionCycle::ReleaseOverduePlan(const Gang& gang) {
  if (!s_.config_.planning.binding) return;  // the plan only estimates
  const Plan::Entry* entry = s_.plan_.EntryOf(gang.id);
  if (entry == nullptr || entry->start > now_ || !entry->binding) return;
  s_.plan_.Release(gang.id);
  s_.BumpEpoch();  // its capacity is open to others
}

PlacementResult AdmissionCycle::PlaceWithinPlan(const Gang& gang,
                                                const PlacementOptions& options,
                                                std::optional<PlanRoom>& room) {
  if (!room) {
    PlacementResult placement = PlaceOnPlannedNodes(gang, options);
    if (placement.placed) return placement;
    return PlaceGang(gang.spec, s_.fleet_, options);
  }
  // A gang whose planned start has come first tries to start without
  // taking what the plan gives anyone else, so every other start holds.
  const Plan::Entry* entry = s_.plan_.EntryOf(gang.id);
  if (entry != nullptr && entry->start <= now_) {
    PlanRoom everyone = room->BehindToo();
    PlacementResult placement = PlaceInRoom(gang, options, everyone);
    if (placement.placed) return placement;
  }
  return PlaceInRoom(gang, options, *room);
}

PlacementResult AdmissionCycle::PlaceInRoom(const Gang& gang,
                                            const PlacementOptions& options,
                                            PlanRoom& room) {
  PlacementOptions within = options;
  within.node_allowed = [&options, &room](int slot) {
    return (options.node_allowed == nullptr || options.node_allowed(slot)) &&
           room.Allows(slot);
  };
  // The placer asks only whether a node may be used. Where a placement
  // takes more of a node than the plan leaves the gang, the GPUs beyond its
  // room are held aside and it is placed again, a bounded number of times.
  constexpr int kAttempts = 4;
  Fleet& fleet = s_.fleet_;
  const uint64_t version = fleet.version();
  Gang holder;  // of the GPUs held aside; given its pod set when needed
  std::vector<std::vector<PodPlacement>> holds;
  PlacementResult placement;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    placement = PlaceOnPlannedNodes(gang, within);
    if (!placement.placed) placement = PlaceGang(gang.spec, fleet, within);
    if (!placement.placed) break;
    std::vector<PodPlacement> excess = room.Excess(placement.pods, fleet);
    if (excess.empty()) break;
    if (holder.spec.pod_sets.empty()) {
      holder.spec.pod_sets.emplace_back().name = "held";
    }
    PHALANX_CHECK(fleet.Allocate(holder, kNoGang, excess).ok());
    holds.push_back(std::move(excess));
    placement = {};
    placement.code = ReasonCode::kNoFit;
    placement.reason =
        "NO_FIT: it would fit now only on capacity planned for others";
  }
  for (auto hold = holds.rbegin(); hold != holds.rend(); ++hold) {
    fleet.Release(holder, kNoGang, *hold);
  }
  fleet.RestoreVersion(version);
  return placement;
}

PlacementResult AdmissionCycle::PlaceOnPlannedNodes(
    const Gang& gang, const PlacementOptions& options) {
  if (!s_.config_.planning.binding) return {};  // the plan only estimates
  const Plan::Entry* entry = s_.plan_.EntryOf(gang.id);
  if (entry == nullptr || entry->start > now_ || entry->uses.empty()) {
    return {};
  }
  std::vector<int> slots;
  for (const Plan::Use& use : entry->uses) slots.push_back(use.slot);
  PlacementOptions own = options;
  own.node_allowed = [&slots, &options](int slot) {
    return std::binary_search(slots.begin(), slots.end(), slot) &&
           (options.node_allowed == nullptr || options.node_allowed(slot));
  };
  own.restricted_slots = nullptr;
  PlacementResult placement = PlaceGang(gang.spec, s_.fleet_, own);
  if (!placement.placed) return placement;
  // Only as planned: more GPUs on a node than planned there could take
  // what the plan gives gangs behind it.
  absl::flat_hash_map<int, int> taken = GpusBySlot(placement.pods, s_.fleet_);
  for (const Plan::Use& use : entry->uses) {
    if (taken[use.slot] > use.gpus) return {};
  }
  return placement;
}

std::optional<std::string> AdmissionCycle::BlockedByPlan(const GangPtr& gang,
                                                         const Queue& queue) {
  PlacementOptions options = s_.OptionsFor(queue);
  const ReservationBook& reservations = s_.reservations_;
  const PreemptionBook& holds = s_.preemptions_;
  options.node_allowed = [this, &gang, &reservations, &holds](int slot) {
    const Reservation* r = reservations.AtSlot(slot);
    return (r == nullptr || MayUse(*gang, *r)) &&
           !holds.HeldForOther(slot, gang->id, s_.fleet_);
  };
  options.restricted_slots = &s_.RestrictedSlots();
  if (!PlaceGang(gang->spec, s_.fleet_, options).placed) return std::nullopt;
  // The reason names no gang: it is shown to this gang's owner, who may
  // not see the queue of the gangs the capacity is planned for.
  const bool planned = s_.plan_.RankOf(gang->id) > 0;
  return absl::StrCat(
      "PLANNED_FOR: it would fit now, on capacity planned for gangs ahead of "
      "it; ",
      planned || gang->spec.estimated_runtime > absl::ZeroDuration() ||
              gang->spec.max_runtime > absl::ZeroDuration()
          ? "it is not expected to end before they start"
          : "without estimated_runtime or max_runtime it cannot backfill");
}

bool AdmissionCycle::MayPreemptFrom(const Gang& gang) const {
  const Config& config = s_.config_;
  if (!config.preemption.enabled) return false;
  // A gang holding a reservation, at any priority, may take its nodes back
  // from gangs on loan.
  if (!s_.reservations_.empty() && s_.gangs_.AnyOnLoan()) return true;
  // In priority order every later gang has at most this one's priority: below
  // the preemptors' tier, none of them may preempt either. With a fair-share
  // tier, a later gang of that tier may have a higher priority than this
  // one, but stays below the tier's bound.
  const AdmissionConfig& admission = config.admission;
  const int min_priority = config.preemption.min_preemptor_priority;
  // With aging, a gang aged ahead may precede one of a higher priority.
  if (admission.aging_per_hour > 0) return true;
  if (admission.ordering != Ordering::kPriorityFairShareAge ||
      gang.spec.priority >= min_priority) {
    return true;
  }
  return gang.spec.priority < admission.fair_share_first_below_priority &&
         admission.fair_share_first_below_priority > min_priority;
}

CycleOrder::CouldReserve AdmissionCycle::CouldReserveNow() const {
  if (s_.config_.admission.strict_fifo) return nullptr;
  return [this](const PendingKey& key) {
    return s_.reservations_.MayReserve(s_.config_.reservation, key.priority,
                                       key.submit_time, now_);
  };
}

void AdmissionCycle::StampUnreached(ReasonCode code,
                                    const std::string& reason) {
  PendingIndex& pending = s_.gangs_.pending();
  for (auto& [key, group] : pending.groups()) {
    // A group that failed at this epoch was reached (or is known to fail):
    // its reasons are true. A group stamped with this reason already needs
    // only the members that joined or changed since.
    const bool again = group.keeps_any_stamp || group.stamped == reason;
    if (group.members.empty() || group.failed_epoch == s_.capacity_epoch_ ||
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
    auto stamp = [&](GangHandle handle) {
      const GangPtr& gang = s_.gangs_.At(handle);
      // A preemptor waiting for its victims was reached: PREEMPTING holds.
      if (s_.reservations_.Of(gang->id) != nullptr ||
          s_.preemptions_.HoldsFor(gang->id)) {
        return;
      }
      if (gang->reason_code == ReasonCode::kNoFit) return;
      s_.SetReason(gang, code, reason);
    };
    const std::vector<GangHandle> unstamped = std::move(group.unstamped);
    group.unstamped.clear();
    if (again) {
      for (GangHandle handle : unstamped) {
        if (pending.GroupOf(handle) == &group) stamp(handle);
      }
    } else {
      for (const PendingKey& member : group.members) stamp(member.handle);
    }
    group.unstamped.clear();
    group.stamped = reason;
    group.keeps_any_stamp = false;
  }
}

void AdmissionCycle::ClearLostReservations(
    const std::vector<Reservation>& previous) {
  for (const Reservation& lost : previous) {
    if (s_.reservations_.Of(lost.gang) != nullptr) continue;
    ReservationBook::Cause cause = s_.reservations_.TakeCause(lost.gang);
    const GangPtr gang = s_.gangs_.Find(lost.gang);
    if (gang == nullptr || gang->state != GangState::kPending) continue;
    s_.reservations_.NoteTakenOver(s_.config_.reservation, lost.gang);
    if (gang->reason_code != ReasonCode::kReserved) continue;
    // Keep the cause, drop the hold.
    if (cause.code == ReasonCode::kNone) {
      cause = {ReasonCode::kWaiting, kWaitingReason};
    }
    s_.SetReason(gang, cause.code, std::move(cause.reason));
  }
}

void AdmissionCycle::SettleJoinedGangs() {
  PendingIndex& pending = s_.gangs_.pending();
  for (auto& [key, group] : pending.groups()) {
    const bool known = group.failed_epoch == s_.capacity_epoch_;
    for (GangHandle handle : group.joined) {
      if (!known || pending.GroupOf(handle) != &group) continue;
      const GangPtr& gang = s_.gangs_.At(handle);
      if (gang->reason_code == ReasonCode::kWaiting &&
          group.KnownToFail(s_.capacity_epoch_, PendingKeyOf(*gang).estimate)) {
        s_.SetReason(gang, group.reason_code, group.reason);
      }
    }
    group.joined.clear();
  }
  pending.DropEmptyGroups();
}

void AdmissionCycle::AnnounceReservations(
    const std::vector<Reservation>& previous) {
  const std::vector<Reservation>& now_held = s_.reservations_.all();
  bool changed = previous.size() != now_held.size();
  for (const Reservation& reservation : now_held) {
    const bool known = std::any_of(
        previous.begin(), previous.end(), [&](const Reservation& p) {
          return p.gang == reservation.gang && p.domain == reservation.domain;
        });
    if (known) continue;
    changed = true;
    s_.Transition(*s_.gangs_.At(reservation.gang), EventType::kReserved, now_);
  }
  if (changed) s_.BumpEpoch();
}

}  // namespace phalanx::core
