// Command-line parsing for phalanxctl: the table of commands and their flags,
// and ParseCommandLine, which turns argv into an Invocation. Pure: no I/O, no
// environment access (the caller passes $PHALANX_SERVER in). Thread-compatible;
// the command table is immutable after first use.
#ifndef PHALANX_CLIENTS_CTL_ARGS_H_
#define PHALANX_CLIENTS_CTL_ARGS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace phalanx::ctl {

inline constexpr char kDefaultServer[] = "127.0.0.1:50051";

// One flag a command accepts. Flags are stored under their long name.
struct FlagDef {
  absl::string_view name;   // long name without dashes, e.g. "queue"
  char short_name = 0;      // e.g. 'f' for -f; 0 = none
  absl::string_view value;  // placeholder in help ("Q"); empty = switch
  absl::string_view help;   // one line
  bool repeated = false;    // may be given more than once
  bool required = false;    // must be given
};

// One command, e.g. "nodes cordon".
struct CommandDef {
  absl::string_view path;      // command words, space-separated
  absl::string_view synopsis;  // usage after "phalanxctl "
  absl::string_view summary;   // one line for the command list
  int min_args = 0;            // positional arguments after the path
  int max_args = 0;
  std::vector<FlagDef> flags;
};

// Every command, in help order.
const std::vector<CommandDef>& CommandTable();

// The command whose path is `path`, or nullptr.
const CommandDef* FindCommand(absl::string_view path);

enum class OutputFormat { kTable, kJson };

// Flags that apply to every command.
struct GlobalOptions {
  std::string server = kDefaultServer;
  OutputFormat output = OutputFormat::kTable;
  absl::Duration timeout = absl::Seconds(10);
};

// Values of a command's flags, by long name, in the order given.
class FlagValues {
 public:
  // Appends `value` to the values of `name`.
  void Add(absl::string_view name, absl::string_view value);
  // Returns whether `name` was given.
  bool Has(absl::string_view name) const;
  // Returns the last value of `name`, or `fallback` when it was not given.
  std::string Get(absl::string_view name,
                  absl::string_view fallback = "") const;
  // Returns every value of `name`, each split at commas, empty pieces dropped.
  std::vector<std::string> GetList(absl::string_view name) const;

 private:
  std::map<std::string, std::vector<std::string>, std::less<>> values_;
};

// A parsed command line.
struct Invocation {
  GlobalOptions global;
  bool help = false;                    // -h/--help was given
  const CommandDef* command = nullptr;  // set once the command is recognised
  std::vector<std::string> args;        // positional arguments after it
  FlagValues flags;                     // the command's flags
  absl::Status error;                   // InvalidArgument on a usage error
};

// Parses `argv` (without the program name). Global flags may appear anywhere;
// a command's flags only after its words. `env_server` is $PHALANX_SERVER
// (empty when unset). Never fails outright: a usage error is returned in
// Invocation::error, with `command` set when it was recognised so the caller
// can print that command's usage.
Invocation ParseCommandLine(const std::vector<std::string>& argv,
                            absl::string_view env_server);

// Returns the full help text (commands, global flags, exit codes).
std::string GlobalHelp();

// Returns the help text of one command (usage line and flags).
std::string CommandHelp(const CommandDef& command);

// Returns what phalanxctl prints to stderr for a usage error: the message,
// the usage line of `command` (may be null) and a pointer to --help.
std::string UsageErrorText(const absl::Status& error,
                           const CommandDef* command);

// Returns "usage: phalanxctl ..." for `command`, or the generic usage line
// when `command` is null.
std::string UsageLine(const CommandDef* command);

}  // namespace phalanx::ctl

#endif  // PHALANX_CLIENTS_CTL_ARGS_H_
