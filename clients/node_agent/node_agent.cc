#include "clients/node_agent/node_agent.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "clients/ctl_channel.h"
#include "clients/node_agent/health_check.h"
#include "clients/node_agent/health_tracker.h"

namespace phalanx::node_agent {
namespace {

std::string Describe(const HealthReport& report) {
  return absl::StrCat(
      report.healthy ? "healthy" : "UNHEALTHY", ", unhealthy GPUs [",
      absl::StrJoin(report.unhealthy_gpus, ","), "] (", report.reason, ")");
}

// Makes one unary Fleet call with the connection's metadata and deadline.
template <typename Request, typename Response>
grpc::Status Call(const ctl::Connection& connection, absl::Duration timeout,
                  grpc::Status (v1::Fleet::Stub::*method)(grpc::ClientContext*,
                                                          const Request&,
                                                          Response*),
                  const Request& request) {
  Response response;
  return ctl::CallFollowingLeader<v1::Fleet::Stub>(
      connection,
      [&](grpc::ClientContext* context) {
        connection.Prepare(context);
        context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
      },
      method, request, &response);
}

// The agent's state between turns.
class Agent {
 public:
  Agent(const AgentOptions& options, ctl::Connection connection,
        std::ostream& log)
      : options_(options),
        connection_(std::move(connection)),
        log_(log),
        tracker_(options.passes_to_recover) {}

  void Heartbeat() {
    v1::HeartbeatRequest request;
    request.add_node_ids(options_.node_id);
    Logged("heartbeat", Call(connection_, options_.call_timeout,
                             &v1::Fleet::Stub::Heartbeat, request));
  }

  void CheckHealth(const std::atomic<bool>& stop) {
    const CheckResult result = RunHealthCommand(options_.health_command,
                                                options_.health_timeout, stop);
    if (stop.load()) return;
    const HealthReport report = tracker_.Observe(result);
    if (report != last_) {
      log_ << "node " << options_.node_id << ": reporting " << Describe(report)
           << std::endl;
      last_ = report;
    }
    v1::ReportNodeHealthRequest request;
    request.set_node_id(options_.node_id);
    request.set_healthy(report.healthy);
    for (int gpu : report.unhealthy_gpus) request.add_unhealthy_gpus(gpu);
    request.set_reason(report.reason);
    Logged("health report", Call(connection_, options_.call_timeout,
                                 &v1::Fleet::Stub::ReportNodeHealth, request));
  }

 private:
  // Logs a failed call once, and its recovery.
  void Logged(const char* what, const grpc::Status& status) {
    if (status.ok()) {
      if (failing_) log_ << what << ": the daemon answers again" << std::endl;
      failing_ = false;
      return;
    }
    if (!failing_) {
      log_ << what << " failed: " << status.error_code() << " "
           << status.error_message() << " (retrying each turn)" << std::endl;
    }
    failing_ = true;
  }

  const AgentOptions& options_;
  const ctl::Connection connection_;
  std::ostream& log_;
  HealthTracker tracker_;
  std::optional<HealthReport> last_;
  bool failing_ = false;
};

// Sleeps until `when` or until `stop` is set, waking every 100 ms.
void SleepUntil(absl::Time when, const std::atomic<bool>& stop) {
  while (!stop.load()) {
    const absl::Duration left = when - absl::Now();
    if (left <= absl::ZeroDuration()) return;
    absl::SleepFor(std::min(left, absl::Milliseconds(100)));
  }
}

}  // namespace

int RunAgent(const AgentOptions& options, const std::atomic<bool>& stop,
             std::ostream& log) {
  absl::StatusOr<ctl::Connection> connection =
      ctl::Connection::Open(options.connection);
  if (!connection.ok()) {
    log << "phalanx-node-agent: " << connection.status().message() << std::endl;
    return kAgentBadSetup;
  }
  log << "node " << options.node_id << ": heartbeats every "
      << absl::FormatDuration(options.heartbeat_interval) << "; "
      << (options.health_command.empty()
              ? std::string("no health check")
              : absl::StrCat("health check every ",
                             absl::FormatDuration(options.health_interval)))
      << std::endl;
  Agent agent(options, *std::move(connection), log);
  absl::Time next_heartbeat = absl::Now();
  absl::Time next_check =
      options.health_command.empty() ? absl::InfiniteFuture() : absl::Now();
  while (!stop.load()) {
    const absl::Time now = absl::Now();
    if (now >= next_check) {
      agent.CheckHealth(stop);
      next_check = absl::Now() + options.health_interval;
    }
    if (!stop.load() && absl::Now() >= next_heartbeat) {
      agent.Heartbeat();
      next_heartbeat = absl::Now() + options.heartbeat_interval;
    }
    SleepUntil(std::min(next_heartbeat, next_check), stop);
  }
  log << "node " << options.node_id << ": stopped" << std::endl;
  return kAgentStopped;
}

}  // namespace phalanx::node_agent
