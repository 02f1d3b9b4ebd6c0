// The flags of phalanxctl, declared with CLI11: each flag bound to one field
// of its command's options struct (ctl_options.h), with the validator that
// checks its value (ctl_flag_checks.h). Used by ParseCommandLine (ctl_args.h).
// The options structs must outlive the apps; thread-compatible.
#ifndef PHALANX_CLIENTS_CTL_COMMAND_FLAGS_H_
#define PHALANX_CLIENTS_CTL_COMMAND_FLAGS_H_

#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/string_view.h"
#include "clients/ctl_options.h"

namespace phalanx::ctl {

// The global flags checked after parsing, across flags.
struct GlobalFlags {
  CLI::Option* token = nullptr;  // --token (given or not decides the source)
  // Flags that may not be given an empty value, with the values bound.
  std::vector<std::pair<CLI::Option*, const std::string*>> not_empty;
};

// Declares the global flags (--server, -o, --timeout, the token and TLS
// flags, --insecure, --max-message-bytes) on `root`, bound to `global`.
// Unlike a command's flag, a global flag may be repeated: the last wins.
GlobalFlags BindGlobalFlags(CLI::App* root, GlobalOptions* global);

// Declares the flags of the command at `path` (a CommandTable() path) on
// `app`, bound to the command's member of `options`. A command without
// flags gets none.
void BindCommandFlags(absl::string_view path, CLI::App* app,
                      CommandOptions* options);

}  // namespace phalanx::ctl

#endif  // PHALANX_CLIENTS_CTL_COMMAND_FLAGS_H_
