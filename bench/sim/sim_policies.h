// The policies phalanx-sim compares, each a core::Config — never a separate
// code path. bench/README.md gives the source of every rule:
//   fifo        strict submit order (nothing passes a head that does not
//               fit), first fit, no reservations, no preemption
//   kueue-like  Kueue with Admission Fair Sharing: the LocalQueue's decayed
//               usage first, then priority, then creation time; every
//               pending gang tried in that order and skipped when it does
//               not fit (BestEffortFIFO); best-fit topology; no
//               reservations; no preemption (Kueue's defaults)
//   slurm-like  priority and age (fair sharing off), backfill with a
//               reservation for the top job, best-fit tree topology, no
//               preemption
//   slurm-default  Slurm's default sched/backfill: priority and age, a
//               planned start for up to 64 pending jobs (Slurm: 500;
//               core's bound is 64) within a 1-day window
//               (bf_max_job_test, bf_window), no preemption
//   phalanx     core's defaults, unchanged (the daemon's default
//               configuration): fair sharing, three reservations,
//               preemption by priority tiers >= 1
// A name may carry overrides, `phalanx:depth=3:horizon_h=2`, so that one
// lever at a time can be measured across the matrix (PolicyOverrideKeys).
// Pure functions; thread-safe.
#ifndef PHALANX_BENCH_SIM_SIM_POLICIES_H_
#define PHALANX_BENCH_SIM_SIM_POLICIES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/model.h"

namespace phalanx::bench {

// Known policy names, in the order reports list them.
const std::vector<std::string>& PolicyNames();

// The override keys a policy name accepts after ':' (key=value each):
//   depth=N            reservation.depth
//   min_priority=N     reservation.min_priority
//   after_h=H          reservation.after, hours
//   preempt=0|1        preemption.enabled
//   horizon_h=H        preemption.horizon, hours
//   min_runtime_m=M    preemption.min_runtime, minutes
//   fair=0|1           fair_share.enabled
//   order=priority|fair_share_first|submit   admission.ordering
//   half_life_h=H      fair_share.half_life, hours
//   strand=0|1         reservation.choose_by_stranding
//   preempt_min_priority=N  preemption.min_preemptor_priority
//   victim_loss_m=M    preemption.max_victim_loss, minutes
//   end_pack=0|1       placement.end_time_packing
//   fgd=0|1            placement.fragmentation_scoring
//   fs_tier=N          admission.fair_share_first_below_priority
//   window_h=H         reservation.window, hours
//   takeovers=N        reservation.max_takeovers (-1 = no protection)
//   quota_reserve=0|1  reservation.for_quota_waits
//   loan=0|1           reservation.preemptible_backfill
//   domain_end=0|1     placement.domain_end_time_packing
//   aging=X            admission.aging_per_hour (priority levels an hour)
//   aging_max=N        admission.aging_max_levels
//   size_credit=X      admission.fair_share_size_credit (score per GPU)
//   wait_bound_h=H     admission.fair_share_wait_bound (hours; 0 = off)
//   usage_only=0|1     fair_share.decayed_usage_only
//   grow_m=M           elastic.grow_interval, minutes
const std::vector<std::string>& PolicyOverrideKeys();

// The configuration of policy `spec` ("name" or "name:key=value:...") built
// on `base` (topology levels and other fleet-given settings).
// InvalidArgument naming the part for an unknown name, key or value.
absl::StatusOr<core::Config> PolicyConfig(absl::string_view spec,
                                          const core::Config& base);

}  // namespace phalanx::bench

#endif  // PHALANX_BENCH_SIM_SIM_POLICIES_H_
