// Elastic gangs: a gang whose one elastic pod set (PodSetSpec::min_count
// below count) may run with any number of pods in [min_count, count], in
// whole slices. These helpers size a spec; the admission cycle admits at
// the largest size that fits, Resizer grows and shrinks running gangs
// (core/resizer.h), and the plan and reservations read the minimum size.
//
// A gang's estimated_runtime is its run time at full size: at a smaller
// size the same work takes longer in proportion (work is conserved).
#ifndef PHALANX_CORE_ELASTIC_H_
#define PHALANX_CORE_ELASTIC_H_

#include <functional>

#include "core/model.h"
#include "core/placement.h"

namespace phalanx::core {

// The index of `spec`'s elastic pod set, or -1 when its size is fixed.
int ElasticSetOf(const GangSpec& spec);
inline bool IsElastic(const GangSpec& spec) { return ElasticSetOf(spec) >= 0; }
// The fewest pods `set` runs with: min_count, or count when fixed.
int MinCountOf(const PodSetSpec& set);
// The step between sizes of `set`: its slice size, else 1.
int SizeStepOf(const PodSetSpec& set);
// `spec` with its elastic pod set at `count` pods (unchanged when fixed).
GangSpec SpecAtSize(GangSpec spec, int count);
// `spec` at its smallest size.
GangSpec MinimumSpec(const GangSpec& spec);
// The pods the gang's pod set `set` holds (its placement while it holds
// GPUs); its spec's count otherwise.
int HeldCount(const Gang& gang, int set);
// When a running elastic gang whose whole work takes `full` at full size
// is expected to end: the rest of that work (less elastic_work_done) at its
// current size, from its last resize (or admission in this attempt).
absl::Time ElasticEnd(const Gang& gang, absl::Duration full);
// The work a running elastic gang has done since its last resize (or
// admission), as run time at full size: the time times its size / count.
absl::Duration WorkSinceResize(const Gang& gang, absl::Time now);
// The GPUs of the gang's placement.
int64_t PlacedGpus(const Gang& gang);
// Whether a gang holding GPUs holds a size its spec allows: every fixed
// pod set whole, the elastic one at min_count..count pods in whole slices.
bool HeldSizeAllowed(const Gang& gang);
// The gang as sized now: its spec at the elastic pod set's held count.
GangSpec HeldSpec(const Gang& gang);
// The expected run time `full` (at full size) stretched to `count` pods of
// the elastic pod set of `spec`: full × count(max) / count. Unchanged for
// a fixed gang or an infinite duration.
absl::Duration RuntimeAtSize(const GangSpec& spec, int count,
                             absl::Duration full);

// The placement of elastic `full` at the largest size `place` finds room
// for: its minimum first (when that fails, its failure, the reason naming the
// minimum), then a binary search over the sizes above it in whole slices,
// assuming a size fits whenever a larger one does. The full size is not
// tried (the caller did). Sets `*sized` to the spec placed.
PlacementResult PlaceLargestSize(
    const GangSpec& full,
    const std::function<PlacementResult(const GangSpec&)>& place,
    GangSpec* sized);

}  // namespace phalanx::core

#endif  // PHALANX_CORE_ELASTIC_H_
