#include "bench/sim/sim_policies.h"

#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace phalanx::bench {
namespace {

using core::Config;

Config Fifo(Config c) {
  c.admission.ordering = core::Ordering::kSubmitOrder;
  c.admission.strict_fifo = true;
  c.placement.first_fit = true;
  c.placement.domain_end_time_packing = false;
  c.fair_share.enabled = false;
  c.reservation.depth = 0;
  c.planning.max_gangs = 0;
  c.preemption.enabled = false;
  return c;
}

// Kueue's ClusterQueue with AdmissionFairSharing: queueOrderingFunc
// (pkg/queue/cluster_queue.go) compares the LocalQueues' decayed usage
// first, then priority, then the queue-order timestamp (creation, or the
// last eviction). One core queue stands for one LocalQueue.
Config KueueLike(Config c) {
  c.admission.ordering = core::Ordering::kFairShareFirst;
  c.admission.strict_fifo = false;  // BestEffortFIFO
  c.placement.first_fit = false;    // TAS BestFit
  c.placement.domain_end_time_packing = false;
  c.fair_share.enabled = true;
  // Kueue orders by decayed usage however long a workload has waited.
  c.admission.fair_share_wait_bound = absl::InfiniteDuration();
  c.reservation.depth = 0;       // Kueue holds nothing for a waiting head
  c.planning.max_gangs = 0;      // and plans no start
  c.preemption.enabled = false;  // withinClusterQueue / reclaimWithinCohort:
                                 // Never (the defaults)
  return c;
}

// Slurm's sched/backfill as far as core expresses it: jobs by priority
// (multifactor without the fair-share factor: age breaks ties), and the top
// pending job gets a reservation that backfilled jobs may not delay.
Config SlurmLike(Config c) {
  c.admission.ordering = core::Ordering::kPriorityFairShareAge;
  c.admission.strict_fifo = false;
  c.placement.first_fit = false;
  c.placement.domain_end_time_packing = false;  // best fit alone
  c.fair_share.enabled = false;
  c.reservation.depth = 1;
  c.reservation.min_priority = std::numeric_limits<int>::lowest();
  c.reservation.after = absl::ZeroDuration();
  c.planning.max_gangs = 0;  // EASY: only the head's start is protected
  c.preemption.enabled = false;
  return c;
}

// Real Slurm's defaults, as far as core's reservations express them:
//   - SchedulerType=sched/backfill (slurm.conf(5): the default) and
//     PriorityType=priority/multifactor with no fair-share weight: jobs by
//     priority, then age (submit time) — fair sharing off;
//   - bf_max_job_test: a planned start for up to that many pending jobs, of
//     any priority; Slurm's default is 500 (slurm.conf(5)), core holds at
//     most 64 reservations (ValidateConfig), so 64;
//   - bf_window=1440 minutes (sched_config.html, slurm.conf(5)): a job
//     whose planned start is more than a day away holds nothing, and its
//     nodes stay open to backfill;
//   - backfill never delays a planned start (sched_config.html: "will start
//     lower priority jobs if doing so does not delay the expected start
//     time of any higher priority jobs");
//   - no preemption (PreemptType=preempt/none, the default).
// Where core differs: a reservation holds a set of nodes from now until its
// gang starts, and two reservations never share a node, so the plan is one
// layer deep in time (Slurm stacks later starts on the same nodes); core
// re-plans from scratch every 10 s of simulated time and keeps its plan
// between, where bf_interval re-plans every 30 s. The binding plan
// (planning.binding, `phalanx:plan_bind=1`) stacks starts in time as Slurm
// does and is as fast on the synthetic cells, but made every 30 s at a
// depth of 500 on the Philly replay (48 nodes, hundreds waiting) it takes
// 409 s where slurm-like takes 8 s (bench/README.md), so it is not yet
// this baseline.
Config SlurmDefault(Config c) {
  c = SlurmLike(c);
  c.reservation.depth = 64;
  c.reservation.window = absl::Hours(24);
  return c;
}

// The daemon's default configuration, unchanged: what a user gets without
// tuning (priority, fair share — bounded by a 6 h wait —, age; three
// reservations; preemption by the priority tiers >= 1, bounded by the
// horizon).
Config Phalanx(Config c) { return c; }

absl::Status BadOverride(absl::string_view part, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("policy override \"", part.substr(0, 64), "\": ", why));
}

