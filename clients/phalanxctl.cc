// phalanxctl: the command-line client of the Phalanx gang scheduler.
// Parses the command line, prints help or a usage error, else runs the
// command against the daemon. See clients/README.md and `phalanxctl --help`.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "clients/ctl_args.h"
#include "clients/ctl_commands.h"
#include "clients/ctl_format.h"
#include "phalanx_version.h"

int main(int argc, char** argv) {
  using namespace phalanx::ctl;  // NOLINT: main only
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && args[0] == "--version") {
    std::cout << "phalanxctl " << PHALANX_VERSION_STRING << "\n";
    return kExitOk;
  }
  const char* env_server = std::getenv("PHALANX_SERVER");
  const char* env_token = std::getenv("PHALANX_TOKEN");
  const Invocation invocation =
      ParseCommandLine(args, {env_server == nullptr ? "" : env_server,
                              env_token == nullptr ? "" : env_token});
  if (invocation.help) {
    std::cout << (invocation.command == nullptr
                      ? GlobalHelp()
                      : CommandHelp(*invocation.command));
    return kExitOk;
  }
  if (!invocation.error.ok()) {
    std::cerr << UsageErrorText(invocation.error, invocation.command);
    return kExitUsage;
  }
  return RunCommand(invocation, std::cout, std::cerr);
}
