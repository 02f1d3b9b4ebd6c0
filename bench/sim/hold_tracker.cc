#include "bench/sim/hold_tracker.h"

#include <algorithm>
#include <utility>

namespace phalanx::bench {

HoldTracker::HoldTracker(std::vector<int> jobs) : jobs_(std::move(jobs)) {
  reports_.resize(jobs_.size());
  open_.resize(jobs_.size());
  for (size_t i = 0; i < jobs_.size(); ++i) {
    slot_[jobs_[i]] = i;
    reports_[i].job = jobs_[i];
  }
}

void HoldTracker::Observe(int job, absl::Time now,
                          std::vector<std::string> holders) {
  auto it = slot_.find(job);
  if (it == slot_.end()) return;
  Leave(job, now);
  open_[it->second] = Open{now, std::move(holders), true};
}

void HoldTracker::Leave(int job, absl::Time now) {
  auto it = slot_.find(job);
  if (it == slot_.end()) return;
  Open& open = open_[it->second];
  if (!open.open) return;
  const absl::Duration spell = std::max(absl::ZeroDuration(), now - open.since);
  for (const std::string& holder : open.holders) {
    reports_[it->second].held[holder] += spell;
  }
  open.open = false;
}

void HoldTracker::Preempted(int job, int by) {
  auto it = slot_.find(job);
  if (it == slot_.end()) return;
  ++reports_[it->second].preempted_by[by];
}

void HoldTracker::Passed(int job, const std::string& team,
                         const std::string& relation, int64_t gpus,
                         absl::Duration duration) {
  auto it = slot_.find(job);
  if (it == slot_.end()) return;
  PassedTally& tally = reports_[it->second].passed_by[{team, relation}];
  ++tally.gangs;
  tally.gpus += gpus;
  tally.largest = std::max(tally.largest, gpus);
  tally.gpu_hours += static_cast<double>(gpus) * absl::ToDoubleHours(duration);
}

}  // namespace phalanx::bench
