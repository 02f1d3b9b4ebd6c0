// The fair-share tier, aging, job-size credit and reservation window levers,
// each switched by its own config field: a fair-share tier below a priority
// bound (admission.fair_share_first_below_priority), aging across queues
// (admission.aging_per_hour), a size credit in the fair-share order
// (admission.fair_share_size_credit) and a reservation time window like
// Slurm's bf_window (reservation.window). Table tests: the order keys,
// which gang a cycle admits, and when a reservation is made.
#include <string>

#include "core/fair_share.h"
#include "core/scheduler.h"
#include "core/testing.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using testing::kT0;
using testing::MakeNodes;
using testing::Spec;
using testing::WithEstimate;

constexpr int kOff = std::numeric_limits<int>::lowest();

TEST(TierKeysTest, TableKeysOrderTiersThenScoreThenPriority) {
  struct Case {
    std::string name;
    Ordering ordering;
    int bound;
    int priority;
    std::pair<int64_t, int64_t> keys;
  } cases[] = {
      {"priority order: -priority before the score",
       Ordering::kPriorityFairShareAge,
       kOff,
       2,
       {-2, 0}},
      {"priority order, lowest priority",
       Ordering::kPriorityFairShareAge,
       kOff,
       kOff,
       {-static_cast<int64_t>(kOff), 0}},
      {"score first: priority after the score",
       Ordering::kFairShareFirst,
       kOff,
       2,
       {0, -2}},
      {"score first ignores the bound",
       Ordering::kFairShareFirst,
       5,
       2,
       {0, -2}},
      {"bound 2: priority 1 is in the low tier",
       Ordering::kPriorityFairShareAge,
       2,
       1,
       {-1, -1}},
      {"bound 2: priority 0 shares the tier's key",
       Ordering::kPriorityFairShareAge,
       2,
       0,
       {-1, 0}},
      {"bound 2: priority 2 stands above the tier",
       Ordering::kPriorityFairShareAge,
       2,
       2,
       {-2, 0}},
      {"bound 2: a negative priority is in the tier",
       Ordering::kPriorityFairShareAge,
       2,
       -7,
       {-1, 7}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    AdmissionConfig config;
    config.ordering = c.ordering;
    config.fair_share_first_below_priority = c.bound;
    EXPECT_EQ(TierKeys(config, c.priority), c.keys);
  }
}

// Keys must keep a queue's own gangs in priority order (its bucket is sorted
// by priority): never a lower priority before a higher one.
TEST(TierKeysTest, KeysAreMonotoneInPriority) {
  for (int bound : {kOff, -3, 0, 1, 2, 100}) {
    AdmissionConfig config;
    config.fair_share_first_below_priority = bound;
    for (int p = -5; p < 5; ++p) {
      const auto low = TierKeys(config, p);
      const auto high = TierKeys(config, p + 1);
      EXPECT_LT(high, low) << "bound " << bound << " priority " << p;
    }
  }
}

class LeversTest : public testing::SchedulerFixture {
 protected:
  void Init(Config config, int nodes) {
    config.topology_levels = {"block", "rack"};
    SchedulerFixture::Init(config, MakeNodes(1, 1, nodes),
                           {testing::MakeQueue("a"), testing::MakeQueue("b")});
  }
};

// Two 8-GPU nodes; queue a holds one with a running gang, so its score is
// the higher. Pending: a's priority-1 gang and b's priority-0 gang, one
// node free: the order decides who gets it.
TEST_F(LeversTest, TableFairShareTierDecidesWhoGoesFirst) {
  struct Case {
    std::string name;
    Ordering ordering;
    int bound;
    bool low_usage_queue_first;
  } cases[] = {
      {"priority order: a's priority 1 first", Ordering::kPriorityFairShareAge,
       kOff, false},
      {"tier below 1: priority 1 stands above it",
       Ordering::kPriorityFairShareAge, 1, false},
      {"tier below 2: b's lower usage first", Ordering::kPriorityFairShareAge,
       2, true},
      {"score first (kueue-like): b first", Ordering::kFairShareFirst, kOff,
       true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    now_ = kT0;
    Config config;
    config.admission.ordering = c.ordering;
    config.admission.fair_share_first_below_priority = c.bound;
    config.preemption.enabled = false;
    config.reservation.depth = 0;
    Init(config, 2);
    GangPtr running = Submit(Spec("a").Pods(1, 8));
    Cycle();
    ASSERT_EQ(StateOf(running), GangState::kAdmitted);
    GangPtr high = Submit(Spec("a").Pods(1, 8).Priority(1));
    GangPtr low = Submit(Spec("b").Pods(1, 8));
    Cycle();
    EXPECT_EQ(StateOf(low) == GangState::kAdmitted, c.low_usage_queue_first);
    EXPECT_EQ(StateOf(high) == GangState::kAdmitted, !c.low_usage_queue_first);
  }
}

// The cycle's early exit ("no free GPU, nothing to reserve, no later gang
// may preempt") must not skip a preemptor that the tier puts behind a gang
// of lower priority: one full node, b's priority-0 gang first in the tier,
// then a's priority-1 gang, which preempts a's own running priority-0 gang.
TEST_F(LeversTest, EarlyExitStillReachesAPreemptorBehindTheTier) {
  Config config;
  config.admission.fair_share_first_below_priority = 2;
  config.reservation.depth = 0;
  Init(config, 1);
  GangPtr victim = Submit(Spec("a").Pods(1, 8));
  Cycle();
  ASSERT_EQ(StateOf(victim), GangState::kAdmitted);
  now_ += absl::Minutes(30);  // past preemption.min_runtime, within the
                              // loss one preemption may cost
  GangPtr first = Submit(Spec("b").Pods(1, 8));
  GangPtr preemptor = Submit(Spec("a").Pods(1, 8).Priority(1));
  Cycle();
  EXPECT_EQ(StateOf(first), GangState::kPending);
  EXPECT_EQ(StateOf(victim), GangState::kPreempting)
      << scheduler_->FindGang(preemptor->id)->reason;
}

// One rack of two 8-GPU nodes: X runs on one for 10 h; P needs both (start
// in 10 h), so it would hold the free node. S (8 GPUs, 20 h) can only
// take that node if P holds nothing.
TEST_F(LeversTest, TableReservationWindow) {
  struct Case {
    std::string name;
    absl::Duration window;
    bool reserved;
  } cases[] = {
      {"no window: P reserves", absl::ZeroDuration(), true},
      {"window 24 h covers the start: P reserves", absl::Hours(24), true},
      {"window 2 h: P reserves nothing, S starts", absl::Hours(2), false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    now_ = kT0;
    Config config;
    config.reservation.window = c.window;
    config.preemption.enabled = false;
    config.planning.max_gangs = 0;  // the reservation alone
    Init(config, 2);
    Submit(WithEstimate(Spec("a").Pods(1, 8), absl::Hours(10)));
    Cycle();
    GangPtr p = Submit(
        WithEstimate(Spec("a").Pods(2, 8).Required("rack"), absl::Hours(1)));
    Cycle();
    EXPECT_EQ(scheduler_->reservations().size(), c.reserved ? 1u : 0u)
        << scheduler_->FindGang(p->id)->reason;
    GangPtr s = Submit(WithEstimate(Spec("b").Pods(1, 8), absl::Hours(20)));
    Cycle();
    EXPECT_EQ(StateOf(s) == GangState::kAdmitted, !c.reserved);
  }
}

// Plan protection (reservation.max_takeovers). One rack of five 8-GPU
// nodes: X, Y, Z1 and Z2 run (10 h each), one node is free. H (priority 0,
// four nodes) reserves (depth 1). A later gang of priority 1 asking for the
// same four nodes goes ahead of H in the order, so the full re-plan that
// follows a change of capacity (Z1, later Z2, cancelled) gives it the one
// reservation — unless H is protected. Round 2 repeats that after the first
// challenger is cancelled and H has reserved again.
TEST_F(LeversTest, TablePlanProtectionBoundsTakeovers) {
  struct Case {
    std::string name;
    int max_takeovers;
    bool h_holds_after_round_1;
    bool h_holds_after_round_2;
  } cases[] = {
      {"no protection: every later gang of a higher priority takes it", -1,
       false, false},
      {"0: a reservation once made is never taken over", 0, true, true},
      {"1: taken over once, kept the second time", 1, false, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    now_ = kT0;
    Config config;
    config.reservation.depth = 1;
    config.reservation.max_takeovers = c.max_takeovers;
    config.preemption.enabled = false;
    config.planning.max_gangs = 0;  // the reservations alone
    Init(config, 5);
    for (int i = 0; i < 2; ++i) {
      Submit(WithEstimate(Spec("a").Pods(1, 8), absl::Hours(10)));
    }
    GangPtr z1 = Submit(WithEstimate(Spec("a").Pods(1, 8), absl::Hours(10)));
    GangPtr z2 = Submit(WithEstimate(Spec("a").Pods(1, 8), absl::Hours(10)));
    Cycle();
    GangPtr h = Submit(WithEstimate(Spec("a").Pods(4, 8), absl::Hours(1)));
    Cycle();
    auto holder = [&] {
      const auto& all = scheduler_->reservations();
      return all.size() == 1 ? all[0].gang : GangId();
    };
    ASSERT_EQ(holder(), h->id) << Get(h)->reason;
    auto challenge = [&](const GangPtr& freed) {
      GangPtr challenger = Submit(
          WithEstimate(Spec("b").Pods(4, 8).Priority(1), absl::Hours(1)));
      Cycle(absl::Seconds(20));
      EXPECT_TRUE(scheduler_->Cancel(freed->id, "", now_).ok());
      Cycle(absl::Seconds(20));  // a full re-plan: capacity changed
      EXPECT_EQ(StateOf(h), GangState::kPending);
      return challenger;
    };
    GangPtr first = challenge(z1);
    EXPECT_EQ(holder() == h->id, c.h_holds_after_round_1) << Get(h)->reason;
    EXPECT_TRUE(scheduler_->Cancel(first->id, "", now_).ok());
    Cycle(absl::Seconds(20));
    ASSERT_EQ(holder(), h->id) << Get(h)->reason;
    challenge(z2);
    EXPECT_EQ(holder() == h->id, c.h_holds_after_round_2) << Get(h)->reason;
  }
}

// A protected reservation ends once its gang stops waiting on it: here its
// queue is held, and the next full re-plan drops it.
TEST_F(LeversTest, AProtectedReservationEndsWhenItsQueueIsHeld) {
  Config config;
  config.reservation.depth = 1;
  config.reservation.max_takeovers = 0;
  config.preemption.enabled = false;
  config.planning.max_gangs = 0;
  Init(config, 3);
  GangPtr x = Submit(WithEstimate(Spec("b").Pods(1, 8), absl::Hours(10)));
  Submit(WithEstimate(Spec("b").Pods(1, 8), absl::Hours(10)));
  Cycle();
  GangPtr h = Submit(WithEstimate(Spec("a").Pods(3, 8), absl::Hours(1)));
  Cycle();
  ASSERT_EQ(scheduler_->reservations().size(), 1u) << Get(h)->reason;
  Queue held = testing::MakeQueue("a");
  held.held = true;
  ASSERT_TRUE(scheduler_->PutQueue(held).ok());
  Cycle(absl::Seconds(20));
  EXPECT_EQ(Get(h)->reason_code, ReasonCode::kQueueHeld) << Get(h)->reason;
  ASSERT_TRUE(scheduler_->Cancel(x->id, "", now_).ok());  // capacity moves
  Cycle(absl::Seconds(20));
  EXPECT_TRUE(scheduler_->reservations().empty());
}

// Quota waits (reservation.for_quota_waits). Cohort c of queues a and b,
// 16 GPUs nominal each, on one rack of four 8-GPU nodes: b runs two gangs
// (its 16 GPUs), a one (8 GPUs); one node is free. H of queue a asks 24
// GPUs: 16 above a's nominal, and b lends nothing now, so quota refuses it
// until gangs end. Only a refusal that waits for the cohort to lend may
// reserve, and only with the lever on.
TEST_F(LeversTest, TableAGangWaitingForItsCohortToLendMayReserve) {
  struct Case {
    std::string name;
    bool for_quota_waits;
    int64_t borrowing_limit;  // of queue a; -1 = unlimited
    bool reserved;
  } cases[] = {
      {"off: a gang refused by quota holds nothing", false, -1, false},
      {"on: it waits only for the cohort, so it reserves", true, -1, true},
      {"on, but above a's borrowing limit: it waits on its own queue", true, 8,
       false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    now_ = kT0;
    Config config;
    config.topology_levels = {"block", "rack"};
    config.reservation.for_quota_waits = c.for_quota_waits;
    config.preemption.enabled = false;
    config.planning.max_gangs = 0;  // the reservations alone
    Queue a = testing::MakeQueue("a", 16, "c");
    a.borrowing_limit_gpus = c.borrowing_limit;
    SchedulerFixture::Init(
        config, MakeNodes(1, 1, 4),
        {testing::MakeQueue("c"), a, testing::MakeQueue("b", 16, "c")});
    for (int i = 0; i < 2; ++i) {
      Submit(WithEstimate(Spec("b").Pods(1, 8), absl::Hours(10)));
    }
    Submit(WithEstimate(Spec("a").Pods(1, 8), absl::Hours(10)));
    Cycle();
    GangPtr h = Submit(WithEstimate(Spec("a").Pods(3, 8), absl::Hours(1)));
    Cycle();
    const auto& reservations = scheduler_->reservations();
    EXPECT_EQ(reservations.size(), c.reserved ? 1u : 0u) << Get(h)->reason;
    EXPECT_EQ(Get(h)->reason_code,
              c.reserved ? ReasonCode::kReserved : ReasonCode::kQuota)
        << Get(h)->reason;
    if (c.reserved) {
      EXPECT_EQ(reservations[0].gang, h->id);
      EXPECT_EQ(reservations[0].start,
                kT0 + absl::Seconds(1) + absl::Hours(10));
    }
  }
}

// Four 8-GPU nodes: X runs on two for 2 h; H (all four nodes) reserves
// them from X's end. S (one node, 10 h) would run past that start: it may
// take a held node only on loan, and H then takes it back.
TEST_F(LeversTest, TablePreemptibleBackfillLendsHeldNodes) {
  struct Case {
    std::string name;
    bool lever;
    bool preemption;
    int s_priority;
    bool s_on_loan;
  } cases[] = {
      {"off: S waits for H", false, true, 0, false},
      {"on: S runs on loan, then H takes its node back", true, true, 0, true},
      {"on, S of a higher priority than H: no loan", true, true, 1, false},
      {"on, preemption off: no loan (H could not take it back)", true, false, 0,
       false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    now_ = kT0;
    Config config;
    config.reservation.depth = 1;
    config.reservation.preemptible_backfill = c.lever;
    config.preemption.enabled = c.preemption;
    config.preemption.min_preemptor_priority = 10;  // loans only
    config.planning.max_gangs = 0;                  // the reservations alone
    Init(config, 4);
    GangPtr x = Submit(WithEstimate(Spec("a").Pods(2, 8), absl::Hours(2)));
    Cycle();
    GangPtr h = Submit(WithEstimate(Spec("a").Pods(4, 8), absl::Hours(1)));
    Cycle();
    ASSERT_EQ(scheduler_->reservations().size(), 1u) << Get(h)->reason;
    const absl::Time start = scheduler_->reservations()[0].start;
    GangPtr s = Submit(WithEstimate(Spec("b").Pods(1, 8).Priority(c.s_priority),
                                    absl::Hours(10)));
    Cycle();
    EXPECT_EQ(StateOf(s) == GangState::kAdmitted, c.s_on_loan)
        << Get(s)->reason;
    EXPECT_EQ(Get(s)->on_loan, c.s_on_loan);
    Cycle(absl::Seconds(20));  // a full re-plan: the loan does not delay H
    ASSERT_EQ(scheduler_->reservations().size(), 1u) << Get(h)->reason;
    EXPECT_EQ(scheduler_->reservations()[0].start, start);
    if (!c.s_on_loan) continue;
    now_ = start;
    ASSERT_TRUE(scheduler_->Cancel(x->id, "", now_).ok());
    Cycle();
    EXPECT_EQ(StateOf(s), GangState::kPreempting);
    EXPECT_EQ(Get(h)->reason_code, ReasonCode::kPreempting) << Get(h)->reason;
    Cycle(config.preemption.grace_period);
    EXPECT_EQ(StateOf(s), GangState::kPending);
    EXPECT_EQ(StateOf(h), GangState::kAdmitted) << Get(h)->reason;
  }
}

// A loan outlives the reservation it came from, but only a holder of no
// lower priority than the borrower may take it back: L, of a lower
// priority than S, plans around S's expected end and never preempts it.
TEST_F(LeversTest, OnlyAHolderOfNoLowerPriorityTakesALoanBack) {
  Config config;
  config.reservation.depth = 1;
  config.reservation.preemptible_backfill = true;
  config.preemption.min_preemptor_priority = 10;  // loans only
  config.planning.max_gangs = 0;
  Init(config, 4);
  GangPtr x = Submit(WithEstimate(Spec("a").Pods(2, 8), absl::Hours(2)));
  Cycle();
  GangPtr h =
      Submit(WithEstimate(Spec("a").Pods(4, 8).Priority(1), absl::Hours(1)));
  Cycle();
  GangPtr s =
      Submit(WithEstimate(Spec("b").Pods(1, 8).Priority(1), absl::Hours(10)));
  Cycle();
  ASSERT_TRUE(Get(s)->on_loan) << Get(s)->reason;
  ASSERT_TRUE(scheduler_->Cancel(h->id, "", now_).ok());
  GangPtr l = Submit(WithEstimate(Spec("a").Pods(4, 8), absl::Hours(1)));
  Cycle(absl::Seconds(20));
  ASSERT_EQ(scheduler_->reservations().size(), 1u) << Get(l)->reason;
  EXPECT_EQ(scheduler_->reservations()[0].start,
            *Get(s)->admit_time + absl::Hours(10));
  ASSERT_TRUE(scheduler_->Cancel(x->id, "", now_ += absl::Hours(2)).ok());
  Cycle();
  EXPECT_EQ(StateOf(s), GangState::kAdmitted);
  EXPECT_EQ(StateOf(l), GangState::kPending);
}

// With a window, the gang reserves once its start comes within it.
TEST_F(LeversTest, WindowReservesOnceTheStartIsNear) {
  Config config;
  config.reservation.window = absl::Hours(2);
  config.preemption.enabled = false;
  Init(config, 2);
  Submit(WithEstimate(Spec("a").Pods(1, 8), absl::Hours(10)));
  Cycle();
  GangPtr p = Submit(
      WithEstimate(Spec("a").Pods(2, 8).Required("rack"), absl::Hours(1)));
  Cycle();
  EXPECT_TRUE(scheduler_->reservations().empty());
  Cycle(absl::Hours(9));  // the start is now 1 h away
  ASSERT_EQ(scheduler_->reservations().size(), 1u)
      << scheduler_->FindGang(p->id)->reason;
  EXPECT_EQ(scheduler_->reservations()[0].gang, p->id);
}

// Two racks of two 8-GPU nodes: rack 0 runs X (10 h) on one node, rack 1
// runs Z (1 h); one node free in each, so best fit ties and takes rack 0.
// G (one 8-GPU pod REQUIRED in a rack) goes with domain end-time packing
// to the rack whose last end it delays least.
TEST_F(LeversTest, TableDomainEndTimePacking) {
  struct Case {
    std::string name;
    bool lever;
    absl::Duration estimate;  // of G; 0 = none
    std::string rack;         // the rack of G's node
  } cases[] = {
      {"off: best fit's first rack", false, absl::Minutes(30), "r0-0"},
      {"short gang: the rack that frees in 1 h", true, absl::Minutes(30),
       "r0-1"},
      {"long gang: the rack busy for 10 h anyway", true, absl::Hours(8),
       "r0-0"},
      {"longer than both: the least extension", true, absl::Hours(20), "r0-0"},
      {"no estimate: best fit's choice", true, absl::ZeroDuration(), "r0-0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    now_ = kT0;
    Config config;
    config.placement.domain_end_time_packing = c.lever;
    config.preemption.enabled = false;
    config.topology_levels = {"block", "rack"};
    SchedulerFixture::Init(config, MakeNodes(1, 2, 2),
                           {testing::MakeQueue("a")});
    Submit(WithEstimate(Spec("a").Pods(1, 8), absl::Hours(10)));
    GangPtr y = Submit(WithEstimate(Spec("a").Pods(1, 8), absl::Hours(5)));
    Submit(WithEstimate(Spec("a").Pods(1, 8), absl::Hours(1)));
    Cycle();
    ASSERT_TRUE(scheduler_->Cancel(y->id, "test", now_).ok());
    GangPtr g =
        Submit(WithEstimate(Spec("a").Pods(1, 8).Required("rack"), c.estimate));
    Cycle();
    const GangPtr placed = scheduler_->FindGang(g->id);
    ASSERT_EQ(placed->state, GangState::kAdmitted) << placed->reason;
    ASSERT_EQ(placed->placement.size(), 1u);
    // Nodes are "H100-<block><rack><node>".
    EXPECT_EQ(placed->placement[0].node.value().substr(6, 1),
              c.rack.substr(3, 1));
  }
}

// Two 8-GPU nodes, both held by queue a's gangs; then one ends. Waiting:
// a's 8-GPU gang (3 h old, a has the higher usage) and b's new 4-GPU gang;
// the first in line takes the free node and the other no longer fits.
TEST_F(LeversTest, TableAgingAndSizeCreditLiftTheHeavierQueuesGang) {
  struct Case {
    std::string name;
    double aging_per_hour;
    double size_credit;
    bool heavier_queue_first;
  } cases[] = {
      {"default: b's lower usage first", 0, 0, false},
      {"aging 1 level an hour: a's 3-hour wait lifts it", 1, 0, true},
      {"aging 0.1 an hour: not a level yet", 0.1, 0, false},
      {"size credit 3: a's 8 GPUs outweigh its usage", 0, 3, true},
      {"size credit 0.5: not enough", 0, 0.5, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    now_ = kT0;
    Config config;
    config.admission.aging_per_hour = c.aging_per_hour;
    config.admission.fair_share_size_credit = c.size_credit;
    config.preemption.enabled = false;
    config.reservation.depth = 0;
    Init(config, 2);
    GangPtr stays = Submit(Spec("a").Pods(1, 8));
    GangPtr ends = Submit(Spec("a").Pods(1, 8));
    Cycle();
    ASSERT_EQ(StateOf(ends), GangState::kAdmitted);
    GangPtr heavier = Submit(Spec("a").Pods(1, 8));
    Cycle();
    ASSERT_EQ(StateOf(heavier), GangState::kPending);
    now_ += absl::Hours(3);
    GangPtr lighter = Submit(Spec("b").Pods(1, 4));
    ASSERT_TRUE(scheduler_->Cancel(ends->id, "test", now_).ok());
    Cycle();
    EXPECT_EQ(StateOf(heavier) == GangState::kAdmitted, c.heavier_queue_first);
    EXPECT_EQ(StateOf(lighter) == GangState::kAdmitted, !c.heavier_queue_first);
  }
}

}  // namespace
}  // namespace phalanx::core
