// ChildProcess: one child process started by a test or benchmark (fork and
// execve with the given arguments and extra environment), its stdout and
// stderr sent to a file, bounded waits for a ready condition, and stops by
// its own PID only (SIGTERM then SIGKILL after a bound; SIGKILL for crash
// tests). The child dies with its test: the kernel SIGKILLs it when the
// thread that started it ends, even when a crash, a sanitizer's halt or a
// timeout's SIGKILL ends the test before this object could stop it; and it
// inherits none of the test's open files but its stdout and stderr. The
// daemon launchers of tests/ and bench/perf/ and the etcd cluster build on
// it. Owned by its launcher; not thread-safe.
#ifndef PHALANX_TESTS_CHILD_PROCESS_H_
#define PHALANX_TESTS_CHILD_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace phalanx::testing {

struct ChildOptions {
  // argv[0] is the path of the binary (no PATH lookup).
  std::vector<std::string> args;
  // NAME=value pairs set on top of the parent's environment.
  std::vector<std::pair<std::string, std::string>> env;
  // Where stdout and stderr go (created if missing).
  std::string output_path;
  // Appends to output_path instead of truncating it (a restarted member
  // keeps its earlier log).
  bool append_output = false;
};

class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess();  // SIGKILL and reap if still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Forks and execs `options.args`. Returns false when a child of this
  // object still runs, the output file cannot be opened or fork fails. An
  // exec failure shows as the child exiting with 127. The child is
  // SIGKILLed when the calling thread ends (PR_SET_PDEATHSIG): call it from
  // a thread that outlives the child, such as the test's main thread.
  bool Start(const ChildOptions& options);
  // Polls `ready` every `poll` until it returns true (then true), the child
  // exits or `timeout` passes (then false).
  bool WaitUntil(const std::function<bool()>& ready, absl::Duration timeout,
                 absl::Duration poll = absl::Milliseconds(10));
  // Waits (as WaitUntil) until the output matches `pattern`; returns the
  // match and its groups, or nullopt.
  std::optional<std::vector<std::string>> WaitForOutput(
      const std::regex& pattern, absl::Duration timeout);

  // True until the child has exited; reaps it (and records its status)
  // when it has.
  bool Running();
  // SIGTERM, then waits up to `grace` for it to exit; SIGKILL after that.
  // Returns its exit code, or -1 when a signal ended it or it was not
  // running.
  int Stop(absl::Duration grace = absl::Seconds(30));
  // SIGKILL and reap (crash tests; nothing when not running).
  void Kill9();
  // Sends `signal` (nothing when not running).
  void Signal(int signal);
  // SIGSTOP; returns once the kernel reports the child stopped.
  void Pause();

  // Everything in the output file.
  std::string Output() const;
  // What the output file gained since the previous call (or Start).
  std::string ReadNewOutput();

  // The child's PID while it runs (not yet reaped), else -1.
  pid_t pid() const { return pid_; }
  // The exit code of the last reaped child; -1 when a signal ended it.
  int exit_code() const { return exit_code_; }
  // The same as a shell puts it: the exit code, or 128 + the signal that
  // ended it; -1 before any child was reaped.
  int shell_status() const { return shell_status_; }
  const std::string& output_path() const { return output_path_; }

 private:
  void Reaped(int status);

  pid_t pid_ = -1;
  int exit_code_ = -1;
  int shell_status_ = -1;
  std::string output_path_;
  int64_t read_offset_ = 0;
};

}  // namespace phalanx::testing

#endif  // PHALANX_TESTS_CHILD_PROCESS_H_
