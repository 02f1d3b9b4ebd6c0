// phalanxctl against a real daemon: output and exit codes.
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon.h"

namespace phalanx::testing {
namespace {

using ::testing::HasSubstr;

struct CtlResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CtlResult Ctl(const std::string& server, const std::string& args) {
  const std::string command = absl::StrCat(
      PHALANXCTL_PATH, " --server ", server, " --timeout 5 ", args, " 2>&1");
  CtlResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

TEST(CtlTest, SubmitGetListAndErrorsThroughTheCli) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  const std::string server = daemon->address();

  CtlResult submit =
      Ctl(server, "submit --queue a --pods 2 --gpus 8 --level rack");
  EXPECT_EQ(submit.exit_code, 0) << submit.output;
  EXPECT_THAT(submit.output, HasSubstr("g-000001"));

  CtlResult get = Ctl(server, "-o json get g-000001");
  EXPECT_EQ(get.exit_code, 0) << get.output;
  EXPECT_THAT(get.output, HasSubstr("GANG_STATE_ADMITTED"));

  CtlResult list = Ctl(server, "list --queue a");
  EXPECT_EQ(list.exit_code, 0);
  EXPECT_THAT(list.output, HasSubstr("ADMITTED"));

  CtlResult missing = Ctl(server, "get g-999999");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.output,
              HasSubstr("NOT_FOUND: gang_id: no gang \"g-999999\""));

  CtlResult unknown_queue =
      Ctl(server, "submit --queue nope --pods 1 --gpus 8");
  EXPECT_EQ(unknown_queue.exit_code, 1);
  EXPECT_THAT(unknown_queue.output,
              HasSubstr("NOT_FOUND: spec.queue: no queue \"nope\""));

  CtlResult never =
      Ctl(server, "submit --queue a --pods 3 --gpus 8 --level rack");
  EXPECT_EQ(never.exit_code, 1);
  EXPECT_THAT(never.output, HasSubstr("FAILED_PRECONDITION"));

  CtlResult usage = Ctl(server, "frobnicate");
  EXPECT_EQ(usage.exit_code, 2);

  daemon->Kill9();
  CtlResult down = Ctl(server, "list");
  EXPECT_EQ(down.exit_code, 3) << down.output;
}

TEST(CtlTest, DrainWithADeadlineAndTheHorizonInTheConfig) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  const std::string server = daemon->address();

  CtlResult drain =
      Ctl(server, "nodes drain node-000 --deadline 2h --reason retire");
  EXPECT_EQ(drain.exit_code, 0) << drain.output;
  EXPECT_THAT(drain.output, HasSubstr("DRAINING (deadline in "));

  CtlResult bad = Ctl(server, "nodes drain node-000 --deadline soon");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.output, HasSubstr("--deadline: want a duration"));

  CtlResult config = Ctl(server, "config get");
  EXPECT_EQ(config.exit_code, 0) << config.output;
  EXPECT_THAT(config.output, HasSubstr("\"horizon\": \"3600s\""));
}

}  // namespace
}  // namespace phalanx::testing
