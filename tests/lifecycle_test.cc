// Submit, admit, cancel, report and the fleet/admin RPCs against a real
// phalanxd.
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon.h"

namespace phalanx::testing {
namespace {

using ::testing::HasSubstr;

class LifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = StartDemoDaemon();
    ASSERT_TRUE(daemon_->Start()) << daemon_->output();
    scheduler_ = daemon_->Scheduler();
  }

  v1::Gang Submit(const v1::SubmitGangRequest& request) {
    return SubmitOk(*scheduler_, request);
  }

  v1::Gang Get(const std::string& id) { return GetOk(*scheduler_, id); }

  grpc::Status Cancel(const std::string& id) {
    grpc::ClientContext context;
    v1::CancelGangRequest request;
    request.set_gang_id(id);
    v1::CancelGangResponse response;
    return scheduler_->CancelGang(&context, request, &response);
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::Scheduler::Stub> scheduler_;
};

// Node ids are "node-<block><rack><n>": the rack is the first two digits.
std::string RackOf(const std::string& node) { return node.substr(5, 2); }

TEST_F(LifecycleTest, SubmitIsAdmittedWithARackAndDistinctGpus) {
  v1::Gang gang = Submit(SubmitRequest("a", 4, 4, "rack"));
  EXPECT_EQ(gang.id(), "g-000001");
  // The reply already carries the admission of the batch's cycle.
  EXPECT_EQ(gang.state(), v1::GANG_STATE_ADMITTED);
  EXPECT_EQ(gang.placement_size(), 4);
  v1::Gang admitted = Get(gang.id());  // and reads see it
  ASSERT_EQ(admitted.state(), v1::GANG_STATE_ADMITTED) << admitted.reason();
  ASSERT_EQ(admitted.placement_size(), 4);
  std::set<std::string> racks;
  std::set<std::pair<std::string, int>> gpus;
  for (const v1::PodPlacement& pod : admitted.placement()) {
    racks.insert(RackOf(pod.node()));
    EXPECT_EQ(pod.gpu_indices_size(), 4);
    for (int gpu : pod.gpu_indices()) {
      EXPECT_TRUE(gpus.insert({pod.node(), gpu}).second) << pod.node() << gpu;
    }
  }
  EXPECT_EQ(racks.size(), 1u);
}

TEST_F(LifecycleTest, SlicesAndGroupsArePlacedAsAsked) {
  // 4 pods in one block, in slices of 2 per rack: 2 + 2 over its racks.
  v1::SubmitGangRequest sliced = SubmitRequest("a", 4, 8, "block");
  sliced.mutable_spec()->mutable_pod_sets(0)->mutable_slice()->set_size(2);
  sliced.mutable_spec()->mutable_pod_sets(0)->mutable_slice()->set_level(
      "rack");
  v1::Gang gang = Submit(sliced);
  ASSERT_EQ(gang.state(), v1::GANG_STATE_ADMITTED) << gang.reason();
  std::map<std::string, int> per_rack;
  for (const v1::PodPlacement& pod : gang.placement()) {
    per_rack[RackOf(pod.node())]++;
  }
  EXPECT_EQ(per_rack.size(), 2u);
  for (const auto& [rack, pods] : per_rack) EXPECT_EQ(pods, 2) << rack;
  // Two pod sets tied by a group land in one rack.
  v1::SubmitGangRequest grouped = SubmitRequest("a", 1, 8, "rack");
  v1::PodSet* server = grouped.mutable_spec()->add_pod_sets();
  *server = grouped.spec().pod_sets(0);
  server->set_name("server");
  server->set_gpus(4);
  grouped.mutable_spec()->mutable_pod_sets(0)->set_group("job");
  server->set_group("job");
  v1::Gang pair = Submit(grouped);
  ASSERT_EQ(pair.state(), v1::GANG_STATE_ADMITTED) << pair.reason();
  ASSERT_EQ(pair.placement_size(), 2);
  EXPECT_EQ(RackOf(pair.placement(0).node()), RackOf(pair.placement(1).node()));
}

TEST_F(LifecycleTest, TooBigGangWaitsWholeUntilCancelFreesRoom) {
  v1::Gang first = Submit(SubmitRequest("a", 6, 8));
  ASSERT_EQ(Get(first.id()).state(), v1::GANG_STATE_ADMITTED);
  v1::Gang big = Submit(SubmitRequest("b", 3, 8, "block"));
  v1::Gang waiting = Get(big.id());
  EXPECT_EQ(waiting.state(), v1::GANG_STATE_PENDING);
  EXPECT_EQ(waiting.placement_size(), 0);
  // The first gang holds b0 and half of b1: b1 needs less released.
  EXPECT_EQ(
      waiting.reason(),
      "RESERVED: 3 nodes in b1 are held for it until 16 GPUs are released "
      "(NO_FIT at "
      "level block: largest free block fits 2 of 3 pods)");
  {
    grpc::ClientContext context;
    v1::ExplainGangRequest request;
    request.set_gang_id(big.id());
    v1::ExplainGangResponse response;
    ASSERT_TRUE(scheduler_->ExplainGang(&context, request, &response).ok());
    EXPECT_EQ(response.position(), 1);
    EXPECT_THAT(response.reason(), HasSubstr("NO_FIT"));
    EXPECT_EQ(response.reserved_domain(), "b1");
  }
  ASSERT_TRUE(Cancel(first.id()).ok());
  v1::Gang admitted = Get(big.id());
  EXPECT_EQ(admitted.state(), v1::GANG_STATE_ADMITTED);
  EXPECT_EQ(admitted.placement_size(), 3);
}

TEST_F(LifecycleTest, ReportsMoveTheGangAndReleaseGpus) {
  v1::Gang gang = Submit(SubmitRequest("a", 8, 8));
  v1::ReportGangRequest report;
  report.set_gang_id(gang.id());
  report.set_state(v1::GANG_STATE_RUNNING);
  {
    grpc::ClientContext context;
    v1::ReportGangResponse response;
    ASSERT_TRUE(scheduler_->ReportGang(&context, report, &response).ok());
    EXPECT_EQ(response.gang().state(), v1::GANG_STATE_RUNNING);
  }
  v1::Gang next = Submit(SubmitRequest("b", 1, 8));
  EXPECT_EQ(Get(next.id()).state(), v1::GANG_STATE_PENDING);
  report.set_state(v1::GANG_STATE_SUCCEEDED);
  {
    grpc::ClientContext context;
    v1::ReportGangResponse response;
    ASSERT_TRUE(scheduler_->ReportGang(&context, report, &response).ok());
    EXPECT_EQ(response.gang().state(), v1::GANG_STATE_SUCCEEDED);
  }
  EXPECT_EQ(Get(next.id()).state(), v1::GANG_STATE_ADMITTED);
  // A RUNNING report on a finished gang is refused.
  report.set_state(v1::GANG_STATE_RUNNING);
  grpc::ClientContext context;
  v1::ReportGangResponse response;
  EXPECT_EQ(scheduler_->ReportGang(&context, report, &response).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(LifecycleTest, ListGangsPagesAndFilters) {
  for (int i = 0; i < 5; ++i) Submit(SubmitRequest(i % 2 ? "a" : "b", 1, 1));
  v1::ListGangsRequest request;
  request.set_queue("b");
  request.set_page_size(2);
  std::vector<std::string> ids;
  do {
    grpc::ClientContext context;
    v1::ListGangsResponse response;
    ASSERT_TRUE(scheduler_->ListGangs(&context, request, &response).ok());
    EXPECT_GT(response.revision(), 0);
    for (const v1::Gang& gang : response.gangs()) ids.push_back(gang.id());
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  EXPECT_EQ(ids,
            (std::vector<std::string>{"g-000001", "g-000003", "g-000005"}));
}

TEST_F(LifecycleTest, DryRunPlacesWithoutStoring) {
  grpc::ClientContext context;
  v1::DryRunGangRequest request;
  *request.mutable_spec() = SubmitRequest("a", 2, 8, "rack").spec();
  v1::DryRunGangResponse response;
  ASSERT_TRUE(scheduler_->DryRunGang(&context, request, &response).ok());
  EXPECT_TRUE(response.fits());
  EXPECT_EQ(response.placement_size(), 2);
  grpc::ClientContext list_context;
  v1::ListGangsResponse list;
  ASSERT_TRUE(scheduler_->ListGangs(&list_context, {}, &list).ok());
  EXPECT_EQ(list.gangs_size(), 0);
}

// More on node failure and drains: node_failure_test.cc.
TEST_F(LifecycleTest, UnhealthyNodeRepairsTheGangElsewhere) {
  v1::Gang gang = Submit(SubmitRequest("a", 1, 8));
  const std::string node = Get(gang.id()).placement(0).node();
  auto fleet = daemon_->Fleet();
  grpc::ClientContext context;
  v1::SetNodeStateRequest request;
  request.set_node_id(node);
  request.set_state(v1::NODE_STATE_UNHEALTHY);
  v1::SetNodeStateResponse response;
  ASSERT_TRUE(fleet->SetNodeState(&context, request, &response).ok());
  v1::Gang moved = Get(gang.id());
  EXPECT_EQ(moved.state(), v1::GANG_STATE_ADMITTED);
  EXPECT_NE(moved.placement(0).node(), node);
  EXPECT_EQ(moved.attempts(), 1);  // repaired in place, never requeued
}

TEST_F(LifecycleTest, TopologyQueuesConfigAndMetricsAreServed) {
  Submit(SubmitRequest("a", 1, 4));
  auto fleet = daemon_->Fleet();
  {
    grpc::ClientContext context;
    v1::GetTopologyResponse response;
    ASSERT_TRUE(fleet->GetTopology(&context, {}, &response).ok());
    EXPECT_EQ(response.domains_size(), 6);  // 2 blocks + 4 racks
    EXPECT_DOUBLE_EQ(response.node_fragmentation(), 4.0 / 60.0);
  }
  auto admin = daemon_->Admin();
  {
    grpc::ClientContext context;
    v1::ListQueuesResponse response;
    ASSERT_TRUE(admin->ListQueues(&context, {}, &response).ok());
    ASSERT_EQ(response.queues_size(), 2);
    EXPECT_EQ(response.queues(0).status().held_gpus().at("H100"), 4);
  }
  {
    grpc::ClientContext get_context;
    v1::Config config;
    ASSERT_TRUE(admin->GetConfig(&get_context, {}, &config).ok());
    grpc::ClientContext context;
    v1::UpdateConfigRequest request;
    *request.mutable_config() = config;
    request.set_expected_version(config.version() + 7);
    v1::Config updated;
    EXPECT_EQ(admin->UpdateConfig(&context, request, &updated).error_code(),
              grpc::StatusCode::ABORTED);
  }
  const std::string metrics = HttpGet(daemon_->metrics_port(), "/metrics");
  EXPECT_THAT(metrics, HasSubstr("phalanx_rpc_seconds"));
  EXPECT_THAT(metrics, HasSubstr("phalanx_storage_commit_seconds"));
  EXPECT_THAT(metrics, HasSubstr("phalanx_gpus{"));
}

// Sums the values of the /metrics lines that start with `prefix`; -1 when
// there are none.
double MetricSum(const std::string& metrics, const std::string& prefix) {
  double sum = -1;
  std::istringstream lines(metrics);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with(prefix)) continue;
    sum = std::max(sum, 0.0) + std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

TEST_F(LifecycleTest, GaugesCatchUpWhenTheCommandsStop) {
  const std::string pending = "phalanx_gangs{queue=\"a\",state=\"PENDING\"}";
  const std::string reasons = "phalanx_pending_gangs_by_reason{";
  std::string metrics = HttpGet(daemon_->metrics_port(), "/metrics");
  EXPECT_EQ(MetricSum(metrics, "phalanx_events_total{type=\"REPAIRED\"}"), 0);
  // Polls /metrics (bounded) until `done` holds.
  auto await = [&](const std::function<bool()>& done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    do {
      absl::SleepFor(absl::Milliseconds(200));
      metrics = HttpGet(daemon_->metrics_port(), "/metrics");
    } while (!done() && absl::Now() < deadline);
  };
  Submit(SubmitRequest("a", 8, 8));  // the whole fleet
  v1::Gang waiting = Submit(SubmitRequest("a", 1, 8));
  ASSERT_EQ(waiting.state(), v1::GANG_STATE_PENDING);
  // No more commands: idle timer cycles refresh the gauges within ~1 s.
  await([&] { return MetricSum(metrics, pending) == 1; });
  ASSERT_EQ(MetricSum(metrics, pending), 1) << metrics;
  ASSERT_EQ(MetricSum(metrics, reasons), 1) << metrics;
  ASSERT_TRUE(Cancel(waiting.id()).ok());
  // Gone label sets go to 0 rather than keep their last value.
  await([&] {
    return MetricSum(metrics, pending) == 0 && MetricSum(metrics, reasons) == 0;
  });
  EXPECT_EQ(MetricSum(metrics, pending), 0) << metrics;
  EXPECT_EQ(MetricSum(metrics, reasons), 0) << metrics;
}

TEST_F(LifecycleTest, SigtermExitsZeroWithAWatchOpen) {
  grpc::ClientContext context;
  v1::WatchGangsRequest request;
  auto reader = scheduler_->WatchGangs(&context, request);
  Submit(SubmitRequest("a", 1, 1));
  v1::GangEvent event;
  ASSERT_TRUE(reader->Read(&event));
  // Keep reading, as a launcher would, while the daemon stops.
  v1::GangEvent last = event;
  grpc::Status end;
  std::thread drain([&] {
    v1::GangEvent next;
    while (reader->Read(&next)) last = next;
    end = reader->Finish();
  });
  EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->output();
  drain.join();
  EXPECT_EQ(end.error_code(), grpc::StatusCode::UNAVAILABLE);
  // The stream ends with a bookmark: where to resume. It covers what this
  // stream delivered (revision 1 at least), never more than was written
  // (the ADMITTED event, revision 2, unless the stream had not loaded it).
  EXPECT_EQ(last.type(), v1::EVENT_TYPE_BOOKMARK);
  EXPECT_GE(last.revision(), event.revision());
  EXPECT_LE(last.revision(), 2);
  EXPECT_THAT(daemon_->output(), HasSubstr("stopped in"));
}

TEST_F(LifecycleTest, SigtermExitsZeroWithAWatchNobodyReads) {
  grpc::ClientContext context;
  v1::WatchGangsRequest request;
  request.set_after_revision(0);
  auto reader = scheduler_->WatchGangs(&context, request);
  for (int i = 0; i < 5; ++i) Submit(SubmitRequest("a", 1, 1));
  // The client never reads nor finishes its stream.
  EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->output();
  EXPECT_THAT(daemon_->output(), HasSubstr("stopped in"));
  context.TryCancel();
}

}  // namespace
}  // namespace phalanx::testing
