#include "clients/node_agent/agent_flags.h"

#include <algorithm>
#include <climits>
#include <optional>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "clients/ctl_args.h"
#include "clients/ctl_flag_checks.h"
#include "clients/node_agent/health_check.h"

namespace phalanx::node_agent {
namespace {

// Raw flag values, converted after parsing.
struct RawFlags {
  std::string heartbeat_interval = "10s";
  std::string health_interval = "30s";
  std::string health_timeout = "20s";
  std::string call_timeout = "10s";
  std::string health_command;
  CLI::Option* health_command_option = nullptr;
};

void Bind(CLI::App& app, AgentOptions& o, RawFlags& raw) {
  ctl::ConnectionOptions& c = o.connection;
  app.add_option("--server", c.server,
                 "daemon address, or several HA replicas a:1,b:2 (default "
                 "127.0.0.1:50051)");
  app.add_option("--node-id", o.node_id,
                 "the node this agent speaks for (default: the host name)");
  app.add_option("--token-file", c.token_file,
                 "file holding the NODE_AGENT bearer token");
  app.add_option("--tls-ca", c.tls_ca_file,
                 "PEM roots that verify the daemon (TLS on)");
  app.add_option("--tls-cert", c.tls_cert_file, "client certificate (PEM)");
  app.add_option("--tls-key", c.tls_key_file, "its private key (PEM)");
  app.add_option("--tls-server-name", c.tls_server_name,
                 "name checked in the daemon's certificate");
  app.add_flag("--insecure", c.insecure,
               "allow sending the token in plain text off loopback");
  app.add_option("--heartbeat-interval", raw.heartbeat_interval,
                 "time between heartbeats (default 10s)");
  raw.health_command_option =
      app.add_option("--health-command", raw.health_command,
                     "shell command that checks the node (default: nvidia-smi "
                     "where present; \"none\" = heartbeats only)");
  app.add_option("--health-interval", raw.health_interval,
                 "time between health checks (default 30s)");
  app.add_option("--health-timeout", raw.health_timeout,
                 "a check running longer fails (default 20s)");
  app.add_option("--passes-to-recover", o.passes_to_recover,
                 "passing checks in a row before a node or GPU is reported "
                 "healthy again (default 3)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--call-timeout", raw.call_timeout,
                 "deadline of each call to the daemon (default 10s)");
}

absl::StatusOr<absl::Duration> Duration(const std::string& text,
                                        absl::string_view flag) {
  absl::StatusOr<absl::Duration> parsed = ctl::ParseDuration(text);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", parsed.status().message()));
  }
  return parsed;
}

absl::Status CheckConnection(const ctl::ConnectionOptions& c) {
  if (c.tls_cert_file.empty() != c.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (c.tls_ca_file.empty() &&
      (!c.tls_cert_file.empty() || !c.tls_server_name.empty())) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-server-name need --tls-ca");
  }
  if (!c.token_file.empty() && c.tls_ca_file.empty() && !c.insecure &&
      !ctl::IsLoopbackTarget(c.server)) {
    return absl::InvalidArgumentError(
        "--server is not loopback: the token would cross the network in "
        "plain text; give --tls-ca FILE, or --insecure to send it anyway");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AgentCommandLine> ParseAgentFlags(
    const std::vector<std::string>& args, const AgentDefaults& defaults) {
  AgentCommandLine line;
  RawFlags raw;
  CLI::App app{"phalanx-node-agent: heartbeats and GPU health for one node",
               "phalanx-node-agent"};
  Bind(app, line.options, raw);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    line.help = app.help();
    return line;
  } catch (const CLI::ParseError& error) {
    return absl::InvalidArgumentError(error.what());
  }
  AgentOptions& o = line.options;
  if (o.node_id.empty()) o.node_id = defaults.hostname;
  if (o.node_id.empty()) {
    return absl::InvalidArgumentError(
        "--node-id: not given and the host name is unknown");
  }
  if (raw.health_command_option->count() == 0) {
    o.health_command = DefaultHealthCommand(defaults.path);
  } else if (raw.health_command != "none") {
    o.health_command = raw.health_command;
  }
  auto heartbeat = Duration(raw.heartbeat_interval, "--heartbeat-interval");
  auto interval = Duration(raw.health_interval, "--health-interval");
  auto timeout = Duration(raw.health_timeout, "--health-timeout");
  auto call = Duration(raw.call_timeout, "--call-timeout");
  for (const auto* parsed : {&heartbeat, &interval, &timeout, &call}) {
    if (!parsed->ok()) return parsed->status();
  }
  o.heartbeat_interval = *heartbeat;
  o.health_interval = *interval;
  o.health_timeout = *timeout;
  o.call_timeout = *call;
  if (absl::Status status = CheckConnection(o.connection); !status.ok()) {
    return status;
  }
  return line;
}

}  // namespace phalanx::node_agent
