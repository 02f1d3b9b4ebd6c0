#include "bench/sim/compare.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace phalanx::bench {
namespace {

std::string Hours(const std::optional<absl::Duration>& d) {
  return d ? absl::StrFormat("%.3f", absl::ToDoubleHours(*d)) : "";
}

int64_t LineOf(const std::vector<TraceJob>& jobs, int index) {
  return jobs[index].line > 0 ? jobs[index].line : index;
}

void AppendHolders(const HoldReport& hold, int top, std::string& md) {
  std::vector<std::pair<absl::Duration, std::string>> held;
  for (const auto& [holder, d] : hold.held) held.emplace_back(d, holder);
  std::sort(held.begin(), held.end(), [](const auto& x, const auto& y) {
    return std::tie(y.first, x.second) < std::tie(x.first, y.second);
  });
  if (held.size() > static_cast<size_t>(top)) held.resize(top);
  for (const auto& [d, holder] : held) {
    absl::StrAppendFormat(&md, "    - %.1f h: %s\n", absl::ToDoubleHours(d),
                          holder);
  }
}

void AppendPreemptions(const std::vector<TraceJob>& jobs,
                       const HoldReport& hold, std::string& md) {
  for (const auto& [by, times] : hold.preempted_by) {
    const std::string who =
        by < 0 ? "a gang outside the trace"
               : absl::StrCat("job ", LineOf(jobs, by), " (", jobs[by].team,
                              ", ", jobs[by].gpus, " GPUs, priority ",
                              jobs[by].priority, ")");
    absl::StrAppend(&md, "    - preempted ", times, "× by ", who, "\n");
  }
}

void AppendPassed(const HoldReport& hold, std::string& md) {
  for (const auto& [key, tally] : hold.passed_by) {
    absl::StrAppendFormat(
        &md,
        "    - admitted ahead though submitted later: %d gangs of %s at %s "
        "priority, %d GPUs in all (largest %d), %.0f GPU-hours\n",
        tally.gangs, key.first, key.second, tally.gpus, tally.largest,
        tally.gpu_hours);
  }
}

// One policy's account of one job, indented under the job.
void AppendHold(const std::string& policy, const std::vector<TraceJob>& jobs,
                const HoldReport& hold, int top, std::string& md) {
  absl::StrAppend(&md, "  - under ", policy, ":\n");
  AppendHolders(hold, top, md);
  AppendPreemptions(jobs, hold, md);
  AppendPassed(hold, md);
}

}  // namespace

std::vector<int> WaitedLongerUnderA(const JobWaits& a, const JobWaits& b,
                                    int n) {
  std::vector<std::pair<absl::Duration, int>> more;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (!a[i] || !b[i] || *a[i] <= *b[i]) continue;
    more.emplace_back(*a[i] - *b[i], static_cast<int>(i));
  }
  std::sort(more.begin(), more.end(), [](const auto& x, const auto& y) {
    return std::tie(y.first, x.second) < std::tie(x.first, y.second);
  });
  std::vector<int> jobs;
  for (size_t i = 0; i < more.size() && i < static_cast<size_t>(n); ++i) {
    jobs.push_back(more[i].second);
  }
  return jobs;
}

std::string CompareCsv(const std::string& a, const std::string& b,
                       const std::vector<TraceJob>& jobs, const JobWaits& wa,
                       const JobWaits& wb, absl::Time origin) {
  std::string csv =
      absl::StrCat("job_line,team,gpus,priority,submit_hours,wait_", a,
                   "_hours,wait_", b, "_hours,more_under_", a, "_hours\n");
  for (size_t i = 0; i < jobs.size(); ++i) {
    const TraceJob& job = jobs[i];
    const std::optional<absl::Duration> more =
        wa[i] && wb[i] ? std::optional<absl::Duration>(*wa[i] - *wb[i])
                       : std::nullopt;
    absl::StrAppendFormat(&csv, "%d,%s,%d,%d,%.6f,%s,%s,%s\n",
                          LineOf(jobs, static_cast<int>(i)), job.team, job.gpus,
                          job.priority,
                          absl::ToDoubleHours(job.submit_time - origin),
                          Hours(wa[i]), Hours(wb[i]), Hours(more));
  }
  return csv;
}

std::string CompareMarkdown(const std::string& a, const std::string& b,
                            const std::vector<TraceJob>& jobs,
                            const JobWaits& wa, const JobWaits& wb,
                            const std::vector<HoldReport>& holds_a,
                            const std::vector<HoldReport>& holds_b, int top) {
  std::string md = absl::StrCat(
      "# Jobs that waited longest more under ", a, " than under ", b, "\n\n",
      "Holders are what core showed after each admission cycle: a job waiting "
      "on its own reservation is held by the gangs running "
      "on the reserved nodes; a job that does not fit, or may not backfill, "
      "by the reservations held for gangs ahead of it. A spell with several "
      "holders counts for each, so the hours may sum to more than the "
      "wait.\n\n");
  for (size_t k = 0; k < holds_a.size(); ++k) {
    const int i = holds_a[k].job;
    const TraceJob& job = jobs[i];
    absl::StrAppendFormat(
        &md,
        "- job %d (%s, %d GPUs, priority %d): waited %s h under %s, %s h "
        "under %s\n",
        LineOf(jobs, i), job.team, job.gpus, job.priority, Hours(wa[i]), a,
        Hours(wb[i]), b);
    AppendHold(a, jobs, holds_a[k], top, md);
    if (k < holds_b.size()) AppendHold(b, jobs, holds_b[k], top, md);
  }
  return md;
}

}  // namespace phalanx::bench
