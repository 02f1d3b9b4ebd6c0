// A full and a slow disk under an in-process phalanxd (server/daemon.h): its
// RocksDB files go through storage/fault_fs.h, gRPC is real on loopback.
// While the disk is full, writes fail UNAVAILABLE; gang reads, health and
// metrics are served, and so are the reads that go through the loop (from
// the last durable state); once space frees, writes resume by themselves. After
// each fault heals: every acknowledged submit is present once, no GPU is
// held twice, and the reopened store loads and restores.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/scheduler.h"
#include "gtest/gtest.h"
#include "server/daemon.h"
#include "storage/fault_fs.h"
#include "storage/rocksdb_store.h"
#include "storage/sync/mutex.h"
#include "tests/daemon.h"

namespace phalanx::testing {
namespace {

// Whole sample lines of /metrics (the HELP line names the gauge too).
constexpr char kRefusedGauge[] = "\nphalanx_storage_writes_refused 1\n";
constexpr char kAcceptedGauge[] = "\nphalanx_storage_writes_refused 0\n";

class DiskFullTest : public ::testing::Test {
 protected:
  DiskFullTest()
      : fs_(std::make_shared<storage::FaultFs>(rocksdb::FileSystem::Default())),
        env_(storage::NewFaultEnv(fs_)) {
    char pattern[] = "/tmp/phalanx-disk-full-XXXXXX";
    root_ = mkdtemp(pattern);
  }
  ~DiskFullTest() override {
    daemon_.Shutdown();
    std::filesystem::remove_all(root_);
  }

  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path = root_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  // The demo fleet, queues and config on loopback, files through fs_.
  server::DaemonOptions Options() {
    server::DaemonOptions options;
    options.listen = "127.0.0.1:0";
    options.metrics_listen = "127.0.0.1:0";
    options.data_dir = root_ + "/data";
    options.config_file = WriteFile("config.json", DemoConfigJson());
    options.fleet_file = WriteFile("fleet.json", DemoFleetJson());
    options.queues_file = WriteFile("queues.json", DemoQueuesJson());
    options.storage_env = env_.get();
    return options;
  }

  std::shared_ptr<grpc::Channel> Channel() const {
    return grpc::CreateChannel(daemon_.grpc_address(),
                               grpc::InsecureChannelCredentials());
  }

  // Submits a 1-GPU gang with `request_id`; records it when acknowledged.
  grpc::Status Submit(v1::Scheduler::Stub& stub, const std::string& request_id,
                      absl::Duration deadline = absl::Seconds(30)) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    v1::SubmitGangResponse response;
    grpc::Status status = stub.SubmitGang(
        &context, SubmitRequest("a", 1, 1, "", request_id), &response);
    if (status.ok()) {
      MutexLock lock(&mu_);
      acked_[request_id] = response.gang().id();
    }
    return status;
  }

