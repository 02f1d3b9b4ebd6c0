// The plan (docs/design.md §4 step 5): an expected start, a domain and the
// GPUs per node for every pending gang in admission order, up to
// PlanningConfig::max_gangs and within PlanningConfig::window.
//
// A profile keeps, per node, its free GPUs over time: GPUs free now, GPUs a
// running gang frees at its expected end (estimate, else max_runtime, else
// the configured default), and the GPUs each planned gang takes from its
// start to its expected end. Planning a gang finds the earliest time at
// which the whole gang fits for its expected run time on what the profile
// leaves — its pod sets by GPU count per node, REQUIRED and PREFERRED
// topology met by one domain of the level — and takes that capacity from
// the profile, so no gang planned later can move its start. Slices and
// NVLink groups are not modelled: the plan sizes a gang by GPUs per node,
// and the real placer decides the exact GPUs at admission.
//
// Pure and deterministic; not thread-safe.
#ifndef PHALANX_CORE_PLAN_H_
#define PHALANX_CORE_PLAN_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "core/fleet.h"
#include "core/model.h"

namespace phalanx::core {

// Where a gang stands in the plan.
enum class PlanStatus {
  kNotPending,    // not PENDING: nothing to plan
  kUnplanned,     // no plan includes it yet (it came after the last one)
  kPlanned,       // it has a planned start
  kBeyondDepth,   // more than max_gangs gangs are ahead of it
  kBeyondWindow,  // it would start later than the window allows
  kNeverFits,     // no time in the window fits it on the fleet as built
};

// "PLANNED", "BEYOND_DEPTH", …: the API enum's suffix.
const char* PlanStatusName(PlanStatus status);

// A gang's place in the plan.
struct PlannedStart {
  PlanStatus status = PlanStatus::kUnplanned;
  absl::Time start = absl::InfiniteFuture();  // when kPlanned
  std::string domain;  // its planned domain's path; "" = the fleet
  int rank = 0;        // 1-based position among planned gangs; 0 = none
  bool operator==(const PlannedStart&) const = default;
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_PLAN_H_
