#include "bench/sim/sim_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "bench/stats.h"

namespace phalanx::bench {

std::optional<Distribution> Summarize(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  Distribution d;
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) /
           static_cast<double>(values.size());
  d.p50 = PercentileOfSorted(values, 50);
  d.p95 = PercentileOfSorted(values, 95);
  d.p99 = PercentileOfSorted(values, 99);
  return d;
}

std::optional<double> JainIndex(const std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  double sum = 0;
  double squares = 0;
  for (double x : values) {
    sum += x;
    squares += x * x;
  }
  if (squares == 0) return 1.0;
  return sum * sum / (static_cast<double>(values.size()) * squares);
}

MetricsAccumulator::MetricsAccumulator(absl::Time window_begin,
                                       absl::Time window_end,
                                       int64_t capacity_gpus, int teams,
                                       absl::Duration bucket_width)
    : begin_(window_begin),
      end_(window_end),
      capacity_gpus_(capacity_gpus),
      bucket_(bucket_width),
      received_(teams, 0.0),
      ideal_(teams, 0.0),
      longest_by_size_(kSizeClassCount) {}

double MetricsAccumulator::InWindow(absl::Time from, absl::Time to) const {
  const absl::Time a = std::max(from, begin_);
  const absl::Time b = std::min(to, end_);
  return b > a ? absl::ToDoubleSeconds(b - a) : 0.0;
}

void MetricsAccumulator::AddInterval(absl::Time from, absl::Time to,
                                     const FleetSample& sample) {
  if (to <= from) return;
  const double seconds = absl::ToDoubleSeconds(to - from);
  blocked_gpu_seconds_ += static_cast<double>(sample.blocked_gpus) * seconds;
  fragmentation_seconds_ += sample.node_fragmentation * InWindow(from, to);
  AddToSeries(from, to, sample);
}

void MetricsAccumulator::AddToSeries(absl::Time from, absl::Time to,
                                     const FleetSample& s) {
  absl::Time t = std::max(from, begin_);
  while (t < to) {
    const int64_t k = (t - begin_) / bucket_;
    const absl::Time bucket_end = begin_ + bucket_ * (k + 1);
    const absl::Time stop = std::min(to, bucket_end);
    const double dt = absl::ToDoubleSeconds(stop - t);
    if (static_cast<size_t>(k) >= sums_.size()) {
      sums_.resize(k + 1);
      bucket_seconds_.resize(k + 1, 0.0);
    }
    SeriesRow& row = sums_[k];
    row.allocated_gpus += static_cast<double>(s.allocated_gpus) * dt;
    row.pending_gangs += static_cast<double>(s.pending_gangs) * dt;
    row.running_gangs += static_cast<double>(s.running_gangs) * dt;
    row.free_whole_nodes += static_cast<double>(s.free_whole_nodes) * dt;
    row.node_fragmentation += s.node_fragmentation * dt;
    bucket_seconds_[k] += dt;
    t = stop;
  }
}

void MetricsAccumulator::AddRun(int team, int64_t gpus, absl::Time start,
                                absl::Time end, absl::Time kept_until) {
  const double g = static_cast<double>(gpus);
  kept_until = std::clamp(kept_until, start, end);
  const double in_window = g * InWindow(start, end);
  allocated_gpu_seconds_ += in_window;
  received_[team] += in_window;
  kept_gpu_seconds_ += g * InWindow(start, kept_until);
  lost_gpu_seconds_ += g * absl::ToDoubleSeconds(end - kept_until);
}

void MetricsAccumulator::AddJob(int team, int64_t gpus, absl::Time submit,
                                absl::Duration duration, bool accepted) {
  ++metrics_.jobs;
  const double g = static_cast<double>(gpus);
  metrics_.demand_gpu_hours += g * absl::ToDoubleSeconds(duration) / 3600.0;
  if (!accepted) {
    ++metrics_.rejected;
    return;
  }
  ideal_[team] += g * InWindow(submit, submit + duration);
}

void MetricsAccumulator::AddWait(absl::Duration wait, int requested_gpus,
                                 int priority) {
  const double seconds = absl::ToDoubleSeconds(wait);
  waits_.push_back(seconds);
  if (requested_gpus >= kLargeGangGpus) large_waits_.push_back(seconds);
  if (priority > 0) high_priority_waits_.push_back(seconds);
  if (int64_t{requested_gpus} * 4 >= capacity_gpus_) {
    quarter_fleet_waits_.push_back(seconds);
  }
  std::optional<double>& longest =
      longest_by_size_[SizeClassOf(requested_gpus)];
  longest = std::max(longest.value_or(0.0), seconds);
}

int SizeClassOf(int gpus) {
  int index = 0;
  for (int i = 0; i < kSizeClassCount; ++i) {
    if (gpus >= kSizeClasses[i].min_gpus) index = i;
  }
  return index;
}

PolicyMetrics MetricsAccumulator::Finish() const {
  PolicyMetrics m = metrics_;
  const double window = absl::ToDoubleSeconds(end_ - begin_);
  const double capacity = static_cast<double>(capacity_gpus_) * window;
  if (capacity > 0) {
    m.utilization = allocated_gpu_seconds_ / capacity;
    m.goodput_utilization = kept_gpu_seconds_ / capacity;
  }
  if (window > 0) m.fragmentation_node = fragmentation_seconds_ / window;
  m.blocked_gpu_hours = blocked_gpu_seconds_ / 3600.0;
  m.lost_gpu_hours = lost_gpu_seconds_ / 3600.0;
  m.wait_seconds = Summarize(waits_);
  m.large_wait_seconds = Summarize(large_waits_);
  m.high_priority_wait_seconds = Summarize(high_priority_waits_);
  m.quarter_fleet_wait_seconds = Summarize(quarter_fleet_waits_);
  if (!quarter_fleet_waits_.empty()) {
    m.quarter_fleet_longest_wait_seconds = *std::max_element(
        quarter_fleet_waits_.begin(), quarter_fleet_waits_.end());
  }
  m.longest_wait_seconds_by_size = longest_by_size_;
  std::vector<double> shares;
  for (size_t team = 0; team < ideal_.size(); ++team) {
    if (ideal_[team] > 0) shares.push_back(received_[team] / ideal_[team]);
  }
  m.jain_fairness = JainIndex(shares);
  return m;
}

std::vector<SeriesRow> MetricsAccumulator::Series() const {
  std::vector<SeriesRow> rows;
  for (size_t k = 0; k < sums_.size(); ++k) {
    const double dt = bucket_seconds_[k];
    if (dt <= 0) continue;
    const SeriesRow& s = sums_[k];
    SeriesRow row;
    row.hours = absl::ToDoubleHours(bucket_ * static_cast<int64_t>(k));
    row.allocated_gpus = s.allocated_gpus / dt;
    row.utilization =
        capacity_gpus_ > 0
            ? row.allocated_gpus / static_cast<double>(capacity_gpus_)
            : 0.0;
    row.pending_gangs = s.pending_gangs / dt;
    row.running_gangs = s.running_gangs / dt;
    row.free_whole_nodes = s.free_whole_nodes / dt;
    row.node_fragmentation = s.node_fragmentation / dt;
    rows.push_back(row);
  }
  return rows;
}

}  // namespace phalanx::bench
