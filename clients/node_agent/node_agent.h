// The node agent's loop: heartbeats for its node, runs the health check and
// reports what HealthTracker makes of it (Fleet.ReportNodeHealth), until
// told to stop. One agent per node, with a token of ROLE_NODE_AGENT.
// RunAgent blocks its thread; `stop` may be set from a signal handler.
#ifndef PHALANX_CLIENTS_NODE_AGENT_NODE_AGENT_H_
#define PHALANX_CLIENTS_NODE_AGENT_NODE_AGENT_H_

#include <atomic>
#include <ostream>
#include <string>

#include "absl/time/time.h"
#include "clients/ctl_options.h"

namespace phalanx::node_agent {

struct AgentOptions {
  ctl::ConnectionOptions connection;
  std::string node_id;
  absl::Duration heartbeat_interval = absl::Seconds(10);
  // "" = no health check: heartbeats only.
  std::string health_command;
  absl::Duration health_interval = absl::Seconds(30);
  absl::Duration health_timeout = absl::Seconds(20);
  // Passing checks in a row before a failed node or GPU is reported
  // healthy again.
  int passes_to_recover = 3;
  // Deadline of each call to the daemon.
  absl::Duration call_timeout = absl::Seconds(10);
};

// Exit codes of RunAgent.
inline constexpr int kAgentStopped = 0;   // `stop` was set
inline constexpr int kAgentBadSetup = 2;  // a file could not be read

// Opens the connection (reading the token and TLS files), then every
// heartbeat_interval sends a heartbeat and every health_interval (with a
// health command) runs the check and reports it, until `stop` is set. A
// failed call is logged and retried at the next turn; the daemon being
// away never ends the agent. Logs each change of what it reports, never a
// token. Returns kAgentStopped, or kAgentBadSetup at once.
int RunAgent(const AgentOptions& options, const std::atomic<bool>& stop,
             std::ostream& log);

}  // namespace phalanx::node_agent

#endif  // PHALANX_CLIENTS_NODE_AGENT_NODE_AGENT_H_