absl::Status ApplyOverride(absl::string_view part, Config& c) {
  std::vector<absl::string_view> kv = absl::StrSplit(part, '=');
  if (kv.size() != 2) return BadOverride(part, "expected key=value");
  const absl::string_view key = kv[0];
  const absl::string_view value = kv[1];
  double number = 0;
  const bool numeric = absl::SimpleAtod(value, &number);
  auto need_number = [&]() -> absl::Status {
    return numeric ? absl::OkStatus() : BadOverride(part, "not a number");
  };
  if (key == "order") {
    if (value == "priority") {
      c.admission.ordering = core::Ordering::kPriorityFairShareAge;
    } else if (value == "fair_share_first") {
      c.admission.ordering = core::Ordering::kFairShareFirst;
    } else if (value == "submit") {
      c.admission.ordering = core::Ordering::kSubmitOrder;
    } else {
      return BadOverride(part, "order is priority, fair_share_first or submit");
    }
    return absl::OkStatus();
  }
  if (absl::Status s = need_number(); !s.ok()) return s;
  if (key == "depth") {
    c.reservation.depth = static_cast<int>(number);
  } else if (key == "min_priority") {
    c.reservation.min_priority = static_cast<int>(number);
  } else if (key == "after_h") {
    c.reservation.after = absl::Hours(number);
  } else if (key == "preempt") {
    c.preemption.enabled = number != 0;
  } else if (key == "horizon_h") {
    c.preemption.horizon = absl::Hours(number);
  } else if (key == "min_runtime_m") {
    c.preemption.min_runtime = absl::Minutes(number);
  } else if (key == "fair") {
    c.fair_share.enabled = number != 0;
  } else if (key == "half_life_h") {
    c.fair_share.half_life = absl::Hours(number);
  } else if (key == "strand") {
    c.reservation.choose_by_stranding = number != 0;
  } else if (key == "preempt_min_priority") {
    c.preemption.min_preemptor_priority = static_cast<int>(number);
  } else if (key == "victim_loss_m") {
    c.preemption.max_victim_loss = absl::Minutes(number);
  } else if (key == "end_pack") {
    c.placement.end_time_packing = number != 0;
  } else if (key == "fgd") {
    c.placement.fragmentation_scoring = number != 0;
  } else if (key == "fs_tier") {
    c.admission.fair_share_first_below_priority = static_cast<int>(number);
  } else if (key == "window_h") {
    c.reservation.window = absl::Hours(number);
  } else if (key == "quota_reserve") {
    c.reservation.for_quota_waits = number != 0;
  } else if (key == "loan") {
    c.reservation.preemptible_backfill = number != 0;
  } else if (key == "takeovers") {
    c.reservation.max_takeovers = static_cast<int>(number);
  } else if (key == "domain_end") {
    c.placement.domain_end_time_packing = number != 0;
  } else if (key == "aging") {
    c.admission.aging_per_hour = number;
  } else if (key == "aging_max") {
    c.admission.aging_max_levels = static_cast<int>(number);
  } else if (key == "plan") {
    c.planning.max_gangs = static_cast<int>(number);
  } else if (key == "plan_window_h") {
    c.planning.window = absl::Hours(number);
  } else if (key == "plan_bind") {
    c.planning.binding = number != 0;
  } else if (key == "plan_interval_s") {
    c.planning.interval = absl::Seconds(number);
  } else if (key == "size_credit") {
    c.admission.fair_share_size_credit = number;
  } else if (key == "wait_bound_h") {
    c.admission.fair_share_wait_bound =
        number > 0 ? absl::Hours(number) : absl::InfiniteDuration();
  } else if (key == "usage_only") {
    c.fair_share.decayed_usage_only = number != 0;
  } else if (key == "grow_m") {
    c.elastic.grow_interval = absl::Minutes(number);
  } else {
    return BadOverride(
        part, absl::StrCat("unknown key (known: ",
                           absl::StrJoin(PolicyOverrideKeys(), ", "), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& PolicyNames() {
  static const std::vector<std::string>* names = new std::vector<std::string>{
      "fifo", "kueue-like", "slurm-like", "slurm-default", "phalanx"};
  return *names;
}

const std::vector<std::string>& PolicyOverrideKeys() {
  static const std::vector<std::string>* keys =
      new std::vector<std::string>{"depth",
                                   "min_priority",
                                   "after_h",
                                   "preempt",
                                   "horizon_h",
                                   "min_runtime_m",
                                   "fair",
                                   "order",
                                   "half_life_h",
                                   "strand",
                                   "preempt_min_priority",
                                   "victim_loss_m",
                                   "end_pack",
                                   "fgd",
                                   "fs_tier",
                                   "window_h",
                                   "takeovers",
                                   "quota_reserve",
                                   "loan",
                                   "domain_end",
                                   "aging",
                                   "aging_max",
                                   "size_credit",
                                   "plan",
                                   "plan_window_h",
                                   "plan_bind",
                                   "plan_interval_s",
                                   "wait_bound_h",
                                   "usage_only",
                                   "grow_m"};
  return *keys;
}

absl::StatusOr<core::Config> PolicyConfig(absl::string_view spec,
                                          const core::Config& base) {
  std::vector<absl::string_view> parts = absl::StrSplit(spec, ':');
  const absl::string_view name = parts[0];
  Config c;
  if (name == "fifo") {
    c = Fifo(base);
  } else if (name == "kueue-like") {
    c = KueueLike(base);
  } else if (name == "slurm-like") {
    c = SlurmLike(base);
  } else if (name == "slurm-default") {
    c = SlurmDefault(base);
  } else if (name == "phalanx") {
    c = Phalanx(base);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown policy \"", name.substr(0, 64),
                     "\" (known: ", absl::StrJoin(PolicyNames(), ", "), ")"));
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    if (absl::Status s = ApplyOverride(parts[i], c); !s.ok()) return s;
  }
  return c;
}

}  // namespace phalanx::bench
