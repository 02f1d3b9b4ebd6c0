// The per-job comparison of two policies (`phalanx-sim --compare A,B`):
// every job's wait under A and under B, and, for the jobs that waited
// longest more under A, what held them under A and under B (HoldTracker). The
// text builders are pure (same input, same bytes); thread-compatible.
#ifndef PHALANX_BENCH_SIM_COMPARE_H_
#define PHALANX_BENCH_SIM_COMPARE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "bench/sim/hold_tracker.h"
#include "bench/sim/trace.h"

namespace phalanx::bench {

using JobWaits = std::vector<std::optional<absl::Duration>>;

// The at most `n` jobs, finished under both, whose wait under A exceeds
// their wait under B the most (ties by index), largest difference first.
std::vector<int> WaitedLongerUnderA(const JobWaits& a, const JobWaits& b,
                                    int n);

// job_line,team,gpus,priority,submit_hours,wait_<a>_hours,wait_<b>_hours,
// more_under_<a>_hours — one row a job in workload order; a wait is empty
// for a job that did not finish; submit hours since `origin`.
std::string CompareCsv(const std::string& a, const std::string& b,
                       const std::vector<TraceJob>& jobs, const JobWaits& wa,
                       const JobWaits& wb, absl::Time origin);

// Markdown: the jobs of `holds_a` (in that order), each with its waits and,
// under A and then under B (`holds_b`, the same jobs in the same order),
// its `top` longest holders, the jobs that preempted it and the gangs
// admitted ahead of it although submitted later (by team and priority
// relation).
std::string CompareMarkdown(const std::string& a, const std::string& b,
                            const std::vector<TraceJob>& jobs,
                            const JobWaits& wa, const JobWaits& wb,
                            const std::vector<HoldReport>& holds_a,
                            const std::vector<HoldReport>& holds_b, int top);

}  // namespace phalanx::bench

#endif  // PHALANX_BENCH_SIM_COMPARE_H_
