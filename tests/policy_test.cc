// Quota, preemption with acknowledgement, and run-time config over gRPC.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon.h"

namespace phalanx::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class PolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = StartDemoDaemon();
    ASSERT_TRUE(daemon_->Start()) << daemon_->output();
    scheduler_ = daemon_->Scheduler();
    admin_ = daemon_->Admin();
  }

  v1::Gang Submit(v1::SubmitGangRequest request, int priority = 0) {
    request.mutable_spec()->set_priority(priority);
    return SubmitOk(*scheduler_, request);
  }

  v1::Gang Get(const std::string& id) { return GetOk(*scheduler_, id); }

  void PutQueue(const std::string& name, int64_t nominal_h100) {
    grpc::ClientContext context;
    v1::PutQueueRequest request;
    request.mutable_queue()->set_name(name);
    request.mutable_queue()->set_weight(1);
    (*request.mutable_queue()->mutable_nominal_gpus())["H100"] = nominal_h100;
    v1::Queue response;
    ASSERT_TRUE(admin_->PutQueue(&context, request, &response).ok());
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::Scheduler::Stub> scheduler_;
  std::unique_ptr<v1::Admin::Stub> admin_;
};

TEST_F(PolicyTest, QuotaTakesEffectAtOnceAndShowsInListQueues) {
  PutQueue("a", 16);
  v1::Gang first = Submit(SubmitRequest("a", 2, 8));
  v1::Gang second = Submit(SubmitRequest("a", 1, 8));
  EXPECT_EQ(first.state(), v1::GANG_STATE_ADMITTED);
  EXPECT_EQ(second.state(), v1::GANG_STATE_PENDING);
  EXPECT_THAT(second.reason(), StartsWith("QUOTA: queue a would hold 8 H100"));
  grpc::ClientContext context;
  v1::ListQueuesResponse queues;
  ASSERT_TRUE(admin_->ListQueues(&context, {}, &queues).ok());
  EXPECT_EQ(queues.queues(0).name(), "a");
  EXPECT_EQ(queues.queues(0).status().held_gpus().at("H100"), 16);
  EXPECT_EQ(queues.queues(0).status().pending_gangs(), 1);
  EXPECT_GT(queues.queues(0).status().fair_share_score(), 0);
  // Raising the quota admits the waiting gang without a restart.
  PutQueue("a", 24);
  EXPECT_EQ(Get(second.id()).state(), v1::GANG_STATE_ADMITTED);
}

TEST_F(PolicyTest, PreemptionWaitsForTheAcknowledgementThenAdmits) {
  {
    grpc::ClientContext get_context;
    v1::Config config;
    ASSERT_TRUE(admin_->GetConfig(&get_context, {}, &config).ok());
    config.mutable_preemption()->set_enabled(true);
    config.mutable_preemption()->mutable_min_runtime()->set_seconds(0);
    config.mutable_preemption()->mutable_grace_period()->set_seconds(600);
    grpc::ClientContext context;
    v1::UpdateConfigRequest request;
    *request.mutable_config() = config;
    request.set_expected_version(config.version());
    v1::Config updated;
    ASSERT_TRUE(admin_->UpdateConfig(&context, request, &updated).ok());
    EXPECT_EQ(updated.version(), config.version() + 1);
  }
  v1::Gang low = Submit(SubmitRequest("a", 8, 8));
  ASSERT_EQ(low.state(), v1::GANG_STATE_ADMITTED);
  v1::Gang high = Submit(SubmitRequest("a", 2, 8, "rack"), /*priority=*/10);
  EXPECT_EQ(high.state(), v1::GANG_STATE_PENDING);
  EXPECT_THAT(high.reason(), HasSubstr("PREEMPTING: waiting for " + low.id()));
  EXPECT_EQ(Get(low.id()).state(), v1::GANG_STATE_PREEMPTING);

  grpc::ClientContext context;
  v1::ReportGangRequest ack;
  ack.set_gang_id(low.id());
  ack.set_preemption_acknowledged(true);
  v1::ReportGangResponse response;
  ASSERT_TRUE(scheduler_->ReportGang(&context, ack, &response).ok());
  EXPECT_EQ(response.gang().state(), v1::GANG_STATE_PENDING);
  EXPECT_EQ(Get(high.id()).state(), v1::GANG_STATE_ADMITTED);
  const std::string metrics = HttpGet(daemon_->metrics_port(), "/metrics");
  EXPECT_THAT(metrics,
              HasSubstr("phalanx_events_total{type=\"PREEMPTING\"} 1"));
}

}  // namespace
}  // namespace phalanx::testing
