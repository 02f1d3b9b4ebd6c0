#include "clients/node_agent/health_check.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace phalanx::node_agent {
namespace {

TEST(ReadHealthOutputTest, ExitZeroPassesAndGpuLinesNameBadGpus) {
  const CheckResult result =
      ReadHealthOutput(0, false,
                       "checking 8 GPUs\n"
                       "gpu 3 unhealthy XID 79: fell off the bus\n"
                       "gpu 5 unhealthy\n"
                       "gpu 6 ok\n"
                       "gpu 99 unhealthy out of range\n"
                       "gpu x unhealthy not a number\n");
  EXPECT_TRUE(result.node_passed);
  EXPECT_EQ(result.node_detail, "");
  const std::map<int, std::string> want = {{3, "XID 79: fell off the bus"},
                                           {5, ""}};
  EXPECT_EQ(result.bad_gpus, want);
}

TEST(ReadHealthOutputTest, NonZeroExitFailsTheNodeWithItsLastLine) {
  const CheckResult result =
      ReadHealthOutput(1, false, "starting\nNVML: driver not loaded\n\n");
  EXPECT_FALSE(result.node_passed);
  EXPECT_EQ(result.node_detail,
            "health command exited 1: NVML: driver not loaded");
}

TEST(ReadHealthOutputTest, TimeoutFailsTheNode) {
  const CheckResult result = ReadHealthOutput(0, true, "");
  EXPECT_FALSE(result.node_passed);
  EXPECT_EQ(result.node_detail, "health command timed out");
}

TEST(RunHealthCommandTest, ReadsTheCommandsAnswer) {
  std::atomic<bool> stop{false};
  const CheckResult result = RunHealthCommand(
      "echo 'gpu 2 unhealthy ECC'; exit 0", absl::Seconds(10), stop);
  EXPECT_TRUE(result.node_passed);
  EXPECT_EQ(result.bad_gpus, (std::map<int, std::string>{{2, "ECC"}}));
  const CheckResult failed =
      RunHealthCommand("echo broken >&2; exit 3", absl::Seconds(10), stop);
  EXPECT_FALSE(failed.node_passed);
  EXPECT_EQ(failed.node_detail, "health command exited 3: broken");
}

TEST(RunHealthCommandTest, ACommandRunningTooLongIsKilledAndFails) {
  std::atomic<bool> stop{false};
  const absl::Time start = absl::Now();
  // The background sleep holds the output open too: the whole group dies.
  const CheckResult result =
      RunHealthCommand("sleep 30 & echo 'gpu 1 unhealthy slow'; sleep 30",
                       absl::Milliseconds(300), stop);
  EXPECT_FALSE(result.node_passed);
  EXPECT_EQ(result.node_detail, "health command timed out");
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
}

TEST(RunHealthCommandTest, StopEndsARunningCheck) {
  std::atomic<bool> stop{true};
  const CheckResult result =
      RunHealthCommand("sleep 30", absl::Seconds(60), stop);
  EXPECT_FALSE(result.node_passed);
  EXPECT_EQ(result.node_detail, "health check stopped: the agent is exiting");
}

TEST(DefaultHealthCommandTest, NvidiaSmiWhenOnPathElseNone) {
  char dir_template[] = "/tmp/phalanx-agent-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  EXPECT_EQ(DefaultHealthCommand(dir), "");
  const std::string fake = dir + "/nvidia-smi";
  {
    // A fake nvidia-smi: GPU 1 has uncorrected ECC errors, GPU 2 needs a
    // reset, GPUs 0 and 3 are fine (one reports N/A).
    std::ofstream out(fake);
    out << "#!/bin/sh\n"
           "printf '0, 0\\n1, 2\\n2, [GPU requires reset]\\n3, [N/A]\\n'\n";
  }
  ASSERT_EQ(chmod(fake.c_str(), 0755), 0);
  const std::string command = DefaultHealthCommand("/nonexistent:" + dir);
  ASSERT_NE(command, "");
  // The command runs nvidia-smi from PATH: put the fake first.
  const std::string old_path = std::getenv("PATH");
  setenv("PATH", (dir + ":" + old_path).c_str(), 1);
  std::atomic<bool> stop{false};
  const CheckResult result = RunHealthCommand(command, absl::Seconds(10), stop);
  setenv("PATH", old_path.c_str(), 1);
  EXPECT_TRUE(result.node_passed) << result.node_detail;
  const std::map<int, std::string> want = {
      {1, "uncorrected ECC errors: 2"},
      {2, "uncorrected ECC errors: [GPU requires reset]"}};
  EXPECT_EQ(result.bad_gpus, want);
  std::remove(fake.c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace phalanx::node_agent
