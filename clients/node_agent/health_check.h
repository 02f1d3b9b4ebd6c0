// The node agent's health check: runs the health command (bounded in time
// and in output) and reads its answer. The command's contract:
//   - exit status 0: the node as a whole passed; any other status, a
//     signal or the timeout: it failed;
//   - each stdout line "gpu INDEX unhealthy [REASON...]" names a bad GPU
//     (INDEX 0..63); every other line is ignored.
// Stateless functions; safe to call from any thread.
#ifndef PHALANX_CLIENTS_NODE_AGENT_HEALTH_CHECK_H_
#define PHALANX_CLIENTS_NODE_AGENT_HEALTH_CHECK_H_

#include <atomic>
#include <map>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace phalanx::node_agent {

// The most output of one health command that is read; the rest is dropped.
inline constexpr size_t kMaxHealthOutputBytes = 64 << 10;

// What one run of the health command found.
struct CheckResult {
  bool node_passed = false;
  // Why the node failed (empty when it passed).
  std::string node_detail;
  // Bad GPUs by index, each with its reason (may be empty).
  std::map<int, std::string> bad_gpus;
  bool operator==(const CheckResult&) const = default;
};

// Reads a finished command's answer: `exit_status` as a shell reports it
// (128 + N for a signal), `timed_out` when it was killed for running too
// long, `output` what it printed.
CheckResult ReadHealthOutput(int exit_status, bool timed_out,
                             absl::string_view output);

// Runs `command` with /bin/sh -c in a process group of its own, stdout
// and stderr read (at most kMaxHealthOutputBytes), and reads its answer.
// Kills the group (SIGKILL) after `timeout`, or as soon as `stop` is set
// (then the result is a failure saying so). Never blocks longer than
// `timeout` plus the time to reap the killed command.
CheckResult RunHealthCommand(const std::string& command, absl::Duration timeout,
                             const std::atomic<bool>& stop);

// The health command used when none is given: a check of every GPU with
// nvidia-smi (uncorrected volatile ECC errors, or a GPU nvidia-smi cannot
// read, make a GPU bad; nvidia-smi failing makes the node fail) when
// nvidia-smi is on `path` (a PATH value), else "" (no health check).
std::string DefaultHealthCommand(absl::string_view path);

}  // namespace phalanx::node_agent

#endif  // PHALANX_CLIENTS_NODE_AGENT_HEALTH_CHECK_H_
