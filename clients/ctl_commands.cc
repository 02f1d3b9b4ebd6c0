#include "clients/ctl_commands.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "clients/ctl_channel.h"
#include "clients/ctl_declare.h"
#include "clients/ctl_format.h"
#include "clients/ctl_history.h"
#include "clients/ctl_requests.h"
#include "clients/ctl_run.h"
#include "clients/ctl_views.h"
#include "clients/ctl_watch.h"
#include "grpcpp/grpcpp.h"
#include "phalanx/v1/admin.grpc.pb.h"
#include "phalanx/v1/fleet.grpc.pb.h"
#include "phalanx/v1/scheduler.grpc.pb.h"

namespace phalanx::ctl {
namespace {

// Everything one command needs: its parsed line, the connection, the stubs
// and the streams.
class Session {
 public:
  Session(const Invocation& inv, Connection connection, std::ostream& out,
          std::ostream& err)
      : inv_(inv),
        connection_(std::move(connection)),
        out_(out),
        err_(err),
        now_(absl::Now()) {}

  v1::Scheduler::Stub* scheduler() {
    if (scheduler_ == nullptr) {
      scheduler_ = v1::Scheduler::NewStub(connection_.channel());
    }
    return scheduler_.get();
  }
  v1::Fleet::Stub* fleet() {
    if (fleet_ == nullptr) fleet_ = v1::Fleet::NewStub(connection_.channel());
    return fleet_.get();
  }
  v1::Admin::Stub* admin() {
    if (admin_ == nullptr) admin_ = v1::Admin::NewStub(connection_.channel());
    return admin_.get();
  }

  // Adds the call metadata (the token) to a call's context.
  void Prepare(grpc::ClientContext* context) const {
    connection_.Prepare(context);
  }

  // Whether the output is structured (-o json or -o yaml), not a table.
  bool json() const {
    return inv_.global.output == OutputFormat::kJson ||
           inv_.global.output == OutputFormat::kYaml;
  }
  bool wide() const { return inv_.global.output == OutputFormat::kWide; }
  const std::string& arg(size_t i) const { return inv_.args.at(i); }

  // Gives a unary call its metadata and its deadline from --timeout.
  void PrepareUnary(grpc::ClientContext* context) const {
    Prepare(context);
    context->set_deadline(
        absl::ToChronoTime(absl::Now() + inv_.global.timeout));
  }

  // Prints a usage error and returns its exit code.
  int UsageError(const absl::Status& status) const {
    err_ << UsageErrorText(status, inv_.command);
    return kExitUsage;
  }

  // Prints a failed call and returns its exit code.
  int RpcError(const grpc::Status& status) const {
    err_ << RpcErrorLine(status) << "\n";
    return ExitCodeFor(status);
  }

  // Prints `message` as JSON under -o json, else `table`.
  int Print(const google::protobuf::Message& message,
            const std::string& table) const {
    if (!json()) {
      out_ << table;
      return kExitOk;
    }
    return PrintJson(message, /*pretty=*/true);
  }

  // Prints `message` as JSON (indented, or on one line for streams), or as
  // YAML under -o yaml (a stream's messages as "---" documents).
  int PrintJson(const google::protobuf::Message& message, bool pretty) const {
    const bool yaml = inv_.global.output == OutputFormat::kYaml;
    absl::StatusOr<std::string> text =
        yaml ? ToYaml(message) : ToJson(message, pretty);
    if (yaml && !pretty && text.ok()) *text = absl::StrCat("---\n", *text);
    if (!text.ok()) {
      err_ << "phalanxctl: " << SafeText(text.status().message()) << "\n";
      return kExitRpcError;
    }
    out_ << *text << std::flush;
    return kExitOk;
  }

  // The text of the file `path` of -f ("-" = stdin); "" without a path.
  static absl::StatusOr<std::string> ReadInput(
      const std::optional<std::string>& path) {
    if (!path.has_value()) return std::string();
    return ReadInput(*path);
  }
  static absl::StatusOr<std::string> ReadInput(const std::string& path) {
    if (path == "-") {
      return std::string(std::istreambuf_iterator<char>(std::cin), {});
    }
    std::ifstream file(path);
    std::stringstream text;
    if (file.is_open()) text << file.rdbuf();
    if (!file.is_open() || file.bad()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
    }
    return text.str();
  }

