// Limits the Scheduler applies from its live configuration: pending gangs per
// queue, checkpoints, reasons and messages, quotas, and topology levels that
// admitted gangs were placed against. Every refusal changes nothing.
#include <string>

#include "core/scheduler.h"
#include "core/testing.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using testing::kT0;
using testing::MakeNodes;
using testing::Spec;

class LimitsTest : public testing::SchedulerFixture {
 protected:
  LimitsTest() {
    Init(Levels(), MakeNodes(2, 2, 2), {testing::MakeQueue("llm")});
    scheduler_->TakeMutation();
  }
  static Config Levels() {
    Config config;
    config.topology_levels = {"block", "rack"};
    return config;
  }
  // Asserts the refusal stored nothing and moved no revision.
  void ExpectUnchanged(int64_t revision) {
    EXPECT_EQ(scheduler_->revision(), revision);
    EXPECT_TRUE(scheduler_->TakeMutation().empty());
  }
};

TEST_F(LimitsTest, PendingGangsPerQueueBelowAtAndAbove) {
  Config config = scheduler_->config();
  config.limits.max_pending_gangs_per_queue = 3;
  ASSERT_TRUE(scheduler_->UpdateConfig(config, std::nullopt).ok());
  Queue held;
  held.name = QueueName("llm");
  held.held = true;  // nothing is admitted: every gang stays pending
  ASSERT_TRUE(scheduler_->PutQueue(held).ok());
  Submit(Spec("llm").Pods(1, 8));
  Submit(Spec("llm").Pods(1, 8).RequestId("r-2"));  // 2: one below
  Submit(Spec("llm").Pods(1, 8));                   // 3: at the limit
  scheduler_->TakeMutation();
  const int64_t revision = scheduler_->revision();
  auto over = scheduler_->Submit(Spec("llm").Pods(1, 8), now_);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(over.status().message(),
            "spec.queue: queue \"llm\" has 3 pending gangs, the most "
            "limits.max_pending_gangs_per_queue allows");
  ExpectUnchanged(revision);
  // A retry of an accepted submit still answers with its gang.
  auto retry =
      scheduler_->Submit(Spec("llm").Pods(1, 8).RequestId("r-2"), now_);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_FALSE(retry->created);
  // Another queue has its own count.
  Queue other;
  other.name = QueueName("other");
  ASSERT_TRUE(scheduler_->PutQueue(other).ok());
  EXPECT_TRUE(scheduler_->Submit(Spec("other").Pods(1, 8), now_).ok());
}

TEST_F(LimitsTest, CheckpointsOnlyOfTheCurrentRun) {
  GangPtr gang = Submit(Spec("llm").Pods(1, 8));
  scheduler_->TakeMutation();
  const int64_t pending_revision = scheduler_->revision();
  GangReport report;
  report.gang_id = gang->id;
  report.last_checkpoint_time = now_;
  auto pending = scheduler_->Report(report, now_);
  EXPECT_EQ(pending.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pending.status().message(),
            "last_checkpoint_time: gang g-000001 is PENDING; only an "
            "ADMITTED, RUNNING or PREEMPTING gang checkpoints");
  ExpectUnchanged(pending_revision);

  Cycle();
  const absl::Time admitted = *Get(gang)->admit_time;
  now_ += absl::Minutes(10);
  scheduler_->TakeMutation();
  const int64_t revision = scheduler_->revision();
  struct Case {
    absl::Time checkpoint;
    std::string error;  // "" = accepted
  };
  const Case kRefused[] = {
      {now_ + absl::Nanoseconds(1),
       "last_checkpoint_time: 2023-11-14T22:23:21.000000001Z is in the "
       "future (now 2023-11-14T22:23:21Z)"},
      {admitted - absl::Nanoseconds(1),
       "last_checkpoint_time: 2023-11-14T22:13:20.999999999Z is before the "
       "gang's admission at 2023-11-14T22:13:21Z"},
      {now_ + absl::Seconds(int64_t{1} << 40), ""},
      {absl::FromUnixSeconds(0), ""},
  };
  for (const Case& c : kRefused) {
    report.last_checkpoint_time = c.checkpoint;
    auto result = scheduler_->Report(report, now_);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
        << absl::FormatTime(c.checkpoint);
    if (!c.error.empty()) {
      EXPECT_EQ(result.status().message(), c.error);
    }
    ExpectUnchanged(revision);
  }
  for (absl::Time ok : {admitted, admitted + absl::Nanoseconds(1),
                        now_ - absl::Nanoseconds(1), now_}) {
    report.last_checkpoint_time = ok;
    auto result = scheduler_->Report(report, now_);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ((*result)->last_checkpoint_time, ok);
  }
}