  // Waits (at most 30 s) until /metrics shows `line`.
  bool AwaitMetric(const std::string& line) {
    for (int i = 0; i < 300; ++i) {
      if (HttpGet(daemon_.metrics_port(), "/metrics").find(line) !=
          std::string::npos) {
        return true;
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
    return false;
  }

  // Every acknowledged submit is there once, under its gang id; no GPU is
  // held twice.
  void ExpectAckedOnceAndGpusHeldOnce() {
    auto scheduler = v1::Scheduler::NewStub(Channel());
    auto fleet = v1::Fleet::NewStub(Channel());
    std::map<std::string, int> ids;
    v1::ListGangsRequest list;
    list.set_page_size(1000);
    grpc::ClientContext context;
    v1::ListGangsResponse page;
    ASSERT_TRUE(scheduler->ListGangs(&context, list, &page).ok());
    for (const v1::Gang& gang : page.gangs()) ++ids[gang.id()];
    MutexLock lock(&mu_);
    for (const auto& [request_id, gang_id] : acked_) {
      EXPECT_EQ(ids[gang_id], 1) << request_id << " -> " << gang_id;
      // The same request again is the same gang, not a new one.
      grpc::ClientContext again_context;
      v1::SubmitGangResponse again;
      ASSERT_TRUE(scheduler
                      ->SubmitGang(&again_context,
                                   SubmitRequest("a", 1, 1, "", request_id),
                                   &again)
                      .ok());
      EXPECT_FALSE(again.created()) << request_id;
      EXPECT_EQ(again.gang().id(), gang_id);
    }
    EXPECT_EQ(GpuHoldingProblems(*scheduler, *fleet),
              std::vector<std::string>{});
  }

  // The store's own check, daemon stopped: it passes its consistency check
  // (storage/store_check.h: placements against the fleet, no GPU held
  // twice, keys against records, and a restore into a scheduler), and
  // holds every acknowledged gang.
  void ExpectStoreRestores() {
    daemon_.Shutdown();
    auto store = storage::RocksDbStore::Open(root_ + "/data");
    ASSERT_TRUE(store.ok()) << store.status();
    auto state = (*store)->LoadAll();
    ASSERT_TRUE(state.ok()) << state.status();
    std::map<std::string, int> ids;
    for (const core::Gang& gang : state->gangs) ++ids[gang.id.value()];
    MutexLock lock(&mu_);
    for (const auto& [request_id, gang_id] : acked_) {
      EXPECT_EQ(ids[gang_id], 1) << request_id;
    }
    const absl::Status consistent = (*store)->CheckConsistency();
    EXPECT_TRUE(consistent.ok()) << consistent;
  }

  // kClients threads submit kSubmitsEach gangs each ("<prefix>-<c>-<n>"),
  // one call at a time; adds the latency of each acknowledged one to
  // `latencies`. Returns how many were acknowledged before any file sync
  // completed after they were sent (0 unless an ack preceded its sync).
  int Load(const std::string& prefix, std::vector<absl::Duration>* latencies) {
    Mutex latency_mu;
    std::atomic<int> unsynced_acks{0};
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back([&, c] {
        auto stub = v1::Scheduler::NewStub(Channel());
        for (int n = 0; n < kSubmitsEach; ++n) {
          const int64_t syncs_before = fs_->stats().syncs;
          const absl::Time start = absl::Now();
          if (!Submit(*stub, absl::StrCat(prefix, "-", c, "-", n)).ok()) {
            continue;  // refused while full: not acknowledged
          }
          const absl::Duration latency = absl::Now() - start;
          if (fs_->stats().syncs <= syncs_before) ++unsynced_acks;
          MutexLock lock(&latency_mu);
          latencies->push_back(latency);
        }
      });
    }
    for (std::thread& client : clients) client.join();
    return unsynced_acks.load();
  }

  static constexpr absl::Duration kSync = absl::Milliseconds(100);
  static constexpr int kClients = 8;
  static constexpr int kSubmitsEach = 15;

  std::shared_ptr<storage::FaultFs> fs_;
  std::unique_ptr<rocksdb::Env> env_;
  std::string root_;
  server::Daemon daemon_;
  Mutex mu_;
  std::map<std::string, std::string> acked_ ABSL_GUARDED_BY(mu_);
};

TEST_F(DiskFullTest, WritesAreRefusedWhileFullAndResumeWhenSpaceFrees) {
  ASSERT_TRUE(daemon_.Start(Options()).ok());
  auto stub = v1::Scheduler::NewStub(Channel());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(Submit(*stub, absl::StrCat("before-", i)).ok());
  }
  ASSERT_TRUE(AwaitMetric(kAcceptedGauge));

  fs_->SetNoSpace(true);
  // The submit whose commit is refused is held, unanswered, until it
  // commits.
  grpc::Status held;
  std::thread held_client([&] { held = Submit(*stub, "held"); });
  ASSERT_TRUE(AwaitMetric(kRefusedGauge));

