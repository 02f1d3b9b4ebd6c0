#include "clients/ctl_views.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "clients/ctl_format.h"

namespace phalanx::ctl {
namespace {

int64_t TotalPods(const v1::GangSpec& spec) {
  int64_t pods = 0;
  for (const v1::PodSet& set : spec.pod_sets()) pods += set.count();
  return pods;
}

int64_t TotalGpus(const v1::GangSpec& spec) {
  int64_t gpus = 0;
  for (const v1::PodSet& set : spec.pod_sets()) {
    gpus += int64_t{set.count()} * set.gpus();
  }
  return gpus;
}

// Pods and GPUs the gang holds when it holds a placement (an elastic gang
// may hold fewer than its spec's maximum), else its spec's.
bool HoldsPlacement(const v1::Gang& gang) {
  return !gang.placement().empty() && !gang.placement_released();
}

std::string PodsCell(const v1::Gang& gang) {
  const int64_t max = TotalPods(gang.spec());
  if (!HoldsPlacement(gang) || gang.placement_size() == max) {
    return absl::StrCat(max);
  }
  return absl::StrCat(gang.placement_size(), "/", max);
}

std::string GpusCell(const v1::Gang& gang) {
  if (!HoldsPlacement(gang)) return absl::StrCat(TotalGpus(gang.spec()));
  int64_t gpus = 0;
  for (const v1::PodPlacement& pod : gang.placement()) {
    gpus += pod.gpu_indices_size();
  }
  return absl::StrCat(gpus);
}

std::string OrDash(const std::string& text) {
  return text.empty() ? "-" : text;
}

// "required rack", "preferred block", "any".
std::string ConstraintText(const v1::TopologyConstraint& topology) {
  switch (topology.mode()) {
    case v1::TOPOLOGY_MODE_REQUIRED:
      return absl::StrCat("required ", topology.level());
    case v1::TOPOLOGY_MODE_PREFERRED:
      return absl::StrCat("preferred ", topology.level());
    default:
      return "any";
  }
}

// "32 pods on 4 nodes", "1 pod on 1 node".
std::string PlacementSummary(
    const google::protobuf::RepeatedPtrField<v1::PodPlacement>& placement) {
  std::set<std::string> nodes;
  for (const v1::PodPlacement& pod : placement) nodes.insert(pod.node());
  auto count = [](size_t n, const char* noun) {
    return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
  };
  return absl::StrCat(count(placement.size(), "pod"), " on ",
                      count(nodes.size(), "node"));
}

std::string PodSetsTable(const v1::GangSpec& spec) {
  Table table(
      {"NAME", "PODS", "GPUS/POD", "MODELS", "TOPOLOGY", "SLICE", "GROUP"});
  for (const v1::PodSet& set : spec.pod_sets()) {
    const std::string slice =
        set.slice().size() > 0
            ? absl::StrCat(set.slice().size(), " per ", set.slice().level())
            : "-";
    const std::string pods =
        set.min_count() > 0 && set.min_count() < set.count()
            ? absl::StrCat(set.min_count(), "..", set.count())
            : absl::StrCat(set.count());
    table.AddRow({set.name(), pods, absl::StrCat(set.gpus()),
                  OrDash(absl::StrJoin(set.gpu_models(), ",")),
                  ConstraintText(set.topology()), slice, OrDash(set.group())});
  }
  return table.Render();
}

// "Key:" / value rows of GangDetails, empty values left out.
void AddIfSet(Table* table, const std::string& key, const std::string& value) {
  if (!value.empty() && value != "-") table->AddRow({key + ":", value});
}

std::string RuntimeText(const v1::GangSpec& spec) {
  std::vector<std::string> parts;
  if (spec.has_estimated_runtime()) {
    parts.push_back(absl::StrCat(
        "estimated ", HumanDuration(FromProto(spec.estimated_runtime()))));
  }
  if (spec.has_max_runtime()) {
    parts.push_back(
        absl::StrCat("max ", HumanDuration(FromProto(spec.max_runtime()))));
  }
  return absl::StrJoin(parts, ", ");
}

// A "Reason code:" row, when the gang has a code.
void AddReasonCode(Table* table, v1::ReasonCode code) {
  if (code == v1::REASON_CODE_UNSPECIFIED) return;
  table->AddRow({"Reason code:", ReasonCodeName(code)});
}

// "Plan:", "Estimated start:" (from `start`, when not null) and "Planned
// domain:" rows, each when set.
void AddPlanRows(Table* table, const v1::Gang& gang,
                 const google::protobuf::Timestamp* start,
                 const v1::PlanningConfig* planning, absl::Time now) {
  AddIfSet(table, "Plan", PlanText(gang, planning));
  if (start != nullptr) {
    table->AddRow({"Estimated start:", TimeAndAge(start, now)});
  }
  AddIfSet(table, "Planned domain", gang.planned_domain());
}

Table GangFields(const v1::Gang& gang, absl::Time now,
                 const v1::PlanningConfig* planning) {
  Table table = Table::Fields();
  const v1::GangSpec& spec = gang.spec();
  table.AddRow({"ID:", gang.id()});
  table.AddRow({"Queue:", spec.queue()});
  AddIfSet(&table, "Owner", gang.owner());
  table.AddRow({"State:", GangStateName(gang.state())});
  AddReasonCode(&table, gang.reason_code());
  AddIfSet(&table, "Reason", gang.reason());
  AddPlanRows(&table, gang,
              gang.has_estimated_start() ? &gang.estimated_start() : nullptr,
              planning, now);
  table.AddRow({"Priority:", absl::StrCat(spec.priority())});
  AddIfSet(&table, "Priority class", spec.priority_class());
  AddIfSet(&table, "Request ID", spec.request_id());
  AddIfSet(&table, "Labels", JoinMap(spec.labels()));
  table.AddRow({"Submitted:", TimeAndAge(&gang.submit_time(), now)});
  if (gang.has_admit_time()) {
    table.AddRow({"Admitted:", TimeAndAge(&gang.admit_time(), now)});
  }
  if (gang.has_finish_time()) {
    table.AddRow({"Finished:", TimeAndAge(&gang.finish_time(), now)});
  }
  if (gang.has_last_checkpoint_time()) {
    table.AddRow(
        {"Checkpoint:", TimeAndAge(&gang.last_checkpoint_time(), now)});
  }
  if (gang.has_lease_expire_time()) {
    table.AddRow(
        {"Lease expires:", TimeAndAge(&gang.lease_expire_time(), now)});
  }
  if (gang.has_grace_deadline()) {
    table.AddRow({"Grace deadline:", TimeAndAge(&gang.grace_deadline(), now)});
  }
  AddIfSet(&table, "Runtime", RuntimeText(spec));
  table.AddRow({"Attempts:", absl::StrCat(gang.attempts())});
  if (gang.shrink_to_count() > 0) {
    table.AddRow(
        {"Shrinking to:",
         absl::StrCat(gang.shrink_to_count(),
                      gang.shrink_to_count() == 1 ? " pod" : " pods")});
  }
  if (gang.resizes() > 0) {
    table.AddRow(
        {"Resizes:", absl::StrCat(gang.resizes(), ", last ",
                                  TimeAndAge(&gang.last_resize_time(), now))});
  }
  // The scheduler clears on_loan once the attempt releases its GPUs.
  if (gang.on_loan()) {
    table.AddRow({"On loan:",
                  "yes: on nodes reserved for another gang, which may "
                  "preempt it"});
  }
  AddIfSet(&table, "Message", gang.message());
  table.AddRow({"Revision:", absl::StrCat(gang.revision())});
  return table;
}

std::string Percent(double fraction) {
  return absl::StrFormat("%.1f%%", fraction * 100);
}

std::string DomainsTable(const v1::GetTopologyResponse& response) {
  Table table({"DOMAIN", "LEVEL", "NODES", "GPUS", "FREE GPUS", "FREE NODES"});
  for (const v1::Domain& domain : response.domains()) {
    table.AddRow({domain.path(), domain.level(), absl::StrCat(domain.nodes()),
                  absl::StrCat(domain.gpus_total()),
                  absl::StrCat(domain.gpus_free()),
                  absl::StrCat(domain.free_whole_nodes())});
  }
  return table.Render();
}

std::string LevelsTable(const v1::GetTopologyResponse& response) {
  Table table({"LEVEL", "LARGEST FREE (NODES)", "STRANDED"});
  for (const v1::LevelFragmentation& level : response.levels_fragmentation()) {
    table.AddRow({level.level(), absl::StrCat(level.largest_free_whole_nodes()),
                  Percent(level.stranded_whole_node_fraction())});
  }
  return table.Render();
}

// The last column of a watch line: placement, else reason, else message.
std::string WatchDetail(const v1::Gang& gang) {
  if (!gang.placement().empty()) return PlacementSummary(gang.placement());
  return gang.reason().empty() ? gang.message() : gang.reason();
}

}  // namespace

std::string GangStateName(v1::GangState state) {
  return ShortEnumName(v1::GangState_Name(state), "GANG_STATE_");
}

bool IsFinalState(v1::GangState state) {
  return state == v1::GANG_STATE_SUCCEEDED || state == v1::GANG_STATE_FAILED ||
         state == v1::GANG_STATE_CANCELLED;
}

std::string NodeStateName(v1::NodeState state) {
  return ShortEnumName(v1::NodeState_Name(state), "NODE_STATE_");
}

std::string ReasonCodeName(v1::ReasonCode code) {
  return ShortEnumName(v1::ReasonCode_Name(code), "REASON_CODE_");
}

std::string StartCell(const v1::Gang& gang, absl::Time now) {
  switch (gang.plan_status()) {
    case v1::PLAN_STATUS_PLANNED: {
      if (!gang.has_estimated_start()) return "-";
      const absl::Time start = FromProto(gang.estimated_start());
      return start <= now ? "now"
                          : absl::StrCat("in ", HumanDuration(start - now));
    }
    case v1::PLAN_STATUS_BEYOND_DEPTH:
      return "beyond-depth";
    case v1::PLAN_STATUS_BEYOND_WINDOW:
      return "beyond-window";
    case v1::PLAN_STATUS_NEVER_FITS:
      return "never-fits";
    default:
      return "-";
  }
}

std::string PlanText(const v1::Gang& gang, const v1::PlanningConfig* planning) {
  switch (gang.plan_status()) {
    case v1::PLAN_STATUS_PLANNED:
      return absl::StrCat("planned, rank ", gang.plan_rank());
    case v1::PLAN_STATUS_UNPLANNED:
      return "not planned yet: it came after the last plan was made";
    case v1::PLAN_STATUS_BEYOND_DEPTH:
      return planning != nullptr
                 ? absl::StrCat("not planned: more than ",
                                planning->max_gangs(), " gangs are ahead of it")
                 : "not planned: more gangs are ahead of it than the plan "
                   "holds";
    case v1::PLAN_STATUS_BEYOND_WINDOW:
      return planning != nullptr
                 ? absl::StrCat("not planned: it would start more than ",
                                HumanDuration(FromProto(planning->window())),
                                " from now")
                 : "not planned: it would start beyond the plan's window";
    case v1::PLAN_STATUS_NEVER_FITS:
      return planning != nullptr
                 ? absl::StrCat("not planned: no time within ",
                                HumanDuration(FromProto(planning->window())),
                                " fits it on the fleet as built")
                 : "not planned: no time in the plan's window fits it on "
                   "the fleet as built";
    default:
      return "";
  }
}

std::string GangsTable(
    const google::protobuf::RepeatedPtrField<v1::Gang>& gangs, absl::Time now,
    bool wide) {
  std::vector<std::string> header = {"ID",   "QUEUE", "OWNER", "STATE",
                                     "PRIO", "PODS",  "GPUS",  "AGE"};
  if (wide) header.insert(header.end(), {"ATTEMPTS", "NODES", "CODE", "START"});
  header.push_back("REASON");
  Table table(header);
  for (const v1::Gang& gang : gangs) {
    const std::string age =
        gang.has_submit_time()
            ? HumanDuration(now - FromProto(gang.submit_time()))
            : "-";
    std::vector<std::string> row = {gang.id(),
                                    gang.spec().queue(),
                                    OrDash(gang.owner()),
                                    GangStateName(gang.state()),
                                    absl::StrCat(gang.spec().priority()),
                                    PodsCell(gang),
                                    GpusCell(gang),
                                    age};
    if (wide) {
      std::vector<std::string> nodes;
      for (const v1::PodPlacement& pod : gang.placement()) {
        if (std::find(nodes.begin(), nodes.end(), pod.node()) == nodes.end()) {
          nodes.push_back(pod.node());
        }
      }
      row.push_back(absl::StrCat(gang.attempts()));
      row.push_back(OrDash(absl::StrJoin(nodes, ",")));
      row.push_back(gang.reason_code() == v1::REASON_CODE_UNSPECIFIED
                        ? "-"
                        : ReasonCodeName(gang.reason_code()));
      row.push_back(StartCell(gang, now));
    }
    row.push_back(gang.reason());
    table.AddRow(row);
  }
  return table.Render();
}

std::string GangTable(const v1::Gang& gang, absl::Time now, bool wide) {
  google::protobuf::RepeatedPtrField<v1::Gang> one;
  *one.Add() = gang;
  return GangsTable(one, now, wide);
}

std::string GangDetails(const v1::Gang& gang, absl::Time now,
                        const v1::PlanningConfig* planning) {
  std::string out = GangFields(gang, now, planning).Render();
  absl::StrAppend(&out, "\nPod sets:\n", Indent(PodSetsTable(gang.spec())));
  if (!gang.placement().empty()) {
    absl::StrAppend(&out, "\nPlacement (", PlacementSummary(gang.placement()),
                    "):\n", Indent(PlacementTable(gang.placement())));
  }
  return out;
}

std::string PlacementTable(
    const google::protobuf::RepeatedPtrField<v1::PodPlacement>& placement) {
  Table table({"POD SET", "INDEX", "NODE", "GPUS"});
  for (const v1::PodPlacement& pod : placement) {
    table.AddRow({pod.pod_set(), absl::StrCat(pod.index()), pod.node(),
                  GpuRanges(pod.gpu_indices())});
  }
  return table.Render();
}

std::string ExplainText(const v1::ExplainGangResponse& response, absl::Time now,
                        const v1::PlanningConfig* planning) {
  const v1::Gang& gang = response.gang();
  Table table = Table::Fields();
  table.AddRow({"ID:", gang.id()});
  table.AddRow({"Queue:", gang.spec().queue()});
  table.AddRow({"State:", GangStateName(gang.state())});
  AddReasonCode(&table, response.reason_code());
  AddIfSet(&table, "Reason", response.reason());
  if (response.position() > 0) {
    table.AddRow({"Position:",
                  absl::StrFormat(
                      "%d of all pending, %d in queue %s", response.position(),
                      response.position_in_queue(), gang.spec().queue())});
  }
  // The plan's estimate when the gang is planned, else its reservation's.
  AddPlanRows(
      &table, gang,
      response.has_estimated_start() ? &response.estimated_start() : nullptr,
      planning, now);
  AddIfSet(&table, "Reserved", response.reserved_domain());
  table.AddRow({"Revision:", absl::StrCat(response.revision())});
  return table.Render();
}

std::string DryRunText(const v1::DryRunGangResponse& response) {
  Table table = Table::Fields();
  table.AddRow({"Fits:", response.fits() ? "yes" : "no"});
  AddReasonCode(&table, response.reason_code());
  AddIfSet(&table, "Reason", response.reason());
  std::string out = table.Render();
  if (!response.placement().empty()) {
    absl::StrAppend(&out, "\nPlacement (",
                    PlacementSummary(response.placement()), "):\n",
                    Indent(PlacementTable(response.placement())));
  }
  return out;
}

// The node's state, with its drain deadline when it has one:
// "DRAINING (deadline in 5m)".
std::string NodeStateText(const v1::Node& node, absl::Time now) {
  std::string state = NodeStateName(node.state());
  if (!node.has_drain_deadline()) return state;
  const absl::Duration left = FromProto(node.drain_deadline()) - now;
  return left > absl::ZeroDuration()
             ? absl::StrCat(state, " (deadline in ", HumanDuration(left), ")")
             : absl::StrCat(state, " (deadline passed)");
}

std::string NodesTable(
    const google::protobuf::RepeatedPtrField<v1::Node>& nodes, absl::Time now,
    bool wide) {
  std::vector<std::string> header = {"NODE",      "ADDRESS",   "MODEL",
                                     "USED/GPUS", "STATE",     "LABELS",
                                     "GANGS",     "HEARTBEAT", "REASON"};
  if (wide) header.insert(header.begin() + 4, {"CPU", "MEMORY"});
  Table table(header);
  for (const v1::Node& node : nodes) {
    const std::string heartbeat =
        node.has_last_heartbeat()
            ? absl::StrCat(
                  HumanDuration(now - FromProto(node.last_heartbeat())), " ago")
            : "-";
    std::vector<std::string> row = {
        node.id(),
        OrDash(node.address() == node.id() ? "" : node.address()),
        node.gpu_model(),
        absl::StrFormat("%d/%d", node.used_gpu_indices_size(),
                        node.gpu_count()),
        NodeStateText(node, now),
        JoinMap(node.labels()),
        OrDash(absl::StrJoin(node.gang_ids(), ",")),
        heartbeat,
        node.state_reason()};
    if (wide) {
      row.insert(row.begin() + 4, {absl::StrCat(node.cpu_millis(), "m"),
                                   absl::StrCat(node.memory_bytes())});
    }
    table.AddRow(row);
  }
  return table.Render();
}

std::string TopologyText(const v1::GetTopologyResponse& response) {
  Table summary = Table::Fields();
  summary.AddRow({"Levels:", OrDash(absl::StrJoin(response.levels(), ", "))});
  summary.AddRow(
      {"Node fragmentation:", Percent(response.node_fragmentation())});
  std::string out = summary.Render();
  absl::StrAppend(&out, "\n", DomainsTable(response));
  if (!response.levels_fragmentation().empty()) {
    absl::StrAppend(&out, "\n", LevelsTable(response));
  }
  return out;
}

std::string QueuesTable(
    const google::protobuf::RepeatedPtrField<v1::Queue>& queues) {
  Table table({"NAME", "PARENT", "WEIGHT", "NOMINAL", "USED", "BORROWED",
               "PENDING", "ACTIVE", "SCORE", "MAX PRIO", "HELD"});
  for (const v1::Queue& queue : queues) {
    const v1::QueueStatus& status = queue.status();
    table.AddRow({queue.name(), OrDash(queue.parent()),
                  FixedDecimal(queue.weight()), JoinMap(queue.nominal_gpus()),
                  JoinMap(status.held_gpus()),
                  absl::StrCat(status.borrowed_gpus()),
                  absl::StrCat(status.pending_gangs()),
                  absl::StrCat(status.active_gangs()),
                  FixedDecimal(status.fair_share_score()),
                  queue.has_max_priority() ? absl::StrCat(queue.max_priority())
                                           : std::string("-"),
                  queue.held() ? "yes" : "no"});
  }
  return table.Render();
}

std::string AuditMethodName(absl::string_view method) {
  absl::string_view rest = method;
  if (!absl::ConsumePrefix(&rest, "/phalanx.v1.")) return std::string(method);
  const size_t slash = rest.find('/');
  if (slash == absl::string_view::npos || slash == 0 ||
      slash + 1 == rest.size() ||
      rest.find('/', slash + 1) != absl::string_view::npos) {
    return std::string(method);
  }
  return std::string(rest.substr(slash + 1));
}

std::string AuditTable(
    const google::protobuf::RepeatedPtrField<v1::AuditRecord>& records) {
  Table table({"TIME", "PRINCIPAL", "METHOD", "TARGET", "OUTCOME", "SUMMARY"});
  for (const v1::AuditRecord& record : records) {
    table.AddRow({record.has_time() ? FormatUtc(FromProto(record.time())) : "-",
                  OrDash(record.principal()), AuditMethodName(record.method()),
                  OrDash(record.target()), OrDash(record.outcome()),
                  record.summary()});
  }
  return table.Render();
}

std::string AuditText(const v1::ListAuditRecordsResponse& response) {
  std::string out =
      response.records().empty() ? "" : AuditTable(response.records());
  if (response.dropped() > 0) {
    absl::StrAppend(&out, "dropped: ", response.dropped(),
                    " (records over the per-principal audit rate)\n");
  }
  return out;
}

std::string WatchHeader() {
  return absl::StrFormat("%-9s %-20s %-10s %-12s %-14s %-10s %s\n", "REVISION",
                         "TIME", "EVENT", "GANG", "QUEUE", "STATE", "DETAIL");
}

std::string WatchLine(const v1::GangEvent& event) {
  const v1::Gang& gang = event.gang();
  const bool has_gang = event.has_gang();
  const std::string line = absl::StrFormat(
      "%-9d %-20s %-10s %-12s %-14s %-10s %s", event.revision(),
      event.has_time() ? FormatUtc(FromProto(event.time())) : "-",
      ShortEnumName(v1::EventType_Name(event.type()), "EVENT_TYPE_"),
      has_gang ? SafeCell(gang.id()) : "-",
      has_gang ? SafeCell(gang.spec().queue()) : "-",
      has_gang ? GangStateName(gang.state()) : "-",
      has_gang ? SafeCell(WatchDetail(gang), kMaxLastCellColumns) : "");
  return absl::StrCat(absl::StripTrailingAsciiWhitespace(line), "\n");
}

}  // namespace phalanx::ctl
