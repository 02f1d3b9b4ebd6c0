// Command-line parsing for phalanxctl: the table of commands, and
// ParseCommandLine, which parses argv with CLI11 (every command's flags bound
// to its typed options, ctl_options.h, and checked by CLI11 validators,
// ctl_flag_checks.h) into an Invocation; help comes from CLI11's formatter.
// Pure: no I/O, no environment access (the caller passes $PHALANX_SERVER and
// $PHALANX_TOKEN in). Thread-compatible; the command table is immutable
// after first use.
#ifndef PHALANX_CLIENTS_CTL_ARGS_H_
#define PHALANX_CLIENTS_CTL_ARGS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "clients/ctl_options.h"

namespace phalanx::ctl {

// One command, e.g. "nodes cordon". Its flags are declared with CLI11 in
// ctl_command_flags.cc and land in its member of CommandOptions.
struct CommandDef {
  absl::string_view path;      // command words, space-separated
  absl::string_view synopsis;  // usage after "phalanxctl "
  absl::string_view summary;   // one line for the command list
  int min_args = 0;            // positional arguments after the path
  int max_args = 0;
};

// Every command, in help order.
const std::vector<CommandDef>& CommandTable();

// The command whose path is `path`, or nullptr.
const CommandDef* FindCommand(absl::string_view path);

// What phalanxctl reads from its environment; empty = unset.
struct Environment {
  std::string server;  // $PHALANX_SERVER
  std::string token;   // $PHALANX_TOKEN
};

// The client config file (ctl_contexts.h) as phalanxctl found it.
struct ConfigFile {
  std::string path;                 // "" = no path (no $HOME)
  std::optional<std::string> text;  // unset = no such file
  std::string home;                 // $HOME, for "~/" in the file
};

// A parsed command line.
struct Invocation {
  GlobalOptions global;
  bool help = false;                    // -h/--help was given
  const CommandDef* command = nullptr;  // set once the command is recognised
  std::vector<std::string> args;        // positional arguments after it
  CommandOptions options;               // the command's flags, typed
  absl::Status error;                   // InvalidArgument on a usage error
};

// Parses `argv` (without the program name). Global flags may appear anywhere;
// a command's flags only after its words. `env` gives the defaults of
// --server and --token; --token or --token-file wins over $PHALANX_TOKEN.
// Then the context of the client config file (--context NAME, else the
// file's currentContext) fills the connection flags that neither the
// command line nor the environment set (ApplyContext); a bad file, or a
// --context it does not have (or without a file), is a usage error.
// Never fails outright: a usage error is returned in Invocation::error, with
// `command` set when it was recognised so the caller can print that
// command's usage. Usage errors include: both --token and --token-file; a
// token with a character other than visible ASCII; --tls-cert without
// --tls-key (or the reverse), or either or --tls-server-name without
// --tls-ca; --insecure with --tls-ca; and a token (from any source) for a
// plain-text channel to a --server that is not loopback, unless --insecure.
// A flag value its validator rejects is a usage error naming the flag. No
// error message contains the token.
Invocation ParseCommandLine(const std::vector<std::string>& argv,
                            const Environment& env,
                            const ConfigFile& config_file);

// ParseCommandLine without a client config file (--context is then a usage
// error).
Invocation ParseCommandLine(const std::vector<std::string>& argv,
                            const Environment& env);

// Returns OK when `token` can be sent as "authorization: Bearer TOKEN":
// not empty, visible ASCII only (0x21..0x7e). Else InvalidArgument naming
// `source` (e.g. "--token") and never quoting the token.
absl::Status CheckToken(absl::string_view token, absl::string_view source);

// Returns whether the gRPC target `server` is on this machine: a unix:
// socket, localhost, 127.0.0.0/8 or ::1, with or without a dns:, ipv4: or
// ipv6: scheme (every address of an ipv4:/ipv6: list must be loopback).
bool IsLoopbackTarget(absl::string_view server);

// The endpoints of --server: "a:1,b:2,c:3" is three (an HA cluster's
// replicas, docs/ha.md); a target with a gRPC scheme ("ipv4:a:1,b:2",
// "dns:///h:p", "unix:/path") is one, left to gRPC.
std::vector<std::string> SplitEndpoints(absl::string_view server);

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
