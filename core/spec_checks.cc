#include "core/spec_checks.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "core/elastic.h"
#include "core/scheduler_types.h"
#include "core/status_macros.h"
#include "core/validate.h"

namespace phalanx::core {

absl::Status CheckSubmittable(const GangSpec& spec, const Config& config,
                              const QuotaBook& quotas, Fleet& fleet,
                              FitCache& fits) {
  if (quotas.FindQueue(spec.queue) == nullptr) {
    return absl::NotFoundError(absl::StrCat("spec.queue: no queue ",
                                            QuoteForError(spec.queue.value())));
  }
  for (size_t i = 0; i < spec.pod_sets.size(); ++i) {
    RETURN_IF_ERROR(CheckLevels(fleet, spec.pod_sets[i],
                                absl::StrCat("spec.pod_sets[", i, "]")));
  }
  if (const std::string& why = fits.NeverFitsReason(MinimumSpec(spec), fleet);
      !why.empty() && !config.admission.accept_unfit_gangs) {
    return absl::FailedPreconditionError(absl::StrCat("spec: ", why));
  }
  return absl::OkStatus();
}

std::string NeverFitsPending(const GangSpec& spec, const Config& config,
                             Fleet& fleet, FitCache& fits) {
  if (!config.admission.accept_unfit_gangs) return "";
  const std::string& why = fits.NeverFitsReason(MinimumSpec(spec), fleet);
  if (why.empty()) return "";
  absl::string_view what = why;
  absl::ConsumePrefix(&what, "can never fit: ");
  return absl::StrCat(kNeverFitsPrefix, what,
                      " (checked again when nodes change)");
}

absl::Status CheckLevels(const Fleet& fleet, const PodSetSpec& set,
                         absl::string_view field) {
  auto unknown = [&](absl::string_view what, absl::string_view level) {
    std::vector<std::string> known = fleet.levels();
    known.push_back(kNodeLevel);
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".", what, ": unknown level ", QuoteForError(level),
                     " (levels: ", absl::StrJoin(known, ", "), ")"));
  };
  const TopologyConstraint& topo = set.topology;
  const int level = topo.mode == TopologyMode::kUnconstrained
                        ? -1
                        : fleet.LevelIndex(topo.level);
  if (topo.mode != TopologyMode::kUnconstrained && level < 0) {
    return unknown("topology.level", topo.level);
  }
  if (set.slice.size == 0) return absl::OkStatus();
  const int slice_level = fleet.LevelIndex(set.slice.level);
  if (slice_level < 0) return unknown("slice.level", set.slice.level);
  if (slice_level < level) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".slice.level: ", QuoteForError(set.slice.level),
        " is wider than topology.level ", QuoteForError(topo.level)));
  }
  return absl::OkStatus();
}

absl::Status ResolvePriorityClass(const Config& config, GangSpec& spec) {
  if (spec.priority_class.empty()) return absl::OkStatus();
  auto it = config.priority_classes.find(spec.priority_class);
  if (it == config.priority_classes.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.priority_class: no priority class ",
                     QuoteForError(spec.priority_class)));
  }
  if (spec.priority != 0 && spec.priority != it->second) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.priority: ", spec.priority, " contradicts priority_class ",
        QuoteForError(spec.priority_class), " (", it->second, ")"));
  }
  spec.priority = it->second;
  return absl::OkStatus();
}

absl::Status CheckMaxPriority(const QuotaBook& quotas, const GangSpec& spec) {
  const Queue* queue = quotas.FindQueue(spec.queue);
  if (queue == nullptr || !queue->max_priority) return absl::OkStatus();
  if (spec.priority <= *queue->max_priority) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("spec.priority: ", spec.priority, " is above queue ",
                   QuoteForError(spec.queue.value()), "'s max_priority ",
                   *queue->max_priority));
}

}  // namespace phalanx::core
