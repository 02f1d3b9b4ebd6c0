// Elastic gangs over gRPC against a real phalanxd: admitted at the size
// that fits, grown when capacity frees, shrunk for a higher-priority
// arrival, every resize in a watch, and the size kept across a restart.
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon.h"

namespace phalanx::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The demo fleet (8 nodes of 8 GPUs) and queues; elastic gangs grow as soon
// as capacity frees and any gang that ran may be preempted.
std::unique_ptr<DaemonProcess> StartElasticDaemon() {
  auto daemon = std::make_unique<DaemonProcess>();
  const std::string config =
      R"({"topologyLevels":["block","rack"],"cycleInterval":"0.2s",)"
      R"("elastic":{"growInterval":"0s"},)"
      R"("preemption":{"minRuntime":"0s","gracePeriod":"60s"}})";
  daemon->AddArgs(
      {"--config=" + daemon->WriteFile("config.json", config),
       "--fleet=" + daemon->WriteFile("fleet.json", DemoFleetJson()),
       "--queues=" + daemon->WriteFile("queues.json", DemoQueuesJson())});
  return daemon;
}

class ElasticGangTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = StartElasticDaemon();
    ASSERT_TRUE(daemon_->Start()) << daemon_->output();
    scheduler_ = daemon_->Scheduler();
  }

  void Report(const std::string& id, v1::GangState state,
              bool acknowledge = false) {
    grpc::ClientContext context;
    v1::ReportGangRequest request;
    request.set_gang_id(id);
    if (state != v1::GANG_STATE_UNSPECIFIED) request.set_state(state);
    request.set_preemption_acknowledged(acknowledge);
    v1::ReportGangResponse response;
    const grpc::Status status =
        scheduler_->ReportGang(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  // The next event of `type` for gang `id` after `after`.
  v1::GangEvent Next(v1::EventType type, const std::string& id, int64_t after) {
    for (int i = 0; i < 20; ++i) {
      v1::GangEvent event = WaitForEvent(*scheduler_, type, after);
      if (event.revision() == 0 || event.gang().id() == id) return event;
      after = event.revision();
    }
    return {};
  }

  void ExpectGpusConsistent() {
    auto fleet = daemon_->Fleet();
    EXPECT_THAT(GpuHoldingProblems(*scheduler_, *fleet), ::testing::IsEmpty());
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::Scheduler::Stub> scheduler_;
};

v1::SubmitGangRequest ElasticRequest(int count, int min_count) {
  v1::SubmitGangRequest request = SubmitRequest("a", count, 8);
  request.mutable_spec()->mutable_pod_sets(0)->set_min_count(min_count);
  return request;
}

TEST_F(ElasticGangTest, AdmittedSmallGrowsThenShrinksForAHigherPriority) {
  const v1::Gang blocker = SubmitOk(*scheduler_, SubmitRequest("b", 6, 8));
  ASSERT_EQ(GetOk(*scheduler_, blocker.id()).state(), v1::GANG_STATE_ADMITTED);
  // Two nodes are free: the elastic gang starts on them.
  const v1::Gang elastic = SubmitOk(*scheduler_, ElasticRequest(4, 2));
  v1::Gang admitted = GetOk(*scheduler_, elastic.id());
  ASSERT_EQ(admitted.state(), v1::GANG_STATE_ADMITTED) << admitted.reason();
  ASSERT_EQ(admitted.placement_size(), 2);
  EXPECT_EQ(admitted.spec().pod_sets(0).min_count(), 2);
  Report(elastic.id(), v1::GANG_STATE_RUNNING);
  const int64_t running = GetOk(*scheduler_, elastic.id()).revision();

  // The blocker ends: it grows to its maximum.
  Report(blocker.id(), v1::GANG_STATE_SUCCEEDED);
  const v1::GangEvent grown =
      Next(v1::EVENT_TYPE_RESIZED, elastic.id(), running);
  ASSERT_GT(grown.revision(), 0) << "no RESIZED event";
  EXPECT_EQ(grown.gang().state(), v1::GANG_STATE_RUNNING);
  ASSERT_EQ(grown.gang().placement_size(), 4);
  for (int i = 0; i < 2; ++i) {  // the pods it had stay where they were
    EXPECT_EQ(grown.gang().placement(i).node(), admitted.placement(i).node());
  }
  EXPECT_EQ(grown.gang().resizes(), 1);
  EXPECT_TRUE(grown.gang().has_last_resize_time());
  ExpectGpusConsistent();

  // A higher-priority gang needs six nodes: the elastic gang shrinks to
  // its minimum rather than stopping.
  v1::SubmitGangRequest urgent_request = SubmitRequest("a", 6, 8);
  urgent_request.mutable_spec()->set_priority(5);
  const v1::Gang urgent = SubmitOk(*scheduler_, urgent_request);
  const v1::GangEvent preempting =
      Next(v1::EVENT_TYPE_PREEMPTING, elastic.id(), grown.revision());
  ASSERT_GT(preempting.revision(), 0) << "no PREEMPTING event";
  EXPECT_EQ(preempting.gang().shrink_to_count(), 2);
  EXPECT_THAT(preempting.gang().reason(), HasSubstr("shrinking to 2 pods"));
  EXPECT_TRUE(preempting.gang().has_grace_deadline());
  Report(elastic.id(), v1::GANG_STATE_UNSPECIFIED, /*acknowledge=*/true);
  const v1::GangEvent shrunk =
      Next(v1::EVENT_TYPE_RESIZED, elastic.id(), preempting.revision());
  ASSERT_GT(shrunk.revision(), 0) << "no RESIZED event after the shrink";
  EXPECT_EQ(shrunk.gang().state(), v1::GANG_STATE_RUNNING);
  ASSERT_EQ(shrunk.gang().placement_size(), 2);
  EXPECT_EQ(shrunk.gang().placement(0).index(), 0);
  EXPECT_EQ(shrunk.gang().placement(1).index(), 1);
  EXPECT_EQ(shrunk.gang().shrink_to_count(), 0);
  EXPECT_EQ(shrunk.gang().preemptions(), 0);
  const v1::GangEvent started =
      Next(v1::EVENT_TYPE_ADMITTED, urgent.id(), shrunk.revision());
  ASSERT_GT(started.revision(), 0) << "the urgent gang was not admitted";
  ExpectGpusConsistent();

  // A watch from the start shows each resize in order.
  std::vector<v1::EventType> types;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    v1::WatchGangsRequest request;
    request.set_after_revision(0);
    request.add_gang_ids(elastic.id());
    auto reader = scheduler_->WatchGangs(&context, request);
    v1::GangEvent event;
    while (reader->Read(&event)) {
      if (event.type() != v1::EVENT_TYPE_BOOKMARK)
        types.push_back(event.type());
      if (event.revision() >= shrunk.revision()) break;
    }
    context.TryCancel();
  }
  EXPECT_THAT(types,
              ElementsAre(v1::EVENT_TYPE_SUBMITTED, v1::EVENT_TYPE_ADMITTED,
                          v1::EVENT_TYPE_RUNNING, v1::EVENT_TYPE_RESIZED,
                          v1::EVENT_TYPE_PREEMPTING, v1::EVENT_TYPE_RESIZED));

  // The size survives a restart.
  ASSERT_EQ(daemon_->Terminate(), 0);
  ASSERT_TRUE(daemon_->Start()) << daemon_->output();
  scheduler_ = daemon_->Scheduler();
  const v1::Gang restored = GetOk(*scheduler_, elastic.id());
  EXPECT_EQ(restored.state(), v1::GANG_STATE_RUNNING);
  EXPECT_EQ(restored.placement_size(), 2);
  EXPECT_EQ(restored.resizes(), 2);
  ExpectGpusConsistent();
}

TEST_F(ElasticGangTest, BadMinimumIsRefusedNamingTheField) {
  grpc::ClientContext context;
  v1::SubmitGangResponse response;
  const grpc::Status status =
      scheduler_->SubmitGang(&context, ElasticRequest(4, 6), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("spec.pod_sets[0].min_count: must be 0 (fixed size) "
                        "or in 1..count (4), not 6"));
}

}  // namespace
}  // namespace phalanx::testing
