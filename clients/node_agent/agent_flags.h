// The command line of phalanx-node-agent, parsed with CLI11 into
// AgentOptions (see README.md beside this file for every flag).
// Thread-compatible.
#ifndef PHALANX_CLIENTS_NODE_AGENT_AGENT_FLAGS_H_
#define PHALANX_CLIENTS_NODE_AGENT_AGENT_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "clients/node_agent/node_agent.h"

namespace phalanx::node_agent {

// What the command line does not say, taken from the machine.
struct AgentDefaults {
  std::string hostname;  // --node-id when not given
  std::string path;      // $PATH, where the default health check looks
};

// The parsed command line: options to run with, or help to print.
struct AgentCommandLine {
  AgentOptions options;
  std::string help;  // set when --help was given: print it and exit 0
};

// Parses `args` (without argv[0]). --health-command not given: the
// nvidia-smi check when nvidia-smi is on defaults.path, else none; given
// as "" or "none": none. InvalidArgument naming the flag for a bad value,
// for a token in plain text to a server off loopback without --insecure,
// and for TLS flags that do not go together.
absl::StatusOr<AgentCommandLine> ParseAgentFlags(
    const std::vector<std::string>& args, const AgentDefaults& defaults);

}  // namespace phalanx::node_agent

#endif  // PHALANX_CLIENTS_NODE_AGENT_AGENT_FLAGS_H_
