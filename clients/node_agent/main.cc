// phalanx-node-agent: runs on each GPU node, heartbeats for it and reports
// its health (and each bad GPU) to the Phalanx daemon. See README.md beside
// this file. Exits 0 on SIGTERM or SIGINT, 2 on a usage or setup error.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "clients/node_agent/agent_flags.h"
#include "clients/node_agent/node_agent.h"

namespace {

std::atomic<bool> g_stop{false};

void OnStopSignal(int) { g_stop.store(true); }

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace phalanx::node_agent;  // NOLINT: main only
  static_assert(std::atomic<bool>::is_always_lock_free);
  const char* path = std::getenv("PATH");
  absl::StatusOr<AgentCommandLine> line =
      ParseAgentFlags(std::vector<std::string>(argv + 1, argv + argc),
                      {HostName(), path == nullptr ? "" : path});
  if (!line.ok()) {
    std::cerr << "phalanx-node-agent: " << line.status().message() << "\n";
    return kAgentBadSetup;
  }
  if (!line->help.empty()) {
    std::cout << line->help;
    return kAgentStopped;
  }
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  return RunAgent(line->options, g_stop, std::cerr);
}
