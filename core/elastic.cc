#include "core/elastic.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace phalanx::core {

int ElasticSetOf(const GangSpec& spec) {
  for (size_t i = 0; i < spec.pod_sets.size(); ++i) {
    const PodSetSpec& set = spec.pod_sets[i];
    if (set.min_count > 0 && set.min_count < set.count) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

int MinCountOf(const PodSetSpec& set) {
  return set.min_count > 0 ? std::min(set.min_count, set.count) : set.count;
}

int SizeStepOf(const PodSetSpec& set) {
  return set.slice.size > 0 ? set.slice.size : 1;
}

GangSpec SpecAtSize(GangSpec spec, int count) {
  const int set = ElasticSetOf(spec);
  if (set >= 0) spec.pod_sets[set].count = count;
  return spec;
}

GangSpec MinimumSpec(const GangSpec& spec) {
  const int set = ElasticSetOf(spec);
  if (set < 0) return spec;
  return SpecAtSize(spec, spec.pod_sets[set].min_count);
}

int HeldCount(const Gang& gang, int set) {
  const PodSetSpec& spec = gang.spec.pod_sets[set];
  if (!HoldsCapacity(gang.state) || gang.placement_released) return spec.count;
  return static_cast<int>(std::count_if(
      gang.placement.begin(), gang.placement.end(),
      [&spec](const PodPlacement& pod) { return pod.pod_set == spec.name; }));
}

namespace {

absl::Time AttemptSince(const Gang& gang) {
  absl::Time since = gang.admit_time.value_or(absl::InfinitePast());
  if (gang.last_resize_time && *gang.last_resize_time > since) {
    since = *gang.last_resize_time;
  }
  return since;
}

}  // namespace

absl::Time ElasticEnd(const Gang& gang, absl::Duration full) {
  const int set = ElasticSetOf(gang.spec);
  const absl::Duration rest =
      std::max(absl::ZeroDuration(), full - gang.elastic_work_done);
  const int held = set < 0 ? 0 : HeldCount(gang, set);
  return AttemptSince(gang) + RuntimeAtSize(gang.spec, held, rest);
}

absl::Duration WorkSinceResize(const Gang& gang, absl::Time now) {
  const int set = ElasticSetOf(gang.spec);
  const absl::Time since = AttemptSince(gang);
  if (set < 0 || since == absl::InfinitePast() || now <= since) {
    return absl::ZeroDuration();
  }
  return (now - since) * HeldCount(gang, set) / gang.spec.pod_sets[set].count;
}

int64_t PlacedGpus(const Gang& gang) {
  int64_t gpus = 0;
  for (const PodPlacement& pod : gang.placement) gpus += pod.gpu_indices.size();
  return gpus;
}

bool HeldSizeAllowed(const Gang& gang) {
  const int elastic = ElasticSetOf(gang.spec);
  int pods = 0;
  for (size_t i = 0; i < gang.spec.pod_sets.size(); ++i) {
    const PodSetSpec& set = gang.spec.pod_sets[i];
    if (static_cast<int>(i) != elastic) {
      pods += set.count;
      continue;
    }
    const int held = HeldCount(gang, elastic);
    if (held < set.min_count || held > set.count ||
        (held - set.min_count) % SizeStepOf(set) != 0) {
      return false;
    }
    pods += held;
  }
  return static_cast<int>(gang.placement.size()) == pods;
}

GangSpec HeldSpec(const Gang& gang) {
  const int set = ElasticSetOf(gang.spec);
  if (set < 0) return gang.spec;
  return SpecAtSize(gang.spec, HeldCount(gang, set));
}

absl::Duration RuntimeAtSize(const GangSpec& spec, int count,
                             absl::Duration full) {
  const int set = ElasticSetOf(spec);
  if (set < 0 || count <= 0 || full == absl::InfiniteDuration()) return full;
  const int max = spec.pod_sets[set].count;
  if (count >= max) return full;
  return full * max / count;
}

PlacementResult PlaceLargestSize(
    const GangSpec& full,
    const std::function<PlacementResult(const GangSpec&)>& place,
    GangSpec* sized) {
  const PodSetSpec& set = full.pod_sets[ElasticSetOf(full)];
  const int step = SizeStepOf(set);
  *sized = SpecAtSize(full, set.min_count);
  PlacementResult best = place(*sized);
  if (!best.placed) {
    best.reason = absl::StrCat(best.reason, " (at its minimum, ", set.min_count,
                               " pods of ", set.name, ")");
    return best;
  }
  // Sizes min + k·step for k in [lo, hi]; count - min is a whole number of
  // steps and the full size was tried.
  int lo = 0;
  int hi = (set.count - set.min_count) / step - 1;
  int best_count = set.min_count;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    const int count = set.min_count + mid * step;
    PlacementResult tried = place(SpecAtSize(full, count));
    if (tried.placed) {
      best = std::move(tried);
      best_count = count;
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  *sized = SpecAtSize(full, best_count);
  return best;
}

}  // namespace phalanx::core
