#include "bench/sim/report.h"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/json.h"

extern char** environ;

namespace phalanx::bench {
namespace {

std::string Utc(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", t, absl::UTCTimeZone());
}

// A number of summary.json: 10 significant digits.
Json Number(double value) { return JsonNumber(value, 10); }

Json OptionalNumber(const std::optional<double>& value) {
  return value ? Number(*value) : Json(nullptr);
}

Json DistributionJson(const std::optional<Distribution>& d) {
  if (!d) return nullptr;
  Json json = Json::object();
  json["mean"] = Number(d->mean);
  json["p50"] = Number(d->p50);
  json["p95"] = Number(d->p95);
  json["p99"] = Number(d->p99);
  return json;
}

Json FleetJson(const RunMeta& meta) {
  Json json = Json::object();
  json["source"] = meta.fleet_source;
  json["nodes"] = meta.nodes;
  json["gpus"] = meta.gpus;
  json["gpus_per_node"] = meta.gpus_per_node;
  json["nodes_per_rack"] = meta.nodes_per_rack;
  json["nodes_per_block"] = meta.nodes_per_block;
  json["levels"] = Json::array();
  for (const std::string& level : meta.levels) json["levels"].push_back(level);
  json["gpus_by_model"] = Json::object();
  for (const auto& [model, gpus] : meta.gpus_by_model) {
    json["gpus_by_model"][model] = gpus;
  }
  return json;
}

Json MetaJson(const RunMeta& meta) {
  Json json = Json::object();
  json["trace"] = meta.trace;
  if (meta.synthetic_seed) {
    json["synthetic_seed"] = static_cast<int64_t>(*meta.synthetic_seed);
    json["synthetic_days"] = Number(meta.synthetic_days);
  }
  json["seed"] = static_cast<int64_t>(meta.seed);
  if (meta.synthetic_seed) {
    json["synthetic_load"] = Number(meta.synthetic_load);
  }
  if (!meta.synthetic_profile.empty()) {
    json["synthetic_profile"] = meta.synthetic_profile;
  }
  if (meta.elastic_fraction > 0) {
    json["elastic_fraction"] = Number(meta.elastic_fraction);
  }
  json["checkpoint_interval_s"] = Number(meta.checkpoint_interval_s);
  json["node_mtbf_hours"] = Number(meta.node_mtbf_hours);
  json["node_repair_hours"] = Number(meta.node_repair_hours);
  json["failure_seed"] = static_cast<int64_t>(meta.failure_seed);
  json["estimate_factor"] =
      "uniform [0.5, 3] x actual, once per job in file order";
  json["jobs"] = meta.jobs;
  json["teams"] = meta.teams;
  json["first_submit"] = Utc(meta.first_submit);
  json["last_submit"] = Utc(meta.last_submit);
  json["window_hours"] =
      Number(absl::ToDoubleHours(meta.last_submit - meta.first_submit));
  json["fleet"] = FleetJson(meta);
  return json;
}

// "ok", "unavailable" or "not finished".
std::string Status(const PolicyOutcome& outcome) {
  if (outcome.metrics) return "ok";
  return outcome.not_finished ? "not finished" : "unavailable";
}

// {"1-8": seconds or null, ...}; null without metrics.
Json LongestBySizeJson(const std::optional<PolicyMetrics>& m) {
  if (!m) return nullptr;
  Json json = Json::object();
  for (int i = 0; i < kSizeClassCount; ++i) {
    const auto& longest = m->longest_wait_seconds_by_size;
    json[kSizeClasses[i].name] = OptionalNumber(
        i < static_cast<int>(longest.size()) ? longest[i] : std::nullopt);
  }
  return json;
}

// One policy's entry; every metric is null when it has no metrics.
Json PolicyJson(const PolicyOutcome& outcome) {
  const std::optional<PolicyMetrics>& m = outcome.metrics;
  Json json = Json::object();
  auto integer = [&](const char* key, int64_t PolicyMetrics::*field) {
    json[key] = m ? Json((*m).*field) : Json(nullptr);
  };
  auto number = [&](const char* key, double PolicyMetrics::*field) {
    json[key] = m ? Number((*m).*field) : Json(nullptr);
  };
  auto optional = [&](const char* key,
                      std::optional<double> PolicyMetrics::*field) {
    json[key] = OptionalNumber(m ? (*m).*field : std::nullopt);
  };
  auto distribution = [&](const char* key,
                          std::optional<Distribution> PolicyMetrics::*field) {
    json[key] = DistributionJson(m ? (*m).*field : std::nullopt);
  };
  json["available"] = m.has_value();
  json["status"] = Status(outcome);
  if (!m) json["unavailable_reason"] = outcome.unavailable_reason;
  integer("jobs", &PolicyMetrics::jobs);
  integer("finished", &PolicyMetrics::finished);
  integer("rejected", &PolicyMetrics::rejected);
  optional("utilization", &PolicyMetrics::utilization);
  distribution("wait_seconds", &PolicyMetrics::wait_seconds);
  distribution("large_wait_seconds", &PolicyMetrics::large_wait_seconds);
  distribution("high_priority_wait_seconds",
               &PolicyMetrics::high_priority_wait_seconds);
  distribution("quarter_fleet_wait_seconds",
               &PolicyMetrics::quarter_fleet_wait_seconds);
  optional("quarter_fleet_longest_wait_seconds",
           &PolicyMetrics::quarter_fleet_longest_wait_seconds);
  json["longest_wait_seconds_by_size"] = LongestBySizeJson(m);
  optional("fragmentation_node", &PolicyMetrics::fragmentation_node);
  number("blocked_gpu_hours", &PolicyMetrics::blocked_gpu_hours);
  optional("goodput_utilization", &PolicyMetrics::goodput_utilization);
  number("lost_gpu_hours", &PolicyMetrics::lost_gpu_hours);
  number("demand_gpu_hours", &PolicyMetrics::demand_gpu_hours);
  optional("jain_fairness", &PolicyMetrics::jain_fairness);
  integer("preemptions", &PolicyMetrics::preemptions);
  integer("evictions", &PolicyMetrics::evictions);
  integer("checkpoints", &PolicyMetrics::checkpoints);
  integer("node_failures", &PolicyMetrics::node_failures);
  integer("repairs", &PolicyMetrics::repairs);
  integer("elastic_jobs", &PolicyMetrics::elastic_jobs);
  integer("elastic_admitted_below_full",
          &PolicyMetrics::elastic_admitted_below_full);
  integer("grows", &PolicyMetrics::grows);
  integer("shrinks", &PolicyMetrics::shrinks);
  number("sim_seconds", &PolicyMetrics::sim_seconds);
  return json;
}

// Markdown cells.
std::string Fixed(const std::optional<double>& v, int digits) {
  return v ? absl::StrFormat("%.*f", digits, *v) : "–";
}

std::string Hours(const std::optional<Distribution>& d) {
  if (!d) return "–";
  return absl::StrFormat("%.2f / %.2f / %.2f / %.2f", d->mean / 3600,
                         d->p50 / 3600, d->p95 / 3600, d->p99 / 3600);
}

std::string LongestBySize(const PolicyMetrics& m) {
  std::vector<std::string> cells;
  for (const std::optional<double>& s : m.longest_wait_seconds_by_size) {
    cells.push_back(
        Fixed(s ? std::optional<double>(*s / 3600) : std::nullopt, 1));
  }
  return absl::StrJoin(cells, " / ");
}

using Cell = std::function<std::string(const PolicyMetrics&)>;

const std::vector<std::pair<std::string, Cell>>& Rows() {
  static const auto* rows = new std::vector<std::pair<std::string, Cell>>{
      {"jobs finished / total",
       [](const PolicyMetrics& m) {
         return absl::StrCat(
             m.finished, " / ", m.jobs,
             m.rejected ? absl::StrCat(" (", m.rejected, " never fit)") : "");
       }},
      {"utilization",
       [](const PolicyMetrics& m) { return Fixed(m.utilization, 3); }},
      {"goodput utilization",
       [](const PolicyMetrics& m) { return Fixed(m.goodput_utilization, 3); }},
      {"wait h: mean / p50 / p95 / p99",
       [](const PolicyMetrics& m) { return Hours(m.wait_seconds); }},
      {"large-gang (≥64 GPUs) wait h",
       [](const PolicyMetrics& m) { return Hours(m.large_wait_seconds); }},
      {"high-priority wait h",
       [](const PolicyMetrics& m) {
         return Hours(m.high_priority_wait_seconds);
       }},
      {"≥¼-fleet wait h (longest)",
       [](const PolicyMetrics& m) {
         return absl::StrCat(
             Hours(m.quarter_fleet_wait_seconds), " (",
             Fixed(m.quarter_fleet_longest_wait_seconds
                       ? std::optional<double>(
                             *m.quarter_fleet_longest_wait_seconds / 3600)
                       : std::nullopt,
                   2),
             ")");
       }},
      {"longest wait h by GPUs: 1-8 / 9-63 / 64-255 / 256-511 / 512-1023 / "
       "1024+",
       [](const PolicyMetrics& m) { return LongestBySize(m); }},
      {"node fragmentation",
       [](const PolicyMetrics& m) { return Fixed(m.fragmentation_node, 3); }},
      {"blocked GPU-hours",
       [](const PolicyMetrics& m) { return Fixed(m.blocked_gpu_hours, 0); }},
      {"lost GPU-hours",
       [](const PolicyMetrics& m) { return Fixed(m.lost_gpu_hours, 0); }},
      {"demand GPU-hours",
       [](const PolicyMetrics& m) { return Fixed(m.demand_gpu_hours, 0); }},
      {"Jain fairness",
       [](const PolicyMetrics& m) { return Fixed(m.jain_fairness, 3); }},
      {"preemptions",
       [](const PolicyMetrics& m) { return absl::StrCat(m.preemptions); }},
      {"node failures / repaired / evicted gangs",
       [](const PolicyMetrics& m) {
         return absl::StrCat(m.node_failures, " / ", m.repairs, " / ",
                             m.evictions);
       }},
      {"checkpoints",
       [](const PolicyMetrics& m) { return absl::StrCat(m.checkpoints); }},
      {"elastic jobs / admitted below full / grows / shrinks",
       [](const PolicyMetrics& m) {
         return absl::StrCat(m.elastic_jobs, " / ",
                             m.elastic_admitted_below_full, " / ", m.grows,
                             " / ", m.shrinks);
       }},
      {"sim seconds (wall)",
       [](const PolicyMetrics& m) { return Fixed(m.sim_seconds, 1); }},
  };
  return *rows;
}

}  // namespace

std::string SummaryJson(const RunMeta& meta,
                        const std::vector<PolicyOutcome>& outcomes) {
  Json json = Json::object();
  json["meta"] = MetaJson(meta);
  json["policies"] = Json::object();
  for (const PolicyOutcome& outcome : outcomes) {
    json["policies"][outcome.name] = PolicyJson(outcome);
  }
  return DumpJson(json, 2) + "\n";
}

std::string SummaryMarkdown(const RunMeta& meta,
                            const std::vector<PolicyOutcome>& outcomes) {
  std::string md = absl::StrFormat(
      "Trace `%s`: %d jobs, %d teams, submitted %s .. %s (UTC); estimate "
      "seed %d.\nFleet (%s): %d nodes, %d GPUs, %d GPUs a node, racks of %d "
      "nodes, blocks of %d nodes.\n\n",
      meta.trace, meta.jobs, meta.teams, Utc(meta.first_submit),
      Utc(meta.last_submit), meta.seed, meta.fleet_source, meta.nodes,
      meta.gpus, meta.gpus_per_node, meta.nodes_per_rack, meta.nodes_per_block);
  absl::StrAppend(
      &md, "Checkpoints every ",
      meta.checkpoint_interval_s > 0
          ? absl::StrFormat("%g min of run time",
                            meta.checkpoint_interval_s / 60)
          : std::string("never"),
      "; node failures ",
      meta.node_mtbf_hours > 0
          ? absl::StrFormat("MTBF %g h, repair %g h, seed %d",
                            meta.node_mtbf_hours, meta.node_repair_hours,
                            meta.failure_seed)
          : std::string("off"),
      meta.elastic_fraction > 0
          ? absl::StrFormat("; %g of the gangs of >= 64 GPUs elastic down "
                            "to half their pods",
                            meta.elastic_fraction)
          : std::string(),
      ".\n\n");
  md += "| metric |";
  std::string rule = "| --- |";
  for (const PolicyOutcome& o : outcomes) {
    absl::StrAppend(&md, " ", o.name, " |");
    rule += " --- |";
  }
  absl::StrAppend(&md, "\n", rule, "\n");
  for (const auto& [label, cell] : Rows()) {
    absl::StrAppend(&md, "| ", label, " |");
    for (const PolicyOutcome& o : outcomes) {
      absl::StrAppend(&md, " ", o.metrics ? cell(*o.metrics) : Status(o), " |");
    }
    md += "\n";
  }
  for (const PolicyOutcome& o : outcomes) {
    if (!o.metrics) {
      absl::StrAppend(&md, "\n`", o.name, "` ", Status(o), ": ",
                      o.unavailable_reason, ".");
    }
  }
  return md + "\n";
}

std::string SeriesCsv(const std::vector<SeriesRow>& rows) {
  std::string csv =
      "hours,utilization,allocated_gpus,pending_gangs,running_gangs,"
      "free_whole_nodes,node_fragmentation\n";
  for (const SeriesRow& r : rows) {
    absl::StrAppendFormat(&csv, "%.4f,%.4f,%.2f,%.2f,%.2f,%.2f,%.4f\n", r.hours,
                          r.utilization, r.allocated_gpus, r.pending_gangs,
                          r.running_gangs, r.free_whole_nodes,
                          r.node_fragmentation);
  }
  return csv;
}

std::string EventsCsv(const std::vector<EventRecord>& events,
                      const std::vector<TraceJob>& jobs, absl::Time origin) {
  std::string csv = "time_hours,event,job_line,team,gpus,priority,reason\n";
  for (const EventRecord& e : events) {
    const TraceJob& job = jobs[e.job];
    std::string reason = e.reason;
    std::replace(reason.begin(), reason.end(), '"', '\'');
    absl::StrAppendFormat(&csv, "%.6f,%s,%d,%s,%d,%d,\"%s\"\n",
                          absl::ToDoubleHours(e.time - origin),
                          core::EventTypeName(e.type),
                          job.line > 0 ? job.line : e.job, job.team, e.gpus,
                          job.priority, reason);
  }
  return csv;
}

std::string ElasticCsv(const std::vector<TraceJob>& jobs,
                       const ReplayResult& result, absl::Time origin) {
  std::string csv =
      "job_line,team,gpus,priority,submit_hours,wait_hours,first_gpus,"
      "resizes,run_hours\n";
  for (size_t i = 0; i < jobs.size(); ++i) {
    const TraceJob& job = jobs[i];
    if (!job.elastic) continue;
    const std::optional<absl::Time>& start = result.first_starts[i];
    const std::optional<absl::Time>& end = result.finishes[i];
    const std::optional<absl::Duration>& wait = result.waits[i];
    absl::StrAppendFormat(
        &csv, "%d,%s,%d,%d,%.6f,%s,%d,%d,%s\n",
        job.line > 0 ? job.line : static_cast<int64_t>(i), job.team, job.gpus,
        job.priority, absl::ToDoubleHours(job.submit_time - origin),
        wait ? absl::StrFormat("%.6f", absl::ToDoubleHours(*wait)) : "",
        result.first_gpus[i], result.resizes[i],
        start && end
            ? absl::StrFormat("%.6f", absl::ToDoubleHours(*end - *start))
            : "");
  }
  return csv;
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    return absl::InternalError(absl::StrCat(path, ": cannot write"));
  }
  return absl::OkStatus();
}

