// ChildProcess against real /bin/sh children: arguments and environment
// reach the child, output lands in the file, ready waits end on a line or
// on the child's exit, and stops use SIGTERM, then SIGKILL after the bound.
#include "tests/child_process.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

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

}  // namespace
}  // namespace phalanx::testing
