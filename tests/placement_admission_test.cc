// Placement and admission through the real daemon: joint placement of several
// pod sets (submit, DryRunGang and ExplainGang agree), no phantom reservation,
// admission.accept_unfit_gangs with a re-check when nodes are added, and a
// retried submit after retention let the gang go.
#include <chrono>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon.h"

namespace phalanx::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Nodes of `gpus[i]` H100 GPUs, all in block b0, rack b0-r0.
std::string OneRackFleetJson(const std::vector<int>& gpus) {
  std::string nodes;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (!nodes.empty()) nodes += ",";
    nodes +=
        absl::StrFormat(R"({"id":"host-%d","gpuModel":"H100","gpuCount":%d,)"
                        R"("labels":{"block":"b0","rack":"b0-r0"}})",
                        static_cast<int>(i), gpus[i]);
  }
  return absl::StrCat(R"({"nodes":[)", nodes, "]}");
}

std::unique_ptr<DaemonProcess> StartDaemon(const std::vector<int>& gpus,
                                           const std::string& config_extra) {
  auto daemon = std::make_unique<DaemonProcess>();
  daemon->AddArgs(
      {"--config=" +
           daemon->WriteFile(
               "config.json",
               absl::StrCat(R"({"topologyLevels":["block","rack"],)",
                            R"("cycleInterval":"0.2s")", config_extra, "}")),
       "--fleet=" + daemon->WriteFile("fleet.json", OneRackFleetJson(gpus)),
       "--queues=" + daemon->WriteFile("queues.json", DemoQueuesJson())});
  return daemon;
}

// A leader-then-workers gang: a 1-GPU leader listed first, 14 one-GPU workers
// in slices of 2 per node, grouped at rack level.
v1::SubmitGangRequest LeaderThenWorkers() {
  v1::SubmitGangRequest request;
  request.mutable_spec()->set_queue("a");
  v1::PodSet* leader = request.mutable_spec()->add_pod_sets();
  leader->set_name("leader");
  leader->set_count(1);
  leader->set_gpus(1);
  leader->mutable_topology()->set_mode(v1::TOPOLOGY_MODE_REQUIRED);
  leader->mutable_topology()->set_level("rack");
  leader->set_group("g");
  v1::PodSet* workers = request.mutable_spec()->add_pod_sets();
  workers->set_name("workers");
  workers->set_count(14);
  workers->set_gpus(1);
  workers->mutable_topology()->set_mode(v1::TOPOLOGY_MODE_REQUIRED);
  workers->mutable_topology()->set_level("rack");
  workers->mutable_slice()->set_size(2);
  workers->mutable_slice()->set_level("node");
  workers->set_group("g");
  return request;
}

std::map<std::string, int> PodsPerNode(
    const google::protobuf::RepeatedPtrField<v1::PodPlacement>& pods,
    const std::string& pod_set) {
  std::map<std::string, int> nodes;
  for (const v1::PodPlacement& pod : pods) {
    if (pod.pod_set() == pod_set) nodes[pod.node()]++;
  }
  return nodes;
}

