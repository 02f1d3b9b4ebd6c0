#include "clients/node_agent/health_tracker.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace phalanx::node_agent {

HealthTracker::HealthTracker(int passes_to_recover)
    : passes_to_recover_(std::max(passes_to_recover, 1)) {}

bool HealthTracker::Passed(Failure& failure) const {
  return ++failure.passes >= passes_to_recover_;
}

HealthReport HealthTracker::Observe(const CheckResult& result) {
  if (!result.node_passed) {
    // A failure seen again starts its count of passes over; its first
    // reason stays, so the report does not change while it lasts.
    if (!node_) node_ = Failure{result.node_detail, 0};
    node_->passes = 0;
  } else if (node_ && Passed(*node_)) {
    node_.reset();
  }
  for (auto it = gpus_.begin(); it != gpus_.end();) {
    if (!result.bad_gpus.contains(it->first) && Passed(it->second)) {
      it = gpus_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [index, reason] : result.bad_gpus) {
    gpus_.try_emplace(index, Failure{reason, 0}).first->second.passes = 0;
  }
  return Current();
}

HealthReport HealthTracker::Current() const {
  HealthReport report;
  report.healthy = !node_.has_value();
  std::vector<std::string> parts;
  if (node_) parts.push_back(node_->reason);
  for (const auto& [index, failure] : gpus_) {
    report.unhealthy_gpus.push_back(index);
    parts.push_back(failure.reason.empty()
                        ? absl::StrCat("GPU ", index)
                        : absl::StrCat("GPU ", index, ": ", failure.reason));
  }
  report.reason =
      parts.empty() ? "health check passed" : absl::StrJoin(parts, "; ");
  if (report.reason.size() > kMaxReasonBytes) {
    report.reason.resize(kMaxReasonBytes);
  }
  return report;
}

}  // namespace phalanx::node_agent
