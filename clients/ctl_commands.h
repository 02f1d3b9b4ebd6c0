// The commands of phalanxctl: each builds its request from the parsed command
// line, makes the gRPC call(s) on the channel to --server (see
// ctl_channel.h: plain text or TLS, every call with the bearer token when
// one is given), and prints the answer as a table or as JSON. One RunCommand
// call per process; not meant to be called concurrently.
#ifndef PHALANX_CLIENTS_CTL_COMMANDS_H_
#define PHALANX_CLIENTS_CTL_COMMANDS_H_

#include <ostream>

#include "absl/strings/string_view.h"
#include "clients/ctl_args.h"

namespace phalanx::ctl {

// Runs `invocation` (parsed without error, command set, not --help).
// Writes results to `out`, errors and notes to `err`. Returns the exit code:
// 0 on success, 2 on a usage error found while building the request (bad
// flag value, unreadable or invalid input, token, CA, certificate or key
// file), 3 when the server is
// unreachable (UNAVAILABLE), 1 on any other RPC failure.
int RunCommand(const Invocation& invocation, std::ostream& out,
               std::ostream& err);

// Returns whether `path` (a CommandTable() entry) has an implementation.
bool HasHandler(absl::string_view path);

}  // namespace phalanx::ctl

#endif  // PHALANX_CLIENTS_CTL_COMMANDS_H_