// Polls GetGang until the gang is in `state` (at most 50 tries).
v1::Gang WaitForState(v1::Scheduler::Stub& stub, const std::string& id,
                      v1::GangState state) {
  v1::Gang gang;
  for (int attempt = 0; attempt < 50; ++attempt) {
    gang = GetOk(stub, id);
    if (gang.state() == state) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return gang;
}

TEST(DaemonPlacementTest, LeaderListedFirstIsAdmittedAndDryRunAndExplainAgree) {
  auto daemon = StartDaemon({4, 6, 5}, "");
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  auto scheduler = daemon->Scheduler();
  v1::DryRunGangRequest dry;
  *dry.mutable_spec() = LeaderThenWorkers().spec();
  {
    grpc::ClientContext context;
    v1::DryRunGangResponse response;
    ASSERT_TRUE(scheduler->DryRunGang(&context, dry, &response).ok());
    ASSERT_TRUE(response.fits()) << response.reason();
    EXPECT_EQ(PodsPerNode(response.placement(), "leader"),
              (std::map<std::string, int>{{"host-2", 1}}));
  }
  v1::Gang gang = SubmitOk(*scheduler, LeaderThenWorkers());
  gang = WaitForState(*scheduler, gang.id(), v1::GANG_STATE_ADMITTED);
  ASSERT_EQ(gang.state(), v1::GANG_STATE_ADMITTED) << gang.reason();
  EXPECT_EQ(PodsPerNode(gang.placement(), "leader"),
            (std::map<std::string, int>{{"host-2", 1}}));
  EXPECT_EQ(PodsPerNode(gang.placement(), "workers"),
            (std::map<std::string, int>{
                {"host-0", 4}, {"host-1", 6}, {"host-2", 4}}));
  // The fleet is full now: the same gang again waits, and DryRunGang and
  // ExplainGang give the same joint reason.
  v1::Gang second = SubmitOk(*scheduler, LeaderThenWorkers());
  EXPECT_EQ(second.state(), v1::GANG_STATE_PENDING);
  grpc::ClientContext dry_context;
  v1::DryRunGangResponse again;
  ASSERT_TRUE(scheduler->DryRunGang(&dry_context, dry, &again).ok());
  EXPECT_FALSE(again.fits());
  EXPECT_THAT(again.reason(), StartsWith("NO_FIT"));
  grpc::ClientContext explain_context;
  v1::ExplainGangRequest explain;
  explain.set_gang_id(second.id());
  v1::ExplainGangResponse why;
  ASSERT_TRUE(scheduler->ExplainGang(&explain_context, explain, &why).ok());
  EXPECT_THAT(why.reason(), HasSubstr(again.reason()));
}

// A gang whose pod sets each fit the fleet but never together: once
// accepted with a phantom reservation ("until 0 GPUs are released") that
// kept a 1-GPU gang off a free fleet. Now it is refused at submit, or with
// accept_unfit_gangs waits as NEVER_FITS, reserving nothing.
v1::SubmitGangRequest WholeNodePlusOne() {
  v1::SubmitGangRequest request = SubmitRequest("a", 1, 8);
  v1::PodSet* extra = request.mutable_spec()->add_pod_sets();
  extra->set_name("sidecar");
  extra->set_count(1);
  extra->set_gpus(1);
  return request;
}

TEST(DaemonPlacementTest, NoPhantomReservationKeepsAOneGpuGangOffAFreeFleet) {
  auto daemon = StartDaemon({8}, "");
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  auto scheduler = daemon->Scheduler();
  {
    grpc::ClientContext context;
    v1::SubmitGangResponse response;
    grpc::Status status =
        scheduler->SubmitGang(&context, WholeNodePlusOne(), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(status.error_message(), HasSubstr("can never fit"));
  }
  v1::SubmitGangRequest small = SubmitRequest("a", 1, 1);
  small.mutable_spec()->mutable_estimated_runtime()->set_seconds(60);
  v1::Gang gang = SubmitOk(*scheduler, small);
  gang = WaitForState(*scheduler, gang.id(), v1::GANG_STATE_ADMITTED);
  EXPECT_EQ(gang.state(), v1::GANG_STATE_ADMITTED) << gang.reason();
}

TEST(DaemonPlacementTest, AcceptUnfitGangsWaitsAsNeverFitsUntilNodesAreAdded) {
  auto daemon = StartDaemon({8}, R"(,"admission":{"acceptUnfitGangs":true})");
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  auto scheduler = daemon->Scheduler();
  v1::Gang big = SubmitOk(*scheduler, SubmitRequest("a", 1, 16));
  EXPECT_EQ(big.state(), v1::GANG_STATE_PENDING);
  EXPECT_THAT(big.reason(),
              StartsWith("NEVER_FITS: the largest node has 8 GPUs; a pod "
                         "needs 16"));
  v1::Gang unfit = SubmitOk(*scheduler, WholeNodePlusOne());
  EXPECT_THAT(unfit.reason(), StartsWith("NEVER_FITS: "));
  // Neither reserves: a 1-GPU gang with a 60 s estimate is admitted.
  v1::SubmitGangRequest small = SubmitRequest("b", 1, 1);
  small.mutable_spec()->mutable_estimated_runtime()->set_seconds(60);
  v1::Gang gang = SubmitOk(*scheduler, small);
  gang = WaitForState(*scheduler, gang.id(), v1::GANG_STATE_ADMITTED);
  EXPECT_EQ(gang.state(), v1::GANG_STATE_ADMITTED) << gang.reason();
  {
    grpc::ClientContext context;
    v1::ExplainGangRequest request;
    request.set_gang_id(big.id());
    v1::ExplainGangResponse why;
    ASSERT_TRUE(scheduler->ExplainGang(&context, request, &why).ok());
    EXPECT_THAT(why.reason(), StartsWith("NEVER_FITS: "));
    EXPECT_TRUE(why.reserved_domain().empty());
  }
  // A 16-GPU node arrives: the gang is checked again and admitted.
  auto fleet = daemon->Fleet();
  grpc::ClientContext context;
  v1::UpsertNodesRequest upsert;
  v1::Node* node = upsert.add_nodes();
  node->set_id("host-big");
  node->set_gpu_model("H100");
  node->set_gpu_count(16);
  (*node->mutable_labels())["block"] = "b0";
  (*node->mutable_labels())["rack"] = "b0-r1";
  v1::UpsertNodesResponse upserted;
  ASSERT_TRUE(fleet->UpsertNodes(&context, upsert, &upserted).ok());
  big = WaitForState(*scheduler, big.id(), v1::GANG_STATE_ADMITTED);
  EXPECT_EQ(big.state(), v1::GANG_STATE_ADMITTED) << big.reason();
  EXPECT_EQ(big.placement(0).node(), "host-big");
}

TEST(DaemonPlacementTest, RetriedSubmitAfterRetentionReturnsTheOriginalGang) {
  auto daemon = StartDaemon({8}, R"(,"retention":{"finishedGangs":"1"})");
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  auto scheduler = daemon->Scheduler();
  v1::Gang first = SubmitOk(*scheduler, SubmitRequest("a", 1, 8, "", "r-1"));
  first = WaitForState(*scheduler, first.id(), v1::GANG_STATE_ADMITTED);
  ASSERT_EQ(first.state(), v1::GANG_STATE_ADMITTED);
  {
    grpc::ClientContext context;
    v1::ReportGangRequest report;
    report.set_gang_id(first.id());
    report.set_state(v1::GANG_STATE_SUCCEEDED);
    v1::ReportGangResponse response;
    ASSERT_TRUE(scheduler->ReportGang(&context, report, &response).ok());
  }
  // A second finished gang pushes the first out of retention (1 kept).
  v1::Gang second = SubmitOk(*scheduler, SubmitRequest("a", 1, 8));
  second = WaitForState(*scheduler, second.id(), v1::GANG_STATE_ADMITTED);
  {
    grpc::ClientContext context;
    v1::CancelGangRequest cancel;
    cancel.set_gang_id(second.id());
    v1::CancelGangResponse response;
    ASSERT_TRUE(scheduler->CancelGang(&context, cancel, &response).ok());
  }
  // Let a few cycles apply retention, then retry the first submit.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  v1::Gang retried = SubmitOk(*scheduler, SubmitRequest("a", 1, 8, "", "r-1"));
  EXPECT_EQ(retried.id(), first.id());
  EXPECT_EQ(retried.state(), v1::GANG_STATE_SUCCEEDED);
  // Its last placement is kept, released.
  ASSERT_EQ(retried.placement_size(), 1);
  EXPECT_EQ(retried.placement(0).node(), "host-0");
  EXPECT_TRUE(retried.placement_released());
  const v1::Gang got = GetOk(*scheduler, first.id());
  EXPECT_EQ(got.state(), v1::GANG_STATE_SUCCEEDED);
  // Released placements hold nothing: a whole-node gang is admitted.
  v1::Gang third = SubmitOk(*scheduler, SubmitRequest("b", 1, 8));
  third = WaitForState(*scheduler, third.id(), v1::GANG_STATE_ADMITTED);
  EXPECT_EQ(third.state(), v1::GANG_STATE_ADMITTED) << third.reason();
}

}  // namespace
}  // namespace phalanx::testing