std::string SeriesFileName(const std::string& policy) {
  return absl::StrCat("timeseries-", policy, ".csv");
}

absl::Status WriteReports(const std::string& dir, const RunMeta& meta,
                          const std::vector<PolicyOutcome>& outcomes) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat(dir, ": cannot create: ", error.message()));
  }
  const std::filesystem::path base(dir);
  if (absl::Status s = WriteFile((base / "summary.json").string(),
                                 SummaryJson(meta, outcomes));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = WriteFile((base / "summary.md").string(),
                                 SummaryMarkdown(meta, outcomes));
      !s.ok()) {
    return s;
  }
  for (const PolicyOutcome& o : outcomes) {
    if (!o.metrics) continue;
    if (absl::Status s = WriteFile((base / SeriesFileName(o.name)).string(),
                                   SeriesCsv(o.series));
        !s.ok()) {
      return s;
    }
    for (const auto& [prefix, csv] : {std::pair{"events-", &o.events_csv},
                                      std::pair{"elastic-", &o.elastic_csv}}) {
      if (csv->empty()) continue;
      const std::string file = absl::StrCat(prefix, o.name, ".csv");
      if (absl::Status s = WriteFile((base / file).string(), *csv); !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status RunPlot(const std::string& python, const std::string& script,
                     const std::string& dir) {
  for (const std::string& file : {python, script}) {
    if (access(file.c_str(), R_OK) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(file, ": not found"));
    }
  }
  std::vector<std::string> args = {python, script, dir};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (int err = posix_spawn(&pid, python.c_str(), nullptr, nullptr, argv.data(),
                            environ);
      err != 0) {
    return absl::InternalError(
        absl::StrCat("cannot start ", python, ": ", std::strerror(err)));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError("waitpid failed");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(
        absl::StrCat(script, " failed (status ", status, ")"));
  }
  return absl::OkStatus();
}

std::string AbsErrorBySizeMarkdown(
    const std::vector<PolicyOutcome>& outcomes,
    const std::vector<std::vector<std::optional<absl::Duration>>>& errors,
    const std::vector<int64_t>& job_gpus, absl::string_view counted) {
  std::string md =
      absl::StrCat("| policy | GPUs | ", counted,
                   " | median \\|error\\| h | p90 \\|error\\| h |\n"
                   "| --- | --- | --- | --- | --- |\n");
  for (size_t p = 0; p < outcomes.size() && p < errors.size(); ++p) {
    std::vector<std::vector<double>> hours(kSizeClassCount);
    for (size_t i = 0; i < errors[p].size() && i < job_gpus.size(); ++i) {
      if (!errors[p][i]) continue;
      hours[SizeClassOf(static_cast<int>(job_gpus[i]))].push_back(
          absl::ToDoubleHours(absl::AbsDuration(*errors[p][i])));
    }
    for (int c = 0; c < kSizeClassCount; ++c) {
      std::vector<double>& h = hours[c];
      if (h.empty()) continue;
      std::sort(h.begin(), h.end());
      auto at = [&h](double q) {
        return h[std::min(h.size() - 1, static_cast<size_t>(q * h.size()))];
      };
      absl::StrAppendFormat(&md, "| `%s` | %s | %d | %.2f | %.2f |\n",
                            outcomes[p].name, kSizeClasses[c].name,
                            static_cast<int>(h.size()), at(0.5), at(0.9));
    }
  }
  return md;
}

std::string PlanAccuracyMarkdown(const std::vector<PolicyOutcome>& outcomes,
                                 const std::vector<int64_t>& job_gpus) {
  std::vector<std::vector<std::optional<absl::Duration>>> errors;
  for (const PolicyOutcome& outcome : outcomes) {
    errors.push_back(outcome.plan_errors);
  }
  return AbsErrorBySizeMarkdown(outcomes, errors, job_gpus,
                                "jobs planned at submit");
}

}  // namespace phalanx::bench
