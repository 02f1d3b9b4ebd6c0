// phalanx-node-agent against a real phalanxd: heartbeats, and a fake
// health command that first reports GPU 3 of node-000 bad and then all
// good. Placement avoids GPU 3 while it is bad, the metrics count it
// unhealthy, and it is handed out again once the agent clears it.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <regex>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/auth_client.h"
#include "tests/child_process.h"
#include "tests/daemon.h"

namespace phalanx::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kAdmin = "admin-token-0123456789";
const std::string kAgent = "agent-token-0123456789";

class NodeAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = StartDemoDaemon();
    daemon_->AddArgs(
        {"--auth=" + daemon_->WriteFile(
                         "auth.json",
                         AuthJson({PrincipalJson("ops", kAdmin, {"ROLE_ADMIN"}),
                                   PrincipalJson("agent-000", kAgent,
                                                 {"ROLE_NODE_AGENT"})}))});
    ASSERT_TRUE(daemon_->Start()) << daemon_->output();
    scheduler_ = daemon_->Scheduler();
    fleet_ = daemon_->Fleet();
    health_file_ = daemon_->WriteFile("health.txt", "");
  }

  void TearDown() override {
    if (agent_.Running()) {
      EXPECT_EQ(agent_.Stop(absl::Seconds(10)), 0);
    }
  }

  // What the fake health command prints next.
  void SetHealthOutput(const std::string& text) {
    std::ofstream(health_file_ + ".new") << text;
    std::rename((health_file_ + ".new").c_str(), health_file_.c_str());
  }

  bool StartAgent() {
    ChildOptions options;
    options.args = {PHALANX_NODE_AGENT_PATH,
                    "--server",
                    daemon_->address(),
                    "--node-id",
                    "node-000",
                    "--token-file",
                    daemon_->WriteFile("agent.token", kAgent + "\n"),
                    "--health-command",
                    "cat " + health_file_,
                    "--health-interval",
                    "100ms",
                    "--heartbeat-interval",
                    "100ms",
                    "--passes-to-recover",
                    "2"};
    options.output_path = daemon_->data_dir() + "/../agent.log";
    return agent_.Start(options);
  }

  // Whether `node` heard a heartbeat after `since`.
  static bool HeardSince(const v1::Node& node, absl::Time since) {
    return node.has_last_heartbeat() &&
           absl::FromUnixSeconds(node.last_heartbeat().seconds()) +
                   absl::Nanoseconds(node.last_heartbeat().nanos()) >
               since;
  }

  v1::Node Node000() {
    v1::ListNodesResponse response;
    auto context = WithToken(kAdmin);
    EXPECT_TRUE(fleet_->ListNodes(context.get(), {}, &response).ok());
    for (const v1::Node& node : response.nodes()) {
      if (node.id() == "node-000") return node;
    }
    ADD_FAILURE() << "no node-000";
    return v1::Node();
  }

  // Polls node-000 until `ready` holds, at most 20 s.
  bool WaitForNode(const std::function<bool(const v1::Node&)>& ready) {
    return agent_.WaitUntil([&] { return ready(Node000()); }, absl::Seconds(20),
                            absl::Milliseconds(50));
  }

  v1::Gang Submit(int pods) {
    v1::SubmitGangResponse response;
    auto context = WithToken(kAdmin);
    const grpc::Status status = scheduler_->SubmitGang(
        context.get(), SubmitRequest("a", pods, 1), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.gang();
  }

  v1::Gang Get(const std::string& id) {
    v1::GetGangRequest request;
    request.set_gang_id(id);
    v1::GetGangResponse response;
    auto context = WithToken(kAdmin);
    EXPECT_TRUE(scheduler_->GetGang(context.get(), request, &response).ok());
    return response.gang();
  }

  std::string UnhealthyGpusMetric() {
    const std::string body = HttpGet(daemon_->metrics_port(), "/metrics");
    std::smatch match;
    static const std::regex kLine(
        R"re(phalanx_gpus\{[^}]*state="unhealthy"[^}]*\} (\S+))re");
    return std::regex_search(body, match, kLine) ? match[1].str() : "";
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::Scheduler::Stub> scheduler_;
  std::unique_ptr<v1::Fleet::Stub> fleet_;
  std::string health_file_;
  ChildProcess agent_;
};

TEST_F(NodeAgentTest, ReportsAndClearsAGpuFault) {
  SetHealthOutput("gpu 3 unhealthy XID 79\n");
  const absl::Time start = absl::Now();
  ASSERT_TRUE(StartAgent());
  ASSERT_TRUE(WaitForNode([start](const v1::Node& node) {
    return node.unhealthy_gpus_size() == 1 && HeardSince(node, start);
  })) << agent_.Output();
  v1::Node node = Node000();
  EXPECT_THAT(node.unhealthy_gpus(), ElementsAre(3));
  EXPECT_EQ(node.unhealthy_gpus_reason(), "GPU 3: XID 79");
  EXPECT_EQ(node.state(), v1::NODE_STATE_READY);
  // The gauges are recomputed at most once a second.
  EXPECT_TRUE(agent_.WaitUntil([&] { return UnhealthyGpusMetric() == "1"; },
                               absl::Seconds(20), absl::Milliseconds(100)))
      << UnhealthyGpusMetric();

  // 8 nodes of 8 GPUs, one bad: a gang of 63 one-GPU pods takes every other
  // GPU, never GPU 3 of node-000; one more pod waits.
  const v1::Gang all = Submit(63);
  ASSERT_EQ(all.state(), v1::GANG_STATE_ADMITTED);
  for (const v1::PodPlacement& pod : all.placement()) {
    if (pod.node() == "node-000") {
      EXPECT_THAT(pod.gpu_indices(), Not(::testing::Contains(3)));
    }
  }
  const v1::Gang waiting = Submit(1);
  EXPECT_EQ(waiting.state(), v1::GANG_STATE_PENDING);

  // The fault clears: after two passing checks the GPU is handed out.
  SetHealthOutput("");
  ASSERT_TRUE(WaitForNode([](const v1::Node& node) {
    return node.unhealthy_gpus_size() == 0;
  })) << agent_.Output();
  ASSERT_TRUE(agent_.WaitUntil(
      [&] { return Get(waiting.id()).state() == v1::GANG_STATE_ADMITTED; },
      absl::Seconds(20), absl::Milliseconds(50)));
  const v1::Gang admitted = Get(waiting.id());
  ASSERT_EQ(admitted.placement_size(), 1);
  EXPECT_EQ(admitted.placement(0).node(), "node-000");
  EXPECT_THAT(admitted.placement(0).gpu_indices(), ElementsAre(3));
  EXPECT_TRUE(agent_.WaitUntil([&] { return UnhealthyGpusMetric() == "0"; },
                               absl::Seconds(20), absl::Milliseconds(100)))
      << UnhealthyGpusMetric();
  EXPECT_THAT(agent_.Output(), HasSubstr("unhealthy GPUs [3]"));
  EXPECT_THAT(agent_.Output(), Not(HasSubstr(kAgent)));
}

TEST_F(NodeAgentTest, AFailedCheckMakesTheNodeUnhealthyUntilItPasses) {
  SetHealthOutput("");
  const absl::Time start = absl::Now();
  ASSERT_TRUE(StartAgent());
  ASSERT_TRUE(WaitForNode(
      [start](const v1::Node& node) { return HeardSince(node, start); }));
  // The health command fails as a whole: cat of a missing file.
  std::remove(health_file_.c_str());
  ASSERT_TRUE(WaitForNode([](const v1::Node& node) {
    return node.state() == v1::NODE_STATE_UNHEALTHY;
  })) << agent_.Output();
  EXPECT_EQ(Node000().state_source(), v1::NODE_STATE_SOURCE_NODE_AGENT);
  EXPECT_THAT(Node000().state_reason(), HasSubstr("health command exited 1"));
  SetHealthOutput("");
  ASSERT_TRUE(WaitForNode([](const v1::Node& node) {
    return node.state() == v1::NODE_STATE_READY;
  })) << agent_.Output();

  // An operator's cordon is never undone, however the checks go.
  v1::SetNodeStateRequest cordon;
  cordon.set_node_id("node-000");
  cordon.set_state(v1::NODE_STATE_CORDONED);
  v1::SetNodeStateResponse response;
  auto context = WithToken(kAdmin);
  ASSERT_TRUE(fleet_->SetNodeState(context.get(), cordon, &response).ok());
  std::remove(health_file_.c_str());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  SetHealthOutput("");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(Node000().state(), v1::NODE_STATE_CORDONED);
  EXPECT_EQ(Node000().state_source(), v1::NODE_STATE_SOURCE_OPERATOR);
}

TEST_F(NodeAgentTest, WithoutAHealthCommandItHeartbeatsAndStopsOnSigterm) {
  ChildOptions options;
  options.args = {PHALANX_NODE_AGENT_PATH,
                  "--server",
                  daemon_->address(),
                  "--node-id",
                  "node-001",
                  "--token-file",
                  daemon_->WriteFile("agent.token", kAgent),
                  "--health-command",
                  "none",
                  "--heartbeat-interval",
                  "100ms"};
  options.output_path = daemon_->data_dir() + "/../agent.log";
  const absl::Time start = absl::Now();
  ASSERT_TRUE(agent_.Start(options));
  ASSERT_TRUE(
      agent_.WaitForOutput(std::regex("no health check"), absl::Seconds(20)));
  ASSERT_TRUE(agent_.WaitUntil(
      [&] {
        v1::ListNodesResponse response;
        auto context = WithToken(kAdmin);
        fleet_->ListNodes(context.get(), {}, &response);
        for (const v1::Node& node : response.nodes()) {
          if (node.id() == "node-001") return HeardSince(node, start);
        }
        return false;
      },
      absl::Seconds(20)));
  EXPECT_EQ(agent_.Stop(absl::Seconds(10)), 0);
  EXPECT_THAT(agent_.Output(), HasSubstr("stopped"));
}

}  // namespace
}  // namespace phalanx::testing
