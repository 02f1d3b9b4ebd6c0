// Checks of a gang spec against the scheduler's state, shared by Submit,
// DryRun and Restore. Each returns OK or an error naming the field; none
// changes anything but the fit cache it may fill.
#ifndef PHALANX_CORE_SPEC_CHECKS_H_
#define PHALANX_CORE_SPEC_CHECKS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/fit_cache.h"
#include "core/fleet.h"
#include "core/model.h"
#include "core/quota_book.h"

namespace phalanx::core {

// NotFound for an unknown queue; InvalidArgument for a level the fleet does
// not have; FailedPrecondition when the spec can never fit and
// admission.accept_unfit_gangs is off.
absl::Status CheckSubmittable(const GangSpec& spec, const Config& config,
                              const QuotaBook& quotas, Fleet& fleet,
                              FitCache& fits);
// With admission.accept_unfit_gangs, the "NEVER_FITS: …" reason of a spec
// that can never fit; else, or when it could fit, "".
std::string NeverFitsPending(const GangSpec& spec, const Config& config,
                             Fleet& fleet, FitCache& fits);
// The topology and slice levels of pod set `set` (named `field` in errors)
// exist in `fleet`, and the slice is no wider than the topology level.
absl::Status CheckLevels(const Fleet& fleet, const PodSetSpec& set,
                         absl::string_view field);
// Sets spec.priority from spec.priority_class; InvalidArgument for an
// unknown class or a priority that contradicts it.
absl::Status ResolvePriorityClass(const Config& config, GangSpec& spec);
// PermissionDenied when the priority is above the queue's max_priority.
absl::Status CheckMaxPriority(const QuotaBook& quotas, const GangSpec& spec);

}  // namespace phalanx::core

#endif  // PHALANX_CORE_SPEC_CHECKS_H_