  // Writes fail at once, naming the cause and the data dir.
  const grpc::Status refused = Submit(*stub, "refused");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(refused.error_message().find("no space left in data dir " + root_ +
                                         "/data"),
            std::string::npos)
      << refused.error_message();
  // Gang reads and health are served.
  {
    MutexLock lock(&mu_);
    for (const auto& [request_id, gang_id] : acked_) {
      EXPECT_EQ(GetOk(*stub, gang_id).id(), gang_id);
    }
  }
  grpc::ClientContext list_context;
  v1::ListGangsResponse listed;
  ASSERT_TRUE(stub->ListGangs(&list_context, {}, &listed).ok());
  EXPECT_EQ(listed.gangs_size(), 5);
  EXPECT_EQ(HealthStatus(Channel(), ""), 1);

  fs_->SetNoSpace(false);
  held_client.join();
  EXPECT_TRUE(held.ok()) << held.error_message();
  ASSERT_TRUE(AwaitMetric(kAcceptedGauge));
  ASSERT_TRUE(Submit(*stub, "after").ok());

  ExpectAckedOnceAndGpusHeldOnce();
  {
    MutexLock lock(&mu_);
    EXPECT_EQ(acked_.size(), 7u);  // 5 before, the held one, 1 after
    EXPECT_EQ(acked_.count("refused"), 0u);
  }
  ExpectStoreRestores();
}

// What the reads served through the loop (ListNodes, GetTopology,
// ListQueues, GetConfig, ExplainGang, DryRunGang) answer: their revisions,
// the GPUs the nodes and queue "a" hold, the queues' names and the config's
// version.
struct LoopReads {
  std::vector<int64_t> revisions;
  int node_gpus_used = 0;
  int queue_a_active_gangs = -1;
  std::vector<std::string> queues;
  int64_t config_version = -1;
};

// Reads them all from `channel`, explaining `gang_id`; fails (ADD_FAILURE)
// when one is not OK.
LoopReads ReadThroughTheLoop(const std::shared_ptr<grpc::Channel>& channel,
                             const std::string& gang_id) {
  auto scheduler = v1::Scheduler::NewStub(channel);
  auto fleet = v1::Fleet::NewStub(channel);
  auto admin = v1::Admin::NewStub(channel);
  LoopReads reads;
  auto call = [](const char* name, auto invoke) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    const grpc::Status status = invoke(context);
    EXPECT_TRUE(status.ok())
        << name << ": " << status.error_code() << " " << status.error_message();
  };
  v1::ListNodesResponse nodes;
  call("ListNodes", [&](grpc::ClientContext& c) {
    return fleet->ListNodes(&c, {}, &nodes);
  });
  reads.revisions.push_back(nodes.revision());
  for (const v1::Node& node : nodes.nodes()) {
    reads.node_gpus_used += node.used_gpu_indices_size();
  }
  v1::GetTopologyResponse topology;
  call("GetTopology", [&](grpc::ClientContext& c) {
    return fleet->GetTopology(&c, {}, &topology);
  });
  reads.revisions.push_back(topology.revision());
  v1::ListQueuesResponse queues;
  call("ListQueues", [&](grpc::ClientContext& c) {
    return admin->ListQueues(&c, {}, &queues);
  });
  reads.revisions.push_back(queues.revision());
  for (const v1::Queue& queue : queues.queues()) {
    reads.queues.push_back(queue.name());
    if (queue.name() == "a") {
      reads.queue_a_active_gangs = queue.status().active_gangs();
    }
  }
  v1::Config config;
  call("GetConfig", [&](grpc::ClientContext& c) {
    return admin->GetConfig(&c, {}, &config);
  });
  reads.config_version = config.version();
  v1::ExplainGangRequest explain;
  explain.set_gang_id(gang_id);
  v1::ExplainGangResponse explained;
  call("ExplainGang", [&](grpc::ClientContext& c) {
    return scheduler->ExplainGang(&c, explain, &explained);
  });
  reads.revisions.push_back(explained.revision());
  v1::DryRunGangRequest dry_run;
  *dry_run.mutable_spec() = SubmitRequest("a", 1, 1).spec();
  v1::DryRunGangResponse tried;
  call("DryRunGang", [&](grpc::ClientContext& c) {
    return scheduler->DryRunGang(&c, dry_run, &tried);
  });
  reads.revisions.push_back(tried.revision());
  EXPECT_TRUE(tried.fits()) << tried.reason();
  return reads;
}