  const Invocation& inv() const { return inv_; }
  const CommandOptions& options() const { return inv_.options; }
  const Connection& connection() const { return connection_; }
  std::ostream& out() const { return out_; }
  std::ostream& err() const { return err_; }
  // When the command started; ages are relative to it.
  absl::Time now() const { return now_; }

 private:
  const Invocation& inv_;
  const Connection connection_;
  std::ostream& out_;
  std::ostream& err_;
  const absl::Time now_;
  std::unique_ptr<v1::Scheduler::Stub> scheduler_;
  std::unique_ptr<v1::Fleet::Stub> fleet_;
  std::unique_ptr<v1::Admin::Stub> admin_;
};

// Makes one unary call with the session's deadline (per attempt), following
// an HA follower's leader hint or moving to the next --server endpoint
// (CallFollowingLeader).
template <typename Stub, typename Request, typename Response>
grpc::Status Call(const Session& s, Stub* /*stub*/,
                  grpc::Status (Stub::*method)(grpc::ClientContext*,
                                               const Request&, Response*),
                  const Request& request, Response* response) {
  return CallFollowingLeader<Stub>(
      s.connection(),
      [&s](grpc::ClientContext* context) { s.PrepareUnary(context); }, method,
      request, response);
}

// The spec of submit/dryrun, from -f or from flags.
absl::StatusOr<v1::GangSpec> SpecInput(const Session& s) {
  const SpecOptions& spec = s.options().spec;
  absl::StatusOr<std::string> text = Session::ReadInput(spec.file);
  if (!text.ok()) return text.status();
  return BuildSpec(spec, *text);
}

int Submit(Session& s) {
  v1::SubmitGangRequest request;
  absl::StatusOr<v1::GangSpec> spec = SpecInput(s);
  if (!spec.ok()) return s.UsageError(spec.status());
  *request.mutable_spec() = *std::move(spec);
  v1::SubmitGangResponse response;
  grpc::Status status = Call(s, s.scheduler(), &v1::Scheduler::Stub::SubmitGang,
                             request, &response);
  if (!status.ok()) return s.RpcError(status);
  if (!response.created()) {
    s.err() << "phalanxctl: request_id matches an earlier submit; "
               "showing that gang\n";
  }
  return s.Print(response, GangTable(response.gang(), s.now(), s.wide()));
}

// The plan's settings, read only when the words for `gang`'s place in the
// plan name them (its depth or window) and a table is printed; nullopt
// when not needed or not readable (the words then leave the figures out).
std::optional<v1::PlanningConfig> PlanningFor(Session& s,
                                              const v1::Gang& gang) {
  const v1::PlanStatus status = gang.plan_status();
  if (s.json() || (status != v1::PLAN_STATUS_BEYOND_DEPTH &&
                   status != v1::PLAN_STATUS_BEYOND_WINDOW &&
                   status != v1::PLAN_STATUS_NEVER_FITS)) {
    return std::nullopt;
  }
  v1::Config config;
  grpc::Status read = Call(s, s.admin(), &v1::Admin::Stub::GetConfig,
                           v1::GetConfigRequest(), &config);
  if (!read.ok()) return std::nullopt;
  return config.planning();
}

int Get(Session& s) {
  v1::GetGangRequest request;
  request.set_gang_id(s.arg(0));
  v1::GetGangResponse response;
  grpc::Status status =
      Call(s, s.scheduler(), &v1::Scheduler::Stub::GetGang, request, &response);
  if (!status.ok()) return s.RpcError(status);
  const std::optional<v1::PlanningConfig> planning =
      PlanningFor(s, response.gang());
  return s.Print(response,
                 GangDetails(response.gang(), s.now(),
                             planning.has_value() ? &*planning : nullptr));
}

// Appends pages to `all` until the last page or the limit. `all` keeps the
// first page's revision: watching from there misses nothing.
grpc::Status FetchGangs(Session& s, const ListQuery& query,
                        v1::ListGangsResponse* all) {
  v1::ListGangsRequest request = query.request;
  for (bool first = true;; first = false) {
    v1::ListGangsResponse page;
    grpc::Status status =
        Call(s, s.scheduler(), &v1::Scheduler::Stub::ListGangs, request, &page);
    if (!status.ok()) return status;
    if (first) all->set_revision(page.revision());
    for (v1::Gang& gang : *page.mutable_gangs()) {
      if (query.limit > 0 && all->gangs_size() >= query.limit) break;
      if (query.Matches(gang)) *all->add_gangs() = std::move(gang);
    }
    all->set_next_page_token(page.next_page_token());
    if (page.next_page_token().empty() || page.gangs().empty() ||
        NextPageSize(query.limit, all->gangs_size()) == 0) {
      return grpc::Status::OK;
    }
    request.set_page_token(page.next_page_token());
    request.set_page_size(NextPageSize(query.limit, all->gangs_size()));
  }
}

int List(Session& s) {
  const ListQuery query = BuildListQuery(s.options().list);
  v1::ListGangsResponse all;
  grpc::Status status = FetchGangs(s, query, &all);
  if (!status.ok()) return s.RpcError(status);
  if (!s.json() && all.gangs().empty()) s.err() << "No gangs found.\n";
  if (!s.json() && !all.next_page_token().empty()) {
    s.err() << "(more gangs than --limit " << query.limit << ")\n";
  }
  if (!s.json() && all.gangs().empty()) return kExitOk;
  std::string table = GangsTable(all.gangs(), s.now(), s.wide());
  if (s.options().list.no_headers) table.erase(0, table.find('\n') + 1);
  return s.Print(all, table);
}

// Cancels each of `ids` in turn (an error does not stop the others, but an
// unreachable daemon does) and prints them: as before for `one` ID, else a
// table, or one JSON object per line as watch prints events. Returns the
// first failure's exit code.
int CancelEach(Session& s, const std::vector<std::string>& ids, bool one) {
  v1::ListGangsResponse cancelled;
  int code = kExitOk;
  for (const std::string& id : ids) {
    v1::CancelGangRequest request;
    request.set_gang_id(id);
    request.set_reason(s.options().cancel.reason);
    v1::CancelGangResponse response;
    grpc::Status status = Call(
        s, s.scheduler(), &v1::Scheduler::Stub::CancelGang, request, &response);
    if (!status.ok()) {
      const int failed = s.RpcError(status);
      if (code == kExitOk) code = failed;
      if (failed == kExitUnavailable) break;
      continue;
    }
    if (one) {
      return s.Print(response, GangTable(response.gang(), s.now(), s.wide()));
    }
    if (s.json()) s.PrintJson(response, /*pretty=*/false);
    *cancelled.add_gangs() = response.gang();
  }
  if (!s.json() && !cancelled.gangs().empty()) {
    s.out() << GangsTable(cancelled.gangs(), s.now(), s.wide());
  }
  return code;
}

// cancel ID..., or cancel -l SELECTOR: every unfinished gang that matches.
int Cancel(Session& s) {
  const LabelSelector& labels = s.options().cancel.labels;
  if (s.inv().args.empty() == labels.empty()) {
    return s.UsageError(absl::InvalidArgumentError(
        s.inv().args.empty() ? "give gang IDs or -l SELECTOR"
                             : "give gang IDs or -l SELECTOR, not both"));
  }
  if (labels.empty()) {
    return CancelEach(s, s.inv().args, s.inv().args.size() == 1);
  }
  v1::ListGangsResponse matching;
  grpc::Status status = FetchGangs(s, BuildCancelQuery(labels), &matching);
  if (!status.ok()) return s.RpcError(status);
  if (matching.gangs().empty()) {
    s.err() << "No unfinished gangs match.\n";
    return kExitOk;
  }
  std::vector<std::string> ids;
  for (const v1::Gang& gang : matching.gangs()) ids.push_back(gang.id());
  return CancelEach(s, ids, /*one=*/false);
}

// Prints one event: a JSON line, or a table line (bookmarks left out).
void PrintEvent(Session& s, const v1::GangEvent& event) {
  if (s.json()) {
    s.PrintJson(event, /*pretty=*/false);
  } else if (event.type() != v1::EVENT_TYPE_BOOKMARK) {
    s.out() << WatchLine(event) << std::flush;
  }
}

int Watch(Session& s) {
  const v1::WatchGangsRequest request = BuildWatchRequest(s.options().watch);
  if (request.has_after_revision()) {
    // A revision the daemon has not reached would wait silently for events
    // that may never come: refuse it, as etcd does.
    v1::ListGangsRequest probe;
    probe.set_page_size(1);
    v1::ListGangsResponse current;
    grpc::Status status = Call(
        s, s.scheduler(), &v1::Scheduler::Stub::ListGangs, probe, &current);
    if (!status.ok()) return s.RpcError(status);
    if (request.after_revision() > current.revision()) {
      return s.UsageError(absl::InvalidArgumentError(absl::StrFormat(
          "--after-revision %d: required revision is a future revision "
          "(current revision %d)",
          request.after_revision(), current.revision())));
    }
  }
  if (!s.json()) s.out() << WatchHeader() << std::flush;
  bool batches = true;  // WatchGangBatches, unless the daemon predates it
  // No deadline: runs until Ctrl-C or the end.
  grpc::Status status = ReadWatchStream(
      *s.scheduler(), request,
      [&s](grpc::ClientContext* context) {
        if (context != nullptr) s.Prepare(context);
        return true;
      },
      [&s](const v1::GangEvent& event) { PrintEvent(s, event); }, batches);
  if (!status.ok()) return s.RpcError(status);
  return kExitOk;
}

int Report(Session& s) {
  absl::StatusOr<v1::ReportGangRequest> request =
      BuildReportRequest(s.arg(0), s.options().report, s.now());
  if (!request.ok()) return s.UsageError(request.status());
  v1::ReportGangResponse response;
  grpc::Status status = Call(s, s.scheduler(), &v1::Scheduler::Stub::ReportGang,
                             *request, &response);
  if (!status.ok()) return s.RpcError(status);
  return s.Print(response, GangTable(response.gang(), s.now(), s.wide()));
}

int Explain(Session& s) {
  v1::ExplainGangRequest request;
  request.set_gang_id(s.arg(0));
  v1::ExplainGangResponse response;
  grpc::Status status = Call(
      s, s.scheduler(), &v1::Scheduler::Stub::ExplainGang, request, &response);
  if (!status.ok()) return s.RpcError(status);
  const std::optional<v1::PlanningConfig> planning =
      PlanningFor(s, response.gang());
  return s.Print(response,
                 ExplainText(response, s.now(),
                             planning.has_value() ? &*planning : nullptr));
}

int DryRun(Session& s) {
  v1::DryRunGangRequest request;
  absl::StatusOr<v1::GangSpec> spec = SpecInput(s);
  if (!spec.ok()) return s.UsageError(spec.status());
  *request.mutable_spec() = *std::move(spec);
  v1::DryRunGangResponse response;
  grpc::Status status = Call(s, s.scheduler(), &v1::Scheduler::Stub::DryRunGang,
                             request, &response);
  if (!status.ok()) return s.RpcError(status);
  return s.Print(response, DryRunText(response));
}

int NodesList(Session& s) {
  const v1::ListNodesRequest request =
      BuildListNodesRequest(s.options().nodes_list);
  v1::ListNodesResponse response;
  grpc::Status status =
      Call(s, s.fleet(), &v1::Fleet::Stub::ListNodes, request, &response);
  if (!status.ok()) return s.RpcError(status);
  if (!s.json() && response.nodes().empty()) {
    s.err() << "No nodes found.\n";
    return kExitOk;
  }
  return s.Print(response, NodesTable(response.nodes(), s.now(), s.wide()));
}

int NodesUpsert(Session& s) {
  const std::string& path = s.options().file.file;
  absl::StatusOr<std::string> text = Session::ReadInput(path);
  if (!text.ok()) return s.UsageError(text.status());
  absl::StatusOr<v1::UpsertNodesRequest> request =
      ParseJson<v1::UpsertNodesRequest>(*text, path);
  if (!request.ok()) return s.UsageError(request.status());
  v1::UpsertNodesResponse response;
  grpc::Status status =
      Call(s, s.fleet(), &v1::Fleet::Stub::UpsertNodes, *request, &response);
  if (!status.ok()) return s.RpcError(status);
  return s.Print(response, NodesTable(response.nodes(), s.now(), s.wide()));
}

// cordon, drain, uncordon and unhealthy: the verb is the command's last word.
int NodesSetState(Session& s) {
  absl::string_view verb = s.inv().command->path;
  verb.remove_prefix(verb.rfind(' ') + 1);
  absl::StatusOr<v1::SetNodeStateRequest> request =
      BuildSetNodeStateRequest(verb, s.arg(0), s.options().node_state, s.now());
  if (!request.ok()) return s.UsageError(request.status());
  v1::SetNodeStateResponse response;
  grpc::Status status =
      Call(s, s.fleet(), &v1::Fleet::Stub::SetNodeState, *request, &response);
  if (!status.ok()) return s.RpcError(status);
  v1::ListNodesResponse one;
  *one.add_nodes() = response.node();
  return s.Print(response, NodesTable(one.nodes(), s.now(), s.wide()));
}

int NodesRemove(Session& s) {
  v1::RemoveNodeRequest request;
  request.set_node_id(s.arg(0));
  v1::RemoveNodeResponse response;
  grpc::Status status =
      Call(s, s.fleet(), &v1::Fleet::Stub::RemoveNode, request, &response);
  if (!status.ok()) return s.RpcError(status);
  return s.Print(response,
                 absl::StrCat("node ", SafeText(s.arg(0)), " removed\n"));
}

int Topology(Session& s) {
  v1::GetTopologyResponse response;
  grpc::Status status = Call(s, s.fleet(), &v1::Fleet::Stub::GetTopology,
                             v1::GetTopologyRequest(), &response);
  if (!status.ok()) return s.RpcError(status);
  return s.Print(response, TopologyText(response));
}

int QueuesList(Session& s) {
  v1::ListQueuesResponse response;
  grpc::Status status = Call(s, s.admin(), &v1::Admin::Stub::ListQueues,
                             v1::ListQueuesRequest(), &response);
  if (!status.ok()) return s.RpcError(status);
  if (!s.json() && response.queues().empty()) {
    s.err() << "No queues found.\n";
    return kExitOk;
  }
  return s.Print(response, QueuesTable(response.queues()));
}

int QueuesPut(Session& s) {
  const QueuePutOptions& put = s.options().queue_put;
  absl::StatusOr<std::string> text = Session::ReadInput(put.file);
  if (!text.ok()) return s.UsageError(text.status());
  absl::StatusOr<v1::Queue> queue = BuildQueue(put, *text);
  if (!queue.ok()) return s.UsageError(queue.status());
  v1::PutQueueRequest request;
  *request.mutable_queue() = *std::move(queue);
  v1::ListQueuesResponse one;
  grpc::Status status =
      Call(s, s.admin(), &v1::Admin::Stub::PutQueue, request, one.add_queues());
  if (!status.ok()) return s.RpcError(status);
  return s.Print(one.queues(0), QueuesTable(one.queues()));
}

int QueuesSet(Session& s) {
  absl::StatusOr<v1::PutQueueRequest> request =
      BuildQueueUpdate(s.arg(0), s.options().queue_set);
  if (!request.ok()) return s.UsageError(request.status());
  v1::ListQueuesResponse one;
  grpc::Status status = Call(s, s.admin(), &v1::Admin::Stub::PutQueue, *request,
                             one.add_queues());
  if (!status.ok()) return s.RpcError(status);
  return s.Print(one.queues(0), QueuesTable(one.queues()));
}

int QueuesDelete(Session& s) {
  v1::DeleteQueueRequest request;
  request.set_name(s.arg(0));
  v1::DeleteQueueResponse response;
  grpc::Status status =
      Call(s, s.admin(), &v1::Admin::Stub::DeleteQueue, request, &response);
  if (!status.ok()) return s.RpcError(status);
  return s.Print(response,
                 absl::StrCat("queue ", SafeText(s.arg(0)), " deleted\n"));
}

// The configuration is nested; it prints as JSON in both output formats.
int ConfigGet(Session& s) {
  v1::Config config;
  grpc::Status status = Call(s, s.admin(), &v1::Admin::Stub::GetConfig,
                             v1::GetConfigRequest(), &config);
  if (!status.ok()) return s.RpcError(status);
  return s.PrintJson(config, /*pretty=*/true);
}

int ConfigSet(Session& s) {
  const ConfigSetOptions& set = s.options().config_set;
  absl::StatusOr<std::string> text = Session::ReadInput(set.file);
  if (!text.ok()) return s.UsageError(text.status());
  absl::StatusOr<v1::UpdateConfigRequest> request =
      BuildUpdateConfigRequest(set, *text);
  if (!request.ok()) return s.UsageError(request.status());
  v1::Config config;
  grpc::Status status =
      Call(s, s.admin(), &v1::Admin::Stub::UpdateConfig, *request, &config);
  if (!status.ok()) return s.RpcError(status);
  return s.Print(config, absl::StrCat("config updated to version ",
                                      config.version(), "\n"));
}

// The files of apply's and diff's -f: FILE itself ("-" = stdin), or the
// *.json files of DIR in name order.
absl::StatusOr<std::vector<std::string>> DeclaredPaths(
    const std::string& path) {
  std::error_code error;
  if (path == "-" || !std::filesystem::is_directory(path, error)) {
    return std::vector<std::string>{path};
  }
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json") {
      paths.push_back(entry.path().string());
    }
  }
  if (error) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", path, ": ", error.message()));
  }
  if (paths.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no *.json file"));
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

absl::StatusOr<Declared> ReadDeclared(const std::string& path) {
  absl::StatusOr<std::vector<std::string>> paths = DeclaredPaths(path);
  if (!paths.ok()) return paths.status();
  Declared declared;
  for (const std::string& file : *paths) {
    absl::StatusOr<std::string> text = Session::ReadInput(file);
    if (!text.ok()) return text.status();
    absl::Status added = AddDeclaredFile(*text, file, declared);
    if (!added.ok()) return added;
  }
  return declared;
}

// The config (for its version), and the queues and nodes when `declared`
// names any.
grpc::Status ReadInForce(Session& s, const Declared& declared,
                         v1::Config* config, v1::ListQueuesResponse* queues,
                         v1::ListNodesResponse* nodes) {
  grpc::Status status = Call(s, s.admin(), &v1::Admin::Stub::GetConfig,
                             v1::GetConfigRequest(), config);
  if (status.ok() && !declared.queues.empty()) {
    status = Call(s, s.admin(), &v1::Admin::Stub::ListQueues,
                  v1::ListQueuesRequest(), queues);
  }
  if (status.ok() && !declared.nodes.empty()) {
    status = Call(s, s.fleet(), &v1::Fleet::Stub::ListNodes,
                  v1::ListNodesRequest(), nodes);
  }
  return status;
}

// Sends the plan's requests in its order; stops at the first refusal.
grpc::Status SendPlan(Session& s, const Plan& plan) {
  auto send_config = [&]() {
    if (!plan.config.has_value()) return grpc::Status::OK;
    v1::Config updated;
    return Call(s, s.admin(), &v1::Admin::Stub::UpdateConfig, *plan.config,
                &updated);
  };
  auto send_nodes = [&]() {
    if (!plan.nodes.has_value()) return grpc::Status::OK;
    v1::UpsertNodesResponse response;
    return Call(s, s.fleet(), &v1::Fleet::Stub::UpsertNodes, *plan.nodes,
                &response);
  };
  grpc::Status status = plan.nodes_first ? send_nodes() : send_config();
  if (!status.ok()) return status;
  status = plan.nodes_first ? send_config() : send_nodes();
  if (!status.ok()) return status;
  for (const v1::PutQueueRequest& request : plan.queues) {
    v1::Queue queue;
    status = Call(s, s.admin(), &v1::Admin::Stub::PutQueue, request, &queue);
    if (!status.ok()) return status;
  }
  return grpc::Status::OK;
}

// diff (`apply` false) and apply: prints what differs, and applies it.
int Declare(Session& s, bool apply) {
  const DeclareOptions& options = s.options().declare;
  absl::StatusOr<Declared> declared = ReadDeclared(options.file);
  if (!declared.ok()) return s.UsageError(declared.status());
  v1::Config config;
  v1::ListQueuesResponse queues;
  v1::ListNodesResponse nodes;
  grpc::Status status = ReadInForce(s, *declared, &config, &queues, &nodes);
  if (!status.ok()) return s.RpcError(status);
  if (options.expected_version.has_value() &&
      *options.expected_version != config.version()) {
    return s.RpcError(grpc::Status(
        grpc::StatusCode::ABORTED,
        absl::StrCat("the config in force has version ", config.version(),
                     ", not ", *options.expected_version,
                     " (--expected-version); nothing changed: diff again")));
  }
  const Plan plan = PlanChanges(*declared, config, queues, nodes);
  s.out() << PlanText(plan);
  if (!apply || plan.changes.empty()) return kExitOk;
  status = SendPlan(s, plan);
  if (!status.ok()) return s.RpcError(status);
  s.out() << "applied: " << plan.changes.size() << " changed\n";
  return kExitOk;
}

int Diff(Session& s) { return Declare(s, /*apply=*/false); }

int Apply(Session& s) { return Declare(s, /*apply=*/true); }

// Appends audit pages to `all` while --all asks for more and the server
// makes progress. Sets `*stop` to why it stopped.
grpc::Status FetchAudit(Session& s, const AuditQuery& query,
                        v1::ListAuditRecordsResponse* all,
                        PageFollower::Next* stop) {
  v1::ListAuditRecordsRequest request = query.request;
  PageFollower follower;
  for (;;) {
    v1::ListAuditRecordsResponse page;
    grpc::Status status =
        Call(s, s.admin(), &v1::Admin::Stub::ListAuditRecords, request, &page);
    if (!status.ok()) return status;
    for (v1::AuditRecord& record : *page.mutable_records()) {
      *all->add_records() = std::move(record);
    }
    all->set_dropped(std::max(all->dropped(), page.dropped()));
    all->set_next_page_token(page.next_page_token());
    *stop = follower.After(page.next_page_token(), page.records().empty());
    if (!query.all || *stop != PageFollower::Next::kFetch) {
      return grpc::Status::OK;
    }
    request.set_page_token(page.next_page_token());
  }
}

int Audit(Session& s) {
  const AuditQuery query = BuildAuditQuery(s.options().audit);
  v1::ListAuditRecordsResponse all;
  PageFollower::Next stop = PageFollower::Next::kDone;
  grpc::Status status = FetchAudit(s, query, &all, &stop);
  if (!status.ok()) return s.RpcError(status);
  if (!s.json() && all.records().empty()) s.err() << "No audit records.\n";
  const int code = s.Print(all, AuditText(all));
  if (!query.all && !all.next_page_token().empty()) {
    s.err() << "(more records: --all, or --page-token "
            << SafeText(all.next_page_token()) << ")\n";
  } else if (query.all && stop == PageFollower::Next::kPageLimit) {
    s.err() << "phalanxctl: stopped after " << kMaxAuditPages
            << " pages; more records remain (--page-token "
            << SafeText(all.next_page_token()) << ")\n";
  } else if (query.all && stop == PageFollower::Next::kNoProgress) {
    s.err() << "phalanxctl: the server repeated a page token or sent an "
               "empty page with one; stopped\n";
    return kExitRpcError;
  }
  return code;
}

// Writes one page of history: CSV rows, or one JSON object per line.
int WriteHistoryPage(Session& s, const v1::ExportHistoryResponse& page,
                     bool labels) {
  for (const v1::HistoryRecord& record : page.records()) {
    if (!s.json()) {
      s.out() << HistoryCsvRow(record, labels);
      continue;
    }
    absl::StatusOr<std::string> line = ToJson(record, /*pretty=*/false);
    if (!line.ok()) {
      s.err() << "phalanxctl: " << SafeText(line.status().message()) << "\n";
      return kExitRpcError;
    }
    s.out() << *line;
  }
  s.out() << std::flush;
  return kExitOk;
}

// Pages through Admin.ExportHistory to the end, writing each page as it
// comes (the CSV header first).
int HistoryExport(Session& s) {
  const HistoryOptions& options = s.options().history;
  v1::ExportHistoryRequest request = BuildHistoryRequest(options, s.now());
  if (!s.json()) s.out() << HistoryCsvHeader(options.include_labels);
  PageFollower follower(kMaxHistoryPages);
  for (;;) {
    v1::ExportHistoryResponse page;
    grpc::Status status =
        Call(s, s.admin(), &v1::Admin::Stub::ExportHistory, request, &page);
    if (!status.ok()) return s.RpcError(status);
    if (int code = WriteHistoryPage(s, page, options.include_labels);
        code != kExitOk) {
      return code;
    }
    switch (follower.After(page.next_page_token(), page.records().empty())) {
      case PageFollower::Next::kDone:
        return kExitOk;
      case PageFollower::Next::kFetch:
        request.set_page_token(page.next_page_token());
        continue;
      case PageFollower::Next::kPageLimit:
        s.err() << "phalanxctl: stopped after " << kMaxHistoryPages
                << " pages; more records remain\n";
        return kExitRpcError;
      case PageFollower::Next::kNoProgress:
        s.err() << "phalanxctl: the server repeated a page token or sent an "
                   "empty page with one; stopped\n";
        return kExitRpcError;
    }
  }
}

int Backup(Session& s) {
  v1::CreateBackupRequest request;
  request.set_directory(s.arg(0));
  v1::CreateBackupResponse response;
  grpc::Status status =
      Call(s, s.admin(), &v1::Admin::Stub::CreateBackup, request, &response);
  if (!status.ok()) return s.RpcError(status);
  return s.Print(response,
                 absl::StrCat("backup of revision ", response.revision(),
                              " written to ", SafeText(response.directory()),
                              " on the daemon's machine\n"));
}

int Run(Session& s) {
  return RunGang(s.inv(), s.connection(), s.out(), s.err());
}

using Handler = int (*)(Session&);

const std::map<std::string, Handler, std::less<>>& Handlers() {
  static const auto* handlers = new std::map<std::string, Handler, std::less<>>{
      {"submit", &Submit},
      {"run", &Run},
      {"get", &Get},
      {"list", &List},
      {"cancel", &Cancel},
      {"watch", &Watch},
      {"report", &Report},
      {"explain", &Explain},
      {"dryrun", &DryRun},
      {"nodes list", &NodesList},
      {"nodes upsert", &NodesUpsert},
      {"nodes cordon", &NodesSetState},
      {"nodes drain", &NodesSetState},
      {"nodes uncordon", &NodesSetState},
      {"nodes unhealthy", &NodesSetState},
      {"nodes remove", &NodesRemove},
      {"topology", &Topology},
      {"queues list", &QueuesList},
      {"queues put", &QueuesPut},
      {"queues set", &QueuesSet},
      {"queues delete", &QueuesDelete},
      {"config get", &ConfigGet},
      {"config set", &ConfigSet},
      {"diff", &Diff},
      {"apply", &Apply},
      {"audit", &Audit},
      {"history export", &HistoryExport},
      {"backup", &Backup},
  };
  return *handlers;
}

}  // namespace

int RunCommand(const Invocation& invocation, std::ostream& out,
               std::ostream& err) {
  auto it = Handlers().find(invocation.command->path);
  if (it == Handlers().end()) {
    err << "phalanxctl: command \"" << invocation.command->path
        << "\" is not implemented\n";
    return kExitUsage;
  }
  absl::StatusOr<Connection> connection =
      Connection::Open(invocation.global.connection);
  if (!connection.ok()) {
    err << UsageErrorText(connection.status(), invocation.command);
    return kExitUsage;
  }
  Session session(invocation, *std::move(connection), out, err);
  return it->second(session);
}

bool HasHandler(absl::string_view path) {
  return Handlers().find(path) != Handlers().end();
}

}  // namespace phalanx::ctl
