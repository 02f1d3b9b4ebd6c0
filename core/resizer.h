// Resizer: grows running elastic gangs (core/elastic.h) and finishes their
// shrinks.
//
// Growth runs after the admission loop, so every pending gang has been
// offered the free capacity first. A RUNNING elastic gang below its maximum
// whose elastic.grow_interval has passed since its admission or last resize
// takes the most pods (whole slices) that fit, up to its maximum, only on
// capacity no reservation, preemption hold or binding plan sets aside for
// another gang, within its queue's quota, on its GPU model (unless it mixes
// models) and inside the domain its pod set already occupies when its
// topology is REQUIRED (first inside it, then anywhere, when PREFERRED).
// Gangs grow in priority order, then by admission time.
//
// A shrink is started by the preemptor (core/preemptor.h): the gang is
// PREEMPTING with shrink_to set. When its launcher acknowledges, or its grace
// period ends, FinishShrink keeps the pods of index below shrink_to and
// releases the rest. Both end in a RESIZED event with the new placement.
#ifndef PHALANX_CORE_RESIZER_H_
#define PHALANX_CORE_RESIZER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "core/placement.h"
#include "core/scheduler_state.h"

namespace phalanx::core {

class Resizer {
 public:
  Resizer(SchedulerState& s, absl::Time now) : s_(s), now_(now) {}
  // Grows every running elastic gang that may grow; `free_gpus` is what is
  // free on READY nodes (nothing is tried when 0).
  void GrowRunning(int64_t free_gpus);
  // Ends the shrink of `gang` (PREEMPTING, shrink_to > 0): RUNNING on its
  // pods of the elastic pod set below shrink_to (and every other pod set's).
  GangPtr FinishShrink(Gang gang);

 private:
  // Grows `gang` by the most pods that fit; returns whether it grew.
  bool Grow(const GangPtr& gang);
  // The extra pods of a `count`-pod delta of `gang`'s elastic pod set, with
  // their indices following the held ones; empty when they do not fit.
  std::vector<PodPlacement> PlaceDelta(const Gang& gang, int count);
  // The domain of `gang`'s elastic pod set at its topology level, or
  // nullopt when it has no level.
  std::optional<int> DomainOfSet(const Gang& gang, int set) const;

  SchedulerState& s_;
  const absl::Time now_;
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_RESIZER_H_