// While writes are refused, the reads that go through the loop are served
// from the last durable state: the held submit (admitted in memory) is
// seen by none of them; once space frees, they all see it.
TEST_F(DiskFullTest, LoopReadsServeTheLastDurableStateWhileRefused) {
  ASSERT_TRUE(daemon_.Start(Options()).ok());
  auto stub = v1::Scheduler::NewStub(Channel());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Submit(*stub, absl::StrCat("before-", i)).ok());
  }
  std::string durable_gang;
  {
    MutexLock lock(&mu_);
    durable_gang = acked_["before-0"];
  }
  grpc::ClientContext list_context;
  v1::ListGangsResponse durable;
  ASSERT_TRUE(stub->ListGangs(&list_context, {}, &durable).ok());
  const LoopReads before = ReadThroughTheLoop(Channel(), durable_gang);
  EXPECT_EQ(before.revisions,
            std::vector<int64_t>(before.revisions.size(), durable.revision()));
  EXPECT_EQ(before.node_gpus_used, 3);
  EXPECT_EQ(before.queue_a_active_gangs, 3);

  fs_->SetNoSpace(true);
  grpc::Status held;
  std::thread held_client([&] { held = Submit(*stub, "held"); });
  ASSERT_TRUE(AwaitMetric(kRefusedGauge));
  // Twice: the first read restores the durable state, the second reuses it.
  for (int round = 0; round < 2; ++round) {
    const LoopReads refused = ReadThroughTheLoop(Channel(), durable_gang);
    EXPECT_EQ(refused.revisions, before.revisions) << "round " << round;
    EXPECT_EQ(refused.node_gpus_used, 3) << "round " << round;
    EXPECT_EQ(refused.queue_a_active_gangs, 3) << "round " << round;
    EXPECT_EQ(refused.config_version, before.config_version);
  }
  // A write is still refused, and the reads changed nothing.
  EXPECT_EQ(Submit(*stub, "refused").error_code(),
            grpc::StatusCode::UNAVAILABLE);

  fs_->SetNoSpace(false);
  held_client.join();
  ASSERT_TRUE(held.ok()) << held.error_message();
  ASSERT_TRUE(AwaitMetric(kAcceptedGauge));
  const LoopReads after = ReadThroughTheLoop(Channel(), durable_gang);
  for (int64_t revision : after.revisions) {
    EXPECT_GT(revision, durable.revision());
  }
  EXPECT_EQ(after.node_gpus_used, 4);
  EXPECT_EQ(after.queue_a_active_gangs, 4);
  ASSERT_TRUE(Submit(*stub, "after").ok());

  ExpectAckedOnceAndGpusHeldOnce();
  ExpectStoreRestores();
}