TEST_F(LimitsTest, ReasonsAndMessagesBelowAtAndAbove) {
  GangPtr gang = Submit(Spec("llm").Pods(1, 8));
  Cycle();
  scheduler_->TakeMutation();
  const int64_t revision = scheduler_->revision();
  GangReport report;
  report.gang_id = gang->id;
  report.state = GangState::kRunning;
  report.message = std::string(1025, 'm');
  EXPECT_EQ(scheduler_->Report(report, now_).status().message(),
            "message: longer than 1024 bytes (1025)");
  EXPECT_EQ(scheduler_->Cancel(gang->id, std::string(1025, 'r'), now_)
                .status()
                .message(),
            "reason: longer than 1024 bytes (1025)");
  const NodeId node = scheduler_->fleet().slots()[0].node.spec.id;
  EXPECT_EQ(scheduler_
                ->SetNodeState(node, NodeState::kCordoned,
                               std::string(3 << 20, 'r'), now_)
                .status()
                .message(),
            "reason: longer than 1024 bytes (3145728)");
  ExpectUnchanged(revision);
  EXPECT_EQ(Get(gang)->state, GangState::kAdmitted);
  EXPECT_EQ(scheduler_->fleet().slots()[0].node.state, NodeState::kReady);

  report.message = std::string(1024, 'm');
  ASSERT_TRUE(scheduler_->Report(report, now_).ok());
  EXPECT_EQ(Get(gang)->message, report.message);
  ASSERT_TRUE(scheduler_
                  ->SetNodeState(node, NodeState::kCordoned,
                                 std::string(1023, 'r'), now_)
                  .ok());
  ASSERT_TRUE(scheduler_->Cancel(gang->id, std::string(1024, 'r'), now_).ok());
}

TEST_F(LimitsTest, HugeQuotasAreRefusedAndSumsSaturate) {
  Queue cohort;
  cohort.name = QueueName("cohort");
  ASSERT_TRUE(scheduler_->PutQueue(cohort).ok());
  scheduler_->TakeMutation();
  Queue greedy;
  greedy.name = QueueName("greedy");
  greedy.parent = cohort.name;
  greedy.nominal_gpus = {{"H100", std::numeric_limits<int64_t>::max()}};
  auto refused = scheduler_->PutQueue(greedy);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            "queue.nominal_gpus[\"H100\"]: must be in 0..1099511627776");
  EXPECT_FALSE(scheduler_->queues().contains(greedy.name));
  EXPECT_TRUE(scheduler_->TakeMutation().empty());

  // At the limit, siblings lending 2^40 each still let a borrower in.
  Queue a;
  a.name = QueueName("a");
  a.parent = cohort.name;
  a.nominal_gpus = {{"H100", 0}};
  ASSERT_TRUE(scheduler_->PutQueue(a).ok());
  for (const char* name : {"b", "c", "d"}) {
    Queue lender;
    lender.name = QueueName(name);
    lender.parent = cohort.name;
    lender.nominal_gpus = {{"H100", int64_t{1} << 40}};
    ASSERT_TRUE(scheduler_->PutQueue(lender).ok());
  }
  GangPtr gang = Submit(Spec("a").Pods(2, 8));
  Cycle();
  EXPECT_EQ(Get(gang)->state, GangState::kAdmitted) << Get(gang)->reason;
}

TEST_F(LimitsTest, TopologyLevelsStayWhileConstrainedGangsHoldGpus) {
  GangPtr loose = Submit(Spec("llm").Pods(1, 8));
  GangPtr on_node = Submit(Spec("llm").Pods(1, 8).Required("node"));
  Cycle();
  ASSERT_EQ(Get(loose)->state, GangState::kAdmitted);
  ASSERT_EQ(Get(on_node)->state, GangState::kAdmitted);
  // Unconstrained and node-level gangs do not depend on the tree.
  Config reversed = scheduler_->config();
  reversed.topology_levels = {"rack", "block"};
  ASSERT_TRUE(scheduler_->UpdateConfig(reversed, std::nullopt).ok());
  Config back = scheduler_->config();
  back.topology_levels = {"block", "rack"};
  ASSERT_TRUE(scheduler_->UpdateConfig(back, std::nullopt).ok());

  GangPtr racked = Submit(Spec("llm").Pods(2, 8).Required("rack"));
  Cycle();
  ASSERT_EQ(Get(racked)->state, GangState::kAdmitted);
  scheduler_->TakeMutation();
  const Config before = scheduler_->config();
  for (std::vector<std::string> levels :
       {std::vector<std::string>{"rack", "block"},
        std::vector<std::string>{"rack"},
        std::vector<std::string>{"block", "rack", "row"}}) {
    Config changed = before;
    changed.topology_levels = levels;
    auto status = scheduler_->UpdateConfig(changed, std::nullopt).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(status.message(),
              "config.topology_levels: gang g-000003 is ADMITTED under a "
              "topology constraint placed on the current levels; change them "
              "when no such gang holds GPUs");
    EXPECT_EQ(scheduler_->config(), before);
    EXPECT_TRUE(scheduler_->TakeMutation().empty());
  }
  // Other changes still apply.
  Config other = before;
  other.cycle_interval = absl::Seconds(2);
  ASSERT_TRUE(scheduler_->UpdateConfig(other, std::nullopt).ok());
  // Once the gang is gone, the levels may change.
  ASSERT_TRUE(scheduler_->Cancel(racked->id, "", now_).ok());
  reversed = scheduler_->config();
  reversed.topology_levels = {"rack", "block"};
  EXPECT_TRUE(scheduler_->UpdateConfig(reversed, std::nullopt).ok());
}

}  // namespace
}  // namespace phalanx::core
