#include "clients/node_agent/health_check.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

extern char** environ;

namespace phalanx::node_agent {
namespace {

// The last non-empty line of `output`, for a failure's detail.
std::string LastLine(absl::string_view output) {
  std::vector<absl::string_view> lines =
      absl::StrSplit(output, '\n', absl::SkipWhitespace());
  if (lines.empty()) return "";
  constexpr size_t kMaxDetail = 200;
  return std::string(
      absl::StripAsciiWhitespace(lines.back()).substr(0, kMaxDetail));
}

// Parses "gpu INDEX unhealthy [REASON...]"; false for any other line.
bool ParseGpuLine(absl::string_view line, int* index, std::string* reason) {
  std::vector<absl::string_view> words =
      absl::StrSplit(absl::StripAsciiWhitespace(line), absl::MaxSplits(' ', 3));
  if (words.size() < 3 || words[0] != "gpu" || words[2] != "unhealthy") {
    return false;
  }
  if (!absl::SimpleAtoi(words[1], index) || *index < 0 || *index > 63) {
    return false;
  }
  *reason = words.size() > 3 ? std::string(absl::StripAsciiWhitespace(words[3]))
                             : std::string();
  return true;
}

// A started command: its PID and the read end of its output pipe.
struct Started {
  pid_t pid = -1;
  int output_fd = -1;
};

Started Spawn(const std::string& command) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return {};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group, for kill(-pgid)
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t pid = -1;
  const int error = posix_spawn(&pid, "/bin/sh", &actions, &attr,
                                const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  if (error != 0) {
    close(fds[0]);
    return {};
  }
  return {pid, fds[0]};
}

// Reads the command's output until it closes it, `deadline` passes or
// `stop` is set; returns whether it closed it.
bool ReadUntilClosed(int fd, absl::Time deadline, const std::atomic<bool>& stop,
                     std::string* output) {
  char buffer[4096];
  while (!stop.load()) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    // Wake at least every 100 ms to see `stop`.
    const int wait_ms = static_cast<int>(
        absl::ToInt64Milliseconds(std::min(left, absl::Milliseconds(100))));
    pollfd poll_fd{fd, POLLIN, 0};
    const int ready = poll(&poll_fd, 1, std::max(wait_ms, 1));
    if (ready <= 0) continue;
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n == 0) return true;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return true;
    }
    const size_t room = kMaxHealthOutputBytes - output->size();
    output->append(buffer, std::min(room, static_cast<size_t>(n)));
  }
  return false;
}

// Reaps `pid`, waiting at most until `deadline`; returns its status as a
// shell reports it, or -1 when it did not end in time.
int Reap(pid_t pid, absl::Time deadline) {
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (done < 0 || absl::Now() >= deadline) return -1;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

}  // namespace

CheckResult ReadHealthOutput(int exit_status, bool timed_out,
                             absl::string_view output) {
  CheckResult result;
  result.node_passed = !timed_out && exit_status == 0;
  if (timed_out) {
    result.node_detail = "health command timed out";
  } else if (exit_status != 0) {
    result.node_detail = absl::StrCat("health command exited ", exit_status);
    if (std::string last = LastLine(output); !last.empty()) {
      absl::StrAppend(&result.node_detail, ": ", last);
    }
  }
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    int index = 0;
    std::string reason;
    if (ParseGpuLine(line, &index, &reason)) {
      result.bad_gpus.try_emplace(index, std::move(reason));
    }
  }
  return result;
}

CheckResult RunHealthCommand(const std::string& command, absl::Duration timeout,
                             const std::atomic<bool>& stop) {
  const Started child = Spawn(command);
  if (child.pid < 0) {
    return ReadHealthOutput(127, false, "cannot start /bin/sh");
  }
  std::string output;
  const bool closed =
      ReadUntilClosed(child.output_fd, absl::Now() + timeout, stop, &output);
  close(child.output_fd);
  // Output closed: the command is ending; give it the rest of a second.
  int status = closed ? Reap(child.pid, absl::Now() + absl::Seconds(1)) : -1;
  if (status < 0) {
    kill(-child.pid, SIGKILL);
    Reap(child.pid, absl::InfiniteFuture());
  }
  if (stop.load() && status < 0) {
    CheckResult stopped;
    stopped.node_detail = "health check stopped: the agent is exiting";
    return stopped;
  }
  return ReadHealthOutput(status, status < 0, output);
}

std::string DefaultHealthCommand(absl::string_view path) {
  bool found = false;
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/nvidia-smi");
    if (access(candidate.c_str(), X_OK) == 0) {
      found = true;
      break;
    }
  }
  if (!found) return "";
  // nvidia-smi failing fails the node; a GPU whose uncorrected volatile ECC
  // count is neither 0 nor N/A (a count, or an error such as
  // "[GPU requires reset]") is bad.
  return "out=$(nvidia-smi --query-gpu=index,ecc.errors.uncorrected.volatile."
         "total --format=csv,noheader,nounits) || exit 1; "
         "printf '%s\\n' \"$out\" | awk -F', *' "
         "'$2 != \"0\" && $2 != \"[N/A]\" && $2 != \"N/A\" "
         "{ print \"gpu \" $1 \" unhealthy uncorrected ECC errors: \" $2 }'";
}

}  // namespace phalanx::node_agent
