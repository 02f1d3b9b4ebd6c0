// Command-line parsing for phalanxctl: the table of commands and their flags,
// and ParseCommandLine, which turns argv into an Invocation. Pure: no I/O, no
// environment access (the caller passes $PHALANX_SERVER and $PHALANX_TOKEN
// in). Thread-compatible; the command table is immutable after first use.
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
// The daemon's default --max-message-bytes, and so the client's.
inline constexpr int kDefaultMaxMessageBytes = 4 << 20;

// One flag a command accepts. Flags are stored under their long name.
struct FlagDef {
  absl::string_view name;        // long name without dashes, e.g. "queue"
  char short_name = 0;           // e.g. 'f' for -f; 0 = none
  absl::string_view value;       // placeholder in help ("Q"); empty = switch
  absl::string_view help;        // one line
  bool repeated = false;         // may be given more than once
  bool required = false;         // must be given
  absl::string_view alias = {};  // another long name, e.g. "after-revision"
  // The values an enum flag takes (any case; stored as written here). Empty:
  // any value. Help and the error for another value list them.
  std::vector<absl::string_view> choices = {};
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

// -o: a table; proto3 JSON; YAML (the same fields as JSON); a table with
// more columns.
enum class OutputFormat { kTable, kJson, kYaml, kWide };

// How to reach the daemon and what to prove to it; ctl_channel.h turns it
// into a channel. The token is a secret: nothing prints it.
struct ConnectionOptions {
  std::string server = kDefaultServer;
  std::string token;            // --token, else $PHALANX_TOKEN; "" = none
  std::string token_file;       // --token-file: read when the command runs
  std::string tls_ca_file;      // PEM roots; set = TLS, unset = plain text
  std::string tls_cert_file;    // client certificate (PEM), with the key
  std::string tls_key_file;     // its private key (PEM)
  std::string tls_server_name;  // name checked in the server's certificate
  bool insecure = false;        // allow a token in plain text off loopback
  int max_message_bytes = kDefaultMaxMessageBytes;  // largest reply accepted
};

// Flags that apply to every command.
struct GlobalOptions {
  ConnectionOptions connection;
  OutputFormat output = OutputFormat::kTable;
  absl::Duration timeout = absl::Seconds(10);
};

// What phalanxctl reads from its environment; empty = unset.
struct Environment {
  std::string server;  // $PHALANX_SERVER
  std::string token;   // $PHALANX_TOKEN
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
// a command's flags only after its words. `env` gives the defaults of
// --server and --token; --token or --token-file wins over $PHALANX_TOKEN.
// Never fails outright: a usage error is returned in Invocation::error, with
// `command` set when it was recognised so the caller can print that
// command's usage. Usage errors include: both --token and --token-file; a
// token with a character other than visible ASCII; --tls-cert without
// --tls-key (or the reverse), or either or --tls-server-name without
// --tls-ca; --insecure with --tls-ca; and a token (from any source) for a
// plain-text channel to a --server that is not loopback, unless --insecure.
// No error message contains the token.
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
