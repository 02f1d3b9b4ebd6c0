// phalanxctl: the command-line client of the Phalanx gang scheduler.
// Parses the command line, prints help or a usage error, else runs the
// command against the daemon. See clients/README.md and `phalanxctl --help`.
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "clients/ctl_args.h"
#include "clients/ctl_commands.h"
#include "clients/ctl_contexts.h"
#include "clients/ctl_format.h"
#include "phalanx_version.h"

namespace {

// The value of the environment variable `name`, "" when unset.
std::string EnvOr(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace phalanx::ctl;  // NOLINT: main only
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && args[0] == "--version") {
    std::cout << "phalanxctl " << PHALANX_VERSION_STRING << "\n";
    return kExitOk;
  }
  ConfigFile config_file;
  config_file.home = EnvOr("HOME");
  const std::string env_config = EnvOr("PHALANX_CONFIG");
  config_file.path =
      ClientConfigPath(env_config, EnvOr("XDG_CONFIG_HOME"), config_file.home);
  if (!config_file.path.empty()) {
    absl::StatusOr<std::optional<std::string>> text =
        ReadClientConfig(config_file.path, /*must_exist=*/!env_config.empty());
    if (!text.ok()) {
      std::cerr << UsageErrorText(text.status(), nullptr);
      return kExitUsage;
    }
    config_file.text = *std::move(text);
  }
  const Invocation invocation = ParseCommandLine(
      args, {EnvOr("PHALANX_SERVER"), EnvOr("PHALANX_TOKEN")}, config_file);
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
