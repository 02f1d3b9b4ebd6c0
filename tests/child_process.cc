#include "tests/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <thread>

#include "absl/time/clock.h"

extern char** environ;

namespace phalanx::testing {
namespace {

// The parent's environment with `extra` set on top, as NAME=value strings.
std::vector<std::string> Environment(
    const std::vector<std::pair<std::string, std::string>>& extra) {
  std::set<std::string> overridden;
  for (const auto& [name, value] : extra) overridden.insert(name);
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    if (!overridden.count(text.substr(0, text.find('=')))) env.push_back(text);
  }
  for (const auto& [name, value] : extra) env.push_back(name + "=" + value);
  return env;
}

// Pointers into `strings`, ending in nullptr, for execve.
std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& text : strings) pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

// In the child, between fork and exec (async-signal-safe calls only): dies
// with the thread that forked it, even when a crash or a SIGKILL ends it
// before its ChildProcess could stop the child; keeps of the parent's open
// files only stdout and stderr, both to `output_fd`; execs `argv` or exits
// 127. The SIGKILL on the parent's death survives execve (phalanxd and etcd
// are no set-user-ID programs).
[[noreturn]] void ExecChild(pid_t parent, int output_fd,
                            const std::vector<char*>& argv,
                            const std::vector<char*>& envp) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) _exit(127);
  // The parent may have died before prctl: nothing would kill this child
  // then, and the init process it was handed to is its parent now.
  if (getppid() != parent) _exit(127);
  dup2(output_fd, STDOUT_FILENO);
  dup2(output_fd, STDERR_FILENO);
  // Every other file the test process holds open (a lock's file, a
  // listening socket, a pipe) stays with the test: a child that outlives
  // its test must not keep them.
  close_range(STDERR_FILENO + 1, ~0U, 0);
  execve(argv[0], argv.data(), envp.data());
  _exit(127);
}

}  // namespace

ChildProcess::~ChildProcess() { Kill9(); }

bool ChildProcess::Start(const ChildOptions& options) {
  if (Running() || options.args.empty()) return false;
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC |
                    (options.append_output ? O_APPEND : O_TRUNC);
  const int fd = open(options.output_path.c_str(), flags, 0644);
  if (fd < 0) return false;
  output_path_ = options.output_path;
  read_offset_ =
      options.append_output ? static_cast<int64_t>(Output().size()) : 0;
  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls (ExecChild's).
  std::vector<std::string> args = options.args;
  std::vector<std::string> env = Environment(options.env);
  std::vector<char*> argv = Pointers(args);
  std::vector<char*> envp = Pointers(env);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) ExecChild(parent, fd, argv, envp);
  close(fd);
  if (pid < 0) return false;
  pid_ = pid;
  exit_code_ = -1;
  shell_status_ = -1;
  return true;
}

bool ChildProcess::WaitUntil(const std::function<bool()>& ready,
                             absl::Duration timeout, absl::Duration poll) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (ready()) return true;
    if (!Running()) return false;
    absl::SleepFor(poll);
  }
  return ready();
}

std::optional<std::vector<std::string>> ChildProcess::WaitForOutput(
    const std::regex& pattern, absl::Duration timeout) {
  std::vector<std::string> groups;
  const bool found = WaitUntil(
      [&] {
        const std::string output = Output();
        std::smatch match;
        if (!std::regex_search(output, match, pattern)) return false;
        groups.assign(match.begin(), match.end());
        return true;
      },
      timeout);
  if (!found) return std::nullopt;
  return groups;
}

void ChildProcess::Reaped(int status) {
  pid_ = -1;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  shell_status_ =
      WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool ChildProcess::Running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return true;
  Reaped(status);
  return false;
}

int ChildProcess::Stop(absl::Duration grace) {
  if (pid_ <= 0) return -1;
  if (Running()) {
    kill(pid_, SIGTERM);
    WaitUntil([] { return false; }, grace);  // returns once the child exits
  }
  if (!Running()) return exit_code_;
  Kill9();
  return -1;
}

void ChildProcess::Kill9() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  Reaped(status);
}

void ChildProcess::Signal(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

void ChildProcess::Pause() {
  if (pid_ <= 0) return;
  kill(pid_, SIGSTOP);
  int status = 0;
  waitpid(pid_, &status, WUNTRACED);
}

std::string ChildProcess::Output() const {
  std::ifstream in(output_path_, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in),
                     std::istreambuf_iterator<char>());
}

std::string ChildProcess::ReadNewOutput() {
  std::ifstream in(output_path_, std::ios::binary);
  in.seekg(read_offset_);
  std::string text(std::istreambuf_iterator<char>(in),
                   std::istreambuf_iterator<char>{});
  read_offset_ += static_cast<int64_t>(text.size());
  return text;
}

}  // namespace phalanx::testing