// A restart on a disk still full: the store opens read-only, the start-up
// batch (here: an edited queues file adding queue "c") is held, reads are
// served (also those through the loop, from the read-only store: without
// "c") and writes refused; once space frees the batch commits, writes
// resume and the loop's reads see them.
TEST_F(DiskFullTest, AStartOnAFullDiskRefusesWritesAndResumes) {
  ASSERT_TRUE(daemon_.Start(Options()).ok());
  {
    auto stub = v1::Scheduler::NewStub(Channel());
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(Submit(*stub, absl::StrCat("before-", i)).ok());
    }
  }
  std::string durable_gang;
  {
    MutexLock lock(&mu_);
    durable_gang = acked_["before-0"];
  }
  const LoopReads before = ReadThroughTheLoop(Channel(), durable_gang);
  EXPECT_EQ(before.queues, (std::vector<std::string>{"a", "b"}));
  daemon_.Shutdown();

  fs_->SetNoSpace(true);
  server::DaemonOptions options = Options();
  options.queues_file =
      WriteFile("queues.json",
                R"({"queues":[{"name":"a","weight":1},{"name":"b","weight":1},)"
                R"({"name":"c","weight":1}]})");
  ASSERT_TRUE(daemon_.Start(options).ok());
  EXPECT_NE(HttpGet(daemon_.metrics_port(), "/metrics").find(kRefusedGauge),
            std::string::npos);
  auto stub = v1::Scheduler::NewStub(Channel());
  {
    MutexLock lock(&mu_);
    for (const auto& [request_id, gang_id] : acked_) {
      EXPECT_EQ(GetOk(*stub, gang_id).id(), gang_id);
    }
  }
  EXPECT_EQ(HealthStatus(Channel(), ""), 1);
  // Twice: the first read restores the durable state, the second reuses it.
  for (int round = 0; round < 2; ++round) {
    const LoopReads refused = ReadThroughTheLoop(Channel(), durable_gang);
    EXPECT_EQ(refused.revisions, before.revisions) << "round " << round;
    EXPECT_EQ(refused.node_gpus_used, 3) << "round " << round;
    EXPECT_EQ(refused.queue_a_active_gangs, 3) << "round " << round;
    EXPECT_EQ(refused.queues, before.queues) << "round " << round;
    EXPECT_EQ(refused.config_version, before.config_version);
  }
  const grpc::Status refused = Submit(*stub, "refused");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE)
      << refused.error_message();

  fs_->SetNoSpace(false);
  ASSERT_TRUE(AwaitMetric(kAcceptedGauge));
  ASSERT_TRUE(Submit(*stub, "after").ok());
  const LoopReads after = ReadThroughTheLoop(Channel(), durable_gang);
  for (int64_t revision : after.revisions) {
    EXPECT_GT(revision, before.revisions.front());
  }
  EXPECT_EQ(after.node_gpus_used, 4);
  EXPECT_EQ(after.queue_a_active_gangs, 4);
  EXPECT_EQ(after.queues, (std::vector<std::string>{"a", "b", "c"}));

  ExpectAckedOnceAndGpusHeldOnce();
  ExpectStoreRestores();
}

// A slow disk (every fsync 100 ms) under 8 clients: no submit is answered
// before a sync that followed it, and the latency is printed against the
// sync time. Then the same load with the disk full for half a second midway:
// refused submits are not acknowledged, the held ones are once space frees.
TEST_F(DiskFullTest, SlowDiskAnswersAfterTheSyncAndRecoversFromAFullMoment) {
  ASSERT_TRUE(daemon_.Start(Options()).ok());
  fs_->SetSyncDelay(kSync);
  std::vector<absl::Duration> latencies;
  EXPECT_EQ(Load("slow", &latencies), 0);
  ASSERT_FALSE(latencies.empty());
  std::sort(latencies.begin(), latencies.end());
  auto at = [&](double q) {
    return absl::FormatDuration(
        latencies[static_cast<size_t>(q * (latencies.size() - 1))]);
  };
  std::printf("slow disk: fsync %s, %d clients, %zu submits: p50 %s, p99 %s\n",
              absl::FormatDuration(kSync).c_str(), kClients, latencies.size(),
              at(0.5).c_str(), at(0.99).c_str());

  std::vector<absl::Duration> unused;
  std::thread load([&] { EXPECT_EQ(Load("full", &unused), 0); });
  absl::SleepFor(5 * kSync);
  fs_->SetNoSpace(true);
  absl::SleepFor(5 * kSync);
  fs_->SetNoSpace(false);
  load.join();
  ASSERT_TRUE(AwaitMetric(kAcceptedGauge));
  ExpectAckedOnceAndGpusHeldOnce();
  ExpectStoreRestores();
}

}  // namespace
}  // namespace phalanx::testing
