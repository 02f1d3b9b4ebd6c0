// The start-up files (--config, --fleet, --queues) against the real
// phalanxd: a restart with unchanged files keeps every change made at run
// time; an edited file is applied once, at the next start after the edit.
// (The same over an HA failover: ha_test.cc.)
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/daemon.h"
#include "tests/runtime_changes.h"

namespace phalanx::testing {
namespace {

// How often `text` occurs in `output`.
int Count(const std::string& output, const std::string& text) {
  int count = 0;
  for (size_t at = output.find(text); at != std::string::npos;
       at = output.find(text, at + text.size())) {
    ++count;
  }
  return count;
}

constexpr char kUnchanged[] = "unchanged since it was last applied";

TEST(StartupFilesTest, UnchangedFilesKeepRunTimeChangesAcrossRestarts) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  EXPECT_EQ(Count(daemon->output(), ": applied (sha256 "), 3)
      << daemon->output();
  EXPECT_EQ(ReadOperatorFields(*daemon), FileFields());
  ChangeAtRunTime(*daemon);
  ASSERT_EQ(ReadOperatorFields(*daemon), ChangedFields());

  // A clean restart, then a kill -9 and a restart: the files are the same.
  EXPECT_EQ(daemon->Terminate(), 0) << daemon->output();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  EXPECT_EQ(Count(daemon->output(), kUnchanged), 3) << daemon->output();
  EXPECT_EQ(ReadOperatorFields(*daemon), ChangedFields());
  daemon->Kill9();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  EXPECT_EQ(Count(daemon->output(), kUnchanged), 3) << daemon->output();
  EXPECT_EQ(ReadOperatorFields(*daemon), ChangedFields());
}

TEST(StartupFilesTest, AnEditedFileIsAppliedOnceAndOnlyItsItems) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  ChangeAtRunTime(*daemon);
  EXPECT_EQ(daemon->Terminate(), 0) << daemon->output();

  // Queue "a" edited; queue "b" dropped from the file; the config and
  // fleet files unchanged.
  daemon->WriteFile("queues.json", R"({"queues":[{"name":"a","weight":5}]})");
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  EXPECT_EQ(Count(daemon->output(), kUnchanged), 2) << daemon->output();
  EXPECT_TRUE(absl::StrContains(daemon->output(), "queues.json: applied"))
      << daemon->output();
  OperatorFields expected = ChangedFields();
  expected.queue_a_weight = 5;  // the file's values, held included
  expected.queue_a_held = false;
  EXPECT_EQ(ReadOperatorFields(*daemon), expected);
  // A queue absent from the file is left alone.
  v1::ListQueuesResponse queues;
  grpc::ClientContext context;
  ASSERT_TRUE(daemon->Admin()->ListQueues(&context, {}, &queues).ok());
  EXPECT_EQ(queues.queues_size(), 2);

  // Changed again at run time, then killed: the edit is not applied twice.
  ChangeAtRunTime(*daemon);
  daemon->Kill9();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  EXPECT_EQ(Count(daemon->output(), kUnchanged), 3) << daemon->output();
  EXPECT_EQ(ReadOperatorFields(*daemon), ChangedFields());

  // An edited config file replaces the config; the cordon stays.
  daemon->WriteFile("config.json", R"({"topologyLevels":["block","rack"],)"
                                   R"("cycleInterval":"0.25s"})");
  EXPECT_EQ(daemon->Terminate(), 0) << daemon->output();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  EXPECT_TRUE(absl::StrContains(daemon->output(), "config.json: applied"))
      << daemon->output();
  expected = ChangedFields();
  expected.cycle_interval_ms = 250;
  EXPECT_EQ(ReadOperatorFields(*daemon), expected);
}

}  // namespace
}  // namespace phalanx::testing
