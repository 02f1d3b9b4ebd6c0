// ChildProcess against real /bin/sh children: arguments and environment
// reach the child, output lands in the file, ready waits end on a line or
// on the child's exit, stops use SIGTERM, then SIGKILL after the bound, and
// a child dies with the process that started it and keeps none of its files.
#include "tests/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace phalanx::testing {
namespace {

class ChildProcessTest : public ::testing::Test {
 protected:
  ChildProcessTest() {
    char pattern[] = "/tmp/phalanx-child-XXXXXX";
    root_ = mkdtemp(pattern);
  }
  ~ChildProcessTest() override { std::filesystem::remove_all(root_); }

  // Options running `script` in /bin/sh, its output in out.log.
  ChildOptions Shell(const std::string& script) const {
    return {.args = {"/bin/sh", "-c", script},
            .env = {},
            .output_path = Log(),
            .append_output = false};
  }
  std::string Log() const { return root_ + "/out.log"; }

  std::string root_;
};

TEST_F(ChildProcessTest, ArgumentsAndEnvironmentReachTheChild) {
  ChildProcess child;
  ChildOptions options = Shell("echo \"$0 $PHALANX_CHILD_TEST\"");
  options.env = {{"PHALANX_CHILD_TEST", "value-1"}};
  ASSERT_TRUE(child.Start(options));
  // Ends when the child exits: nothing matches the line first.
  EXPECT_FALSE(child.WaitUntil([] { return false; }, absl::Seconds(30)));
  EXPECT_EQ(child.exit_code(), 0);
  EXPECT_EQ(child.pid(), -1);
  EXPECT_EQ(child.Output(), "/bin/sh value-1\n");
}

TEST_F(ChildProcessTest, WaitForOutputReturnsTheGroupsOfTheReadyLine) {
  ChildProcess child;
  ASSERT_TRUE(
      child.Start(Shell("echo 'listening on port 4242'; exec sleep 60")));
  const auto match = child.WaitForOutput(std::regex("listening on port (\\d+)"),
                                         absl::Seconds(30));
  ASSERT_TRUE(match.has_value()) << child.Output();
  EXPECT_EQ((*match)[1], "4242");
  EXPECT_GT(child.pid(), 0);
  EXPECT_EQ(child.Stop(), -1);  // sleep ends by SIGTERM
  EXPECT_EQ(child.shell_status(), 128 + SIGTERM);
}

TEST_F(ChildProcessTest, WaitForOutputFailsWhenTheChildExitsFirst) {
  ChildProcess child;
  ASSERT_TRUE(child.Start(Shell("echo starting; exit 3")));
  EXPECT_FALSE(child.WaitForOutput(std::regex("ready"), absl::Seconds(30)));
  EXPECT_EQ(child.exit_code(), 3);
}

TEST_F(ChildProcessTest, StopReturnsTheExitCodeOfAChildThatHandlesSigterm) {
  ChildProcess child;
  ASSERT_TRUE(child.Start(Shell(
      "trap 'echo bye; exit 7' TERM; echo up; while :; do sleep 1; done")));
  ASSERT_TRUE(child.WaitForOutput(std::regex("up"), absl::Seconds(30)));
  EXPECT_EQ(child.Stop(absl::Seconds(30)), 7);
  EXPECT_EQ(child.Output(), "up\nbye\n");
}

TEST_F(ChildProcessTest, StopKillsAChildThatIgnoresSigtermAfterTheGrace) {
  ChildProcess child;
  ASSERT_TRUE(
      child.Start(Shell("trap '' TERM; echo up; while :; do sleep 1; done")));
  ASSERT_TRUE(child.WaitForOutput(std::regex("up"), absl::Seconds(30)));
  EXPECT_EQ(child.Stop(absl::Milliseconds(200)), -1);
  EXPECT_EQ(child.shell_status(), 128 + SIGKILL);
  EXPECT_FALSE(child.Running());
}

TEST_F(ChildProcessTest, Kill9EndsTheChildAndAppendKeepsTheEarlierOutput) {
  ChildProcess child;
  ChildOptions options = Shell("echo run; exec sleep 60");
  options.append_output = true;
  ASSERT_TRUE(child.Start(options));
  ASSERT_TRUE(child.WaitForOutput(std::regex("run"), absl::Seconds(30)));
  EXPECT_FALSE(child.Start(options));  // one child at a time
  child.Kill9();
  EXPECT_EQ(child.shell_status(), 128 + SIGKILL);
  EXPECT_EQ(child.ReadNewOutput(), "run\n");
  ASSERT_TRUE(child.Start(options));
  ASSERT_TRUE(child.WaitUntil([&] { return child.Output() == "run\nrun\n"; },
                              absl::Seconds(30)));
  EXPECT_EQ(child.ReadNewOutput(), "run\n");  // only the second run's line
}

TEST_F(ChildProcessTest, AMissingBinaryExitsWith127) {
  ChildProcess child;
  ASSERT_TRUE(child.Start({.args = {root_ + "/no-such-binary"},
                           .env = {},
                           .output_path = Log(),
                           .append_output = false}));
  EXPECT_FALSE(child.WaitUntil([] { return false; }, absl::Seconds(30)));
  EXPECT_EQ(child.exit_code(), 127);
}

// True while `pid` runs: not gone and not a zombie waiting for a reaper.
bool Alive(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t name_end = line.rfind(')');
  return name_end != std::string::npos && name_end + 2 < line.size() &&
         line[name_end + 2] != 'Z';
}

// The PID a child printed as the first line of `path`, waiting at most
// 30 s; 0 when none came.
pid_t PrintedPid(const std::string& path) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    std::ifstream in(path);
    std::string line;
    int pid = 0;
    if (std::getline(in, line) && absl::SimpleAtoi(line, &pid) && pid > 0) {
      return pid;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return 0;
}

TEST_F(ChildProcessTest, TheChildDiesWhenTheProcessThatStartedItIsKilled) {
  // A helper process (a copy of this one) starts a child through the
  // harness, then waits to be killed, as a test that crashes or that ctest
  // kills for its timeout: its ChildProcess never stops the child.
  const pid_t helper = fork();
  ASSERT_GE(helper, 0);
  if (helper == 0) {
    ChildProcess child;
    if (!child.Start(Shell("echo $$; exec sleep 120"))) _exit(1);
    for (int i = 0; i < 120; ++i) sleep(1);
    _exit(2);
  }
  const pid_t child = PrintedPid(Log());
  ASSERT_GT(child, 0) << "the helper's child printed no PID";
  EXPECT_TRUE(Alive(child));
  kill(helper, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(helper, &status, 0), helper);
  ASSERT_TRUE(WIFSIGNALED(status));
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (Alive(child) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_FALSE(Alive(child)) << "the child outlived the helper";
  if (Alive(child)) kill(child, SIGKILL);  // this test's own grandchild
}

TEST_F(ChildProcessTest, TheChildInheritsNoOpenFileButItsOutput) {
  // Opened without O_CLOEXEC, as a lock's file held by a build script.
  const int held = open(root_.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(held, 0);
  ChildProcess child;
  ASSERT_TRUE(child.Start(Shell(absl::StrCat(
      "for fd in 1 2 ", held,
      "; do [ -e /proc/$$/fd/$fd ] && echo open $fd || echo closed $fd; "
      "done"))));
  EXPECT_FALSE(child.WaitUntil([] { return false; }, absl::Seconds(30)));
  close(held);
  EXPECT_EQ(child.Output(),
            absl::StrCat("open 1\nopen 2\nclosed ", held, "\n"));
}

}  // namespace
}  // namespace phalanx::testing
