// Preemptor: picks and starts preemptions for a gang that does not fit
// (docs/design.md §4 step 6). A gang that does not fit may preempt
// lower-priority gangs of its own queue, or reclaim its nominal quota from
// gangs of sibling queues that borrow. Victims are chosen by the work they
// would lose (GPU-seconds since their last checkpoint), gangs younger than
// min_runtime are spared, victims that turn out unnecessary are dropped, and
// no preemption throws away more GPU-seconds than the preemptor would wait
// for capacity to free up on its own (so one that is due soon just waits).
// Two optional limits: only gangs of a priority tier preempt
// (min_preemptor_priority), and only victims that checkpointed recently are
// taken (max_victim_loss). Victims go to PREEMPTING for a grace period while
// their GPUs stay held for the preemptor (PreemptionBook).
//
// An elastic victim above its minimum size (core/elastic.h) is first offered
// as a shrink to its minimum: PREEMPTING with shrink_to set, only the pods
// above it released at the end of the grace period (core/resizer.h). Only
// when shrinks cannot make room are elastic victims taken whole.
//
// A gang holding a reservation also takes its nodes back from gangs of no
// higher priority that run there on loan (ReservationConfig::
// preemptible_backfill; TakeBackLoans), whatever their queue and whatever
// its own tier: the loan is what they were admitted on, so no budget bounds
// their lost work.
//
// No loops: a victim has strictly lower priority than its preemptor in the
// same queue, or belongs to a queue above its nominal quota while the
// preemptor's queue stays within its own — so a victim can never preempt
// its preemptor back. A gang whose loan was taken back may later reclaim
// quota from its taker by the second rule, but it then runs without a loan,
// so that taker cannot take it back again.
//
// Lives for one call on a Scheduler's owners; not thread-safe.
#ifndef PHALANX_CORE_PREEMPTOR_H_
#define PHALANX_CORE_PREEMPTOR_H_

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/scheduler_state.h"

namespace phalanx::core {

class Preemptor {
 public:
  Preemptor(SchedulerState& s, absl::Time now) : s_(s), now_(now) {}

  // Picks the cheapest sufficient set of victims for `gang` and moves them
  // to PREEMPTING; returns the gang's pending reason, or nullopt (nothing
  // changed).
  std::optional<std::string> TryPreempt(const GangPtr& gang);
  // For `gang`, which holds a reservation: when it would fit on its
  // reserved nodes once the gangs on loan there that it may take back
  // (MayTakeBack) are gone, moves a cheapest sufficient set of them to
  // PREEMPTING (min_runtime guards them as any victim; an elastic one goes
  // whole); returns its pending reason, or nullopt (nothing changed).
  std::optional<std::string> TakeBackLoans(const GangPtr& gang);

 private:
  // Which gangs a preemptor may take capacity from: its own queue's lower
  // priorities, and sibling queues above nominal when it reclaims.
  struct VictimRules {
    QueueName queue;
    int priority = 0;
    std::set<QueueName> reclaim_from;
  };
  VictimRules RulesFor(const Gang& preemptor) const;
  // A victim taken whole (keep 0) or shrunk to `keep` pods of its elastic
  // pod set.
  struct Victim {
    GangPtr gang;
    int keep = 0;
  };
  struct Candidate {
    double cost = 0;  // GPU-seconds of work lost
    Victim victim;
  };
  // The pods `victim` gives up: all, or those of its elastic pod set from
  // index `keep` up.
  static std::vector<PodPlacement> Released(const Victim& victim);
  // Whether `victim` is of a kind the rules allow (min_runtime aside).
  static bool IsVictim(const Gang& victim, const VictimRules& rules);
  // The candidates of `rules`, with the work each would lose; sets the
  // wake-up for the first one min_runtime still guards.
  // An elastic candidate above its minimum is offered as a shrink.
  std::vector<Candidate> Candidates(const VictimRules& rules);
  // The cheapest sufficient victims among `candidates` within `budget`,
  // or nullopt when they do not make room.
  std::optional<std::vector<Victim>> Choose(const GangPtr& gang,
                                            std::vector<Candidate> candidates,
                                            double budget);
  // GPU-seconds of work a preemption for `gang` may throw away: its GPUs
  // times how long it would wait for capacity to free up on its own,
  // capped at preemption.horizon; none when it is due within the grace
  // period.
  double Budget(const Gang& gang);
  // Whether `gang` fits once `victims` are gone (tentatively released).
  bool FitsWithout(const GangPtr& gang, const std::vector<Victim>& victims);
  void SetAside(const Victim& victim);  // its capacity freed, tentatively
  void PutBack(const Victim& victim);   // undoes SetAside
  bool FitsAsIs(const GangPtr& gang);   // holds for others respected
  // Whether preemption.min_runtime still guards `victim` (admitted, holding
  // capacity); sets the wake-up for when it passes.
  bool GuardedByMinRuntime(const Gang& victim);
  // The gangs on loan on `slots` that `gang` may take back, past
  // min_runtime (sets the wake-up for the first one it still guards).
  std::vector<Candidate> LoansOn(const Gang& gang,
                                 const std::vector<int>& slots);
  // Moves `victims` to PREEMPTING, holding their nodes for `gang`; returns
  // their ids.
  std::vector<std::string> Start(const GangPtr& gang,
                                 const std::vector<Victim>& victims);

  SchedulerState& s_;
  const absl::Time now_;
  // Per fleet slot, whether FitsAsIs may place there; empty = every slot
  // (TakeBackLoans: the reserved nodes only).
  std::vector<char> within_;
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_PREEMPTOR_H_
