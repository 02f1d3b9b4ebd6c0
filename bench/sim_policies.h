// The policies phalanx-sim compares, each a core::Config (issue 4) — never a
// separate code path:
//   fifo        strict submit order (nothing passes a head that does not
//               fit), first fit
//   kueue-like  best-fit topology + Admission Fair Sharing; every pending
//               gang tried in order, skipped when it does not fit
//               (BestEffortFIFO); no reservations, no preemption
//   slurm-like  priority and age, EASY backfill with a reservation for the
//               head job, best-fit tree topology
//   phalanx     everything of the scheduling-core issue
// Core is still growing: a policy whose configuration fields core::Config
// does not have yet is reported unavailable, with the missing fields named.
// The check is made at compile time, so this file builds against core before
// and after a field lands. Pure functions; thread-safe.
#ifndef PHALANX_BENCH_SIM_POLICIES_H_
#define PHALANX_BENCH_SIM_POLICIES_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/model.h"

namespace phalanx::bench {

// Known policy names, in the order reports list them.
const std::vector<std::string>& PolicyNames();

struct PolicyChoice {
  std::optional<core::Config> config;  // nullopt = unavailable
  std::string unavailable_reason;      // set when config is nullopt
};

// The configuration of policy `name` built on `base` (topology levels and
// other fleet-given settings). Unavailable, with the reason, for an unknown
// name or when core lacks a feature the policy needs.
PolicyChoice PolicyConfig(absl::string_view name, const core::Config& base);

}  // namespace phalanx::bench

#endif  // PHALANX_BENCH_SIM_POLICIES_H_
