// HA followers end to end (docs/ha.md): real phalanxd replicas against a
// real 3-member etcd cluster on loopback. Followers serve the leader's reads
// and watches at the leader's revisions, and every other read (nodes,
// topology, queues, config, explain, dry run, audit, the scheduler gauges
// of /metrics) at the revision they have applied; a ListGangs page token
// from one replica reads on another; writes to a follower are refused
// with the leader's address, which phalanxctl and the Python client follow;
// a paused leader never commits again; a leader killed under load loses no
// acknowledged write; a replica with an empty data dir catches up; etcd
// members die one at a time. Skipped only when /usr/bin/etcd is absent.
// Every wait is bounded; nothing asserts a duration (the times seen are
// printed).
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/auth_client.h"
#include "tests/daemon.h"
#include "tests/etcd_cluster.h"
#include "tests/ha_writers.h"

namespace phalanx::testing {
namespace {

constexpr int kServing = 1, kNotServing = 2;
const char kLeader[] = "phalanx.v1.Leader";

// The revision a replica's reads are at; -1 when it does not answer.
int64_t ReadRevision(v1::Scheduler::Stub& stub) {
  v1::ListGangsRequest request;
  request.set_page_size(1);
  v1::ListGangsResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  if (!stub.ListGangs(&context, request, &response).ok()) return -1;
  return response.revision();
}

// The first `count` events (bookmarks skipped) after `after`, read within
// 10 s.
std::vector<v1::GangEvent> Watch(v1::Scheduler::Stub& stub, int64_t after,
                                 int count) {
  v1::WatchGangsRequest request;
  request.set_after_revision(after);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  auto reader = stub.WatchGangs(&context, request);
  std::vector<v1::GangEvent> events;
  v1::GangEvent event;
  while (static_cast<int>(events.size()) < count && reader->Read(&event)) {
    if (event.type() != v1::EVENT_TYPE_BOOKMARK) events.push_back(event);
  }
  context.TryCancel();
  (void)reader->Finish();
  return events;
}

std::string Key(const v1::GangEvent& event) {
  return absl::StrCat(event.revision(), ":", event.gang().id(), ":",
                      event.type(), ":", event.gang().state());
}

class HaFollowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdCluster::Available()) {
      GTEST_SKIP() << EtcdCluster::kEtcdPath
                   << " is absent: install etcd-server to run the HA tests";
    }
    cluster_ = std::make_unique<EtcdCluster>(3);
    ASSERT_TRUE(cluster_->Start()) << cluster_->logs();
  }

  // Whatever the case did to them: every replica's store passes its check.
  void TearDown() override {
    std::vector<DaemonProcess*> replicas;
    for (auto& replica : replicas_) replicas.push_back(replica.get());
    StopAndCheckStores(replicas);
  }

  // A replica (not started) with a 2 s lease; it advertises its bound port.
  // It talks to the etcd `members` given, in that order (all by default).
  std::unique_ptr<DaemonProcess> Replica(
      const std::string& id, const std::vector<std::string>& extra = {},
      std::vector<int> members = {0, 1, 2}) {
    std::vector<std::string> endpoints;
    for (int m : members) endpoints.push_back(cluster_->endpoint(m));
    std::vector<std::string> args = {
        "--etcd-endpoints=" + absl::StrJoin(endpoints, ","),
        "--replica-id=" + id, "--etcd-prefix=/phalanx/follow",
        "--etcd-lease-ttl=2s"};
    args.insert(args.end(), extra.begin(), extra.end());
    return StartDemoDaemon(args);
  }

  // Starts a leader and `followers` followers (in that order), each with
  // the flags `extra`.
  void StartReplicas(int followers,
                     const std::vector<std::string>& extra = {}) {
    replicas_.push_back(Replica("r0", extra));
    ASSERT_TRUE(replicas_[0]->Start()) << replicas_[0]->output();
    ASSERT_TRUE(Eventually([&] {
      return HealthStatus(replicas_[0]->channel(), kLeader) == kServing;
    })) << replicas_[0]->output();
    for (int i = 1; i <= followers; ++i) {
      replicas_.push_back(Replica(absl::StrCat("r", i), extra));
      ASSERT_TRUE(replicas_.back()->Start()) << replicas_.back()->output();
    }
  }

  // Waits until `stub` reads, as `token`, at `revision` or later.
  static bool ReachesRevisionAs(v1::Scheduler::Stub& stub, int64_t revision,
                                const std::string& token) {
    return Eventually([&] {
      auto context = WithToken(token);
      v1::ListGangsRequest request;
      request.set_page_size(1);
      v1::ListGangsResponse response;
      return stub.ListGangs(context.get(), request, &response).ok() &&
             response.revision() >= revision;
    });
  }

  // Waits until `replica` reads at `revision` or later.
  static bool ReachesRevision(DaemonProcess& replica, int64_t revision) {
    auto stub = replica.Scheduler();
    return Eventually([&] { return ReadRevision(*stub) >= revision; });
  }

  // The index of the replica reporting Leader SERVING among the running
  // ones other than `except`, waiting for one; -1 when none does.
  int NewLeader(int except) {
    int found = -1;
    Eventually([&] {
      for (size_t i = 0; i < replicas_.size(); ++i) {
        if (static_cast<int>(i) == except || replicas_[i]->pid() <= 0) continue;
        if (HealthStatus(replicas_[i]->channel(), kLeader) == kServing) {
          found = static_cast<int>(i);
          return true;
        }
      }
      return false;
    });
    return found;
  }

  std::unique_ptr<EtcdCluster> cluster_;
  std::vector<std::unique_ptr<DaemonProcess>> replicas_;
};

TEST_F(HaFollowTest, FollowersServeTheLeadersReadsAndWatchesAtItsRevisions) {
  StartReplicas(2);
  DaemonProcess& leader = *replicas_[0];
  auto stub = leader.Scheduler();
  std::vector<v1::Gang> gangs;
  for (int i = 0; i < 3; ++i) {
    gangs.push_back(SubmitOk(*stub, SubmitRequest("a", 1, 8, "rack")));
  }
  {
    v1::CancelGangRequest cancel;
    cancel.set_gang_id(gangs[1].id());
    v1::CancelGangResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(stub->CancelGang(&context, cancel, &response).ok());
  }
  const v1::ListGangsResponse led = ListAll(*stub);
  // The leader's gangs carry their place in the plan; a follower makes
  // none and leaves those fields unset.
  for (const v1::Gang& gang : led.gangs()) {
    EXPECT_NE(gang.plan_status(), v1::PLAN_STATUS_UNSPECIFIED) << gang.id();
  }
  const v1::ListGangsResponse on_leader = WithoutPlans(led);
  for (int f = 1; f <= 2; ++f) {
    DaemonProcess& follower = *replicas_[f];
    const absl::Time acknowledged = absl::Now();
    ASSERT_TRUE(ReachesRevision(follower, on_leader.revision()))
        << follower.output();
    std::printf("follower %d read the leader's revision %.1f ms later\n", f,
                absl::ToDoubleMilliseconds(absl::Now() - acknowledged));
    EXPECT_EQ(HealthStatus(follower.channel(), ""), kServing);
    EXPECT_EQ(HealthStatus(follower.channel(), kLeader), kNotServing);
    auto follower_stub = follower.Scheduler();
    const v1::ListGangsResponse listed = ListAll(*follower_stub);
    EXPECT_EQ(listed.revision(), on_leader.revision());
    ASSERT_EQ(listed.gangs_size(), on_leader.gangs_size());
    for (int i = 0; i < listed.gangs_size(); ++i) {
      EXPECT_EQ(listed.gangs(i).SerializeAsString(),
                on_leader.gangs(i).SerializeAsString())
          << listed.gangs(i).DebugString() << on_leader.gangs(i).DebugString();
    }
    EXPECT_EQ(GetOk(*follower_stub, gangs[0].id()).SerializeAsString(),
              WithoutPlan(GetOk(*stub, gangs[0].id())).SerializeAsString());
  }
  EXPECT_EQ(HealthStatus(leader.channel(), ""), kServing);

  // A watch read on the leader resumes on a follower from its last revision.
  const std::vector<v1::GangEvent> first = Watch(*stub, 0, 2);
  ASSERT_EQ(first.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    gangs.push_back(SubmitOk(*stub, SubmitRequest("b", 1, 8)));
  }
  const int64_t now = ListAll(*stub).revision();
  ASSERT_TRUE(ReachesRevision(*replicas_[2], now));
  const int64_t resume = first.back().revision();
  const int rest = 6;  // at least the two submits' events
  auto follower_stub = replicas_[2]->Scheduler();
  const std::vector<v1::GangEvent> on_follower =
      Watch(*follower_stub, resume, rest);
  const std::vector<v1::GangEvent> on_leader_too = Watch(*stub, resume, rest);
  ASSERT_FALSE(on_follower.empty());
  ASSERT_EQ(on_follower.size(), on_leader_too.size());
  for (size_t i = 0; i < on_follower.size(); ++i) {
    EXPECT_EQ(Key(on_follower[i]), Key(on_leader_too[i]));
    EXPECT_EQ(on_follower[i].SerializeAsString(),
              on_leader_too[i].SerializeAsString());
  }
  EXPECT_GT(on_follower.front().revision(), resume);
  // How far behind a follower reads (printed, not asserted): submit on the
  // leader, poll the follower until it reads that revision.
  std::vector<double> lags_ms;
  for (int i = 0; i < 10; ++i) {
    v1::SubmitGangResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(
        stub->SubmitGang(&context, SubmitRequest("b", 1, 1), &response).ok());
    const absl::Time acked = absl::Now();
    for (int poll = 0; poll < 5000; ++poll) {
      if (ReadRevision(*follower_stub) >= response.revision()) break;
      absl::SleepFor(absl::Milliseconds(1));
    }
    lags_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - acked));
  }
  std::sort(lags_ms.begin(), lags_ms.end());
  std::printf(
      "follower read lag after an acknowledged submit: p50 %.1f ms, "
      "max %.1f ms (10 submits)\n",
      lags_ms[lags_ms.size() / 2], lags_ms.back());
  // The metrics say who leads.
  EXPECT_NE(HttpGet(leader.metrics_port(), "/metrics").find("phalanx_leader 1"),
            std::string::npos);
  const std::string follower_metrics =
      HttpGet(replicas_[2]->metrics_port(), "/metrics");
  EXPECT_NE(follower_metrics.find("phalanx_leader 0"), std::string::npos);
  EXPECT_NE(follower_metrics.find("phalanx_follower_applied_seq"),
            std::string::npos);
}

TEST_F(HaFollowTest, AWriteToAFollowerNamesTheLeaderAndClientsFollowIt) {
  StartReplicas(1);
  DaemonProcess& leader = *replicas_[0];
  DaemonProcess& follower = *replicas_[1];
  auto follower_stub = follower.Scheduler();
  {
    v1::SubmitGangResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    grpc::Status status = follower_stub->SubmitGang(
        &context, SubmitRequest("a", 1, 8, "", "to-follower"), &response);
    ASSERT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE)
        << status.error_message();
    const auto& trailers = context.GetServerTrailingMetadata();
    auto hint = trailers.find("phalanx-leader");
    ASSERT_NE(hint, trailers.end()) << status.error_message();
    EXPECT_EQ(std::string(hint->second.data(), hint->second.size()),
              leader.address());
  }
  auto stub = leader.Scheduler();
  EXPECT_EQ(ListAll(*stub).gangs_size(), 0);  // refused before anything

  // phalanxctl, given the follower first, lands the submit on the leader.
  const ShellResult ctl = RunShell(absl::StrCat(
      PHALANXCTL_PATH, " --server ", follower.address(), ",", leader.address(),
      " submit --queue a --pods 1 --gpus 8 --request-id ctl-1 -o json"));
  ASSERT_EQ(ctl.exit_code, 0) << ctl.output;
  // And only the follower: the hint is the only way to the leader.
  const ShellResult only_follower = RunShell(absl::StrCat(
      PHALANXCTL_PATH, " --server ", follower.address(),
      " submit --queue a --pods 1 --gpus 8 --request-id ctl-2 -o json"));
  ASSERT_EQ(only_follower.exit_code, 0) << only_follower.output;
  // Reads stay on the follower.
  const ShellResult get = RunShell(absl::StrCat(
      PHALANXCTL_PATH, " --server ", follower.address(), " list -o json"));
  EXPECT_EQ(get.exit_code, 0) << get.output;

  // The Python client, given only the follower, likewise.
  if (std::string gen = PHALANX_PYTHON_GEN; !gen.empty()) {
    const ShellResult py = RunShell(absl::StrCat(
        "PYTHONPATH=", gen, ":", PHALANX_PYTHON_SRC,
        " /usr/bin/python3 -c '"
        "import phalanx; c = phalanx.Client([\"",
        follower.address(),
        "\"]); g = c.submit(queue=\"a\", pods=1, gpus=8, request_id=\"py-1\");"
        " print(\"landed\", g.id, c.address)'"));
    EXPECT_EQ(py.exit_code, 0) << py.output;
    EXPECT_NE(py.output.find(absl::StrCat(" ", leader.address())),
              std::string::npos)
        << py.output;
  }
  std::set<std::string> request_ids;
  const v1::ListGangsResponse landed = ListAll(*stub);
  for (const v1::Gang& gang : landed.gangs()) {
    request_ids.insert(gang.spec().request_id());
  }
  EXPECT_TRUE(request_ids.count("ctl-1")) << absl::StrJoin(request_ids, ",");
  EXPECT_TRUE(request_ids.count("ctl-2")) << absl::StrJoin(request_ids, ",");
  if (std::string(PHALANX_PYTHON_GEN).size() > 0) {
    EXPECT_TRUE(request_ids.count("py-1")) << absl::StrJoin(request_ids, ",");
  }
}

TEST_F(HaFollowTest, APausedLeaderNeverCommitsOrLeadsAgain) {
  StartReplicas(1);
  DaemonProcess& old_leader = *replicas_[0];
  auto old_stub = old_leader.Scheduler();
  SubmitOk(*old_stub, SubmitRequest("a", 1, 8, "", "before-pause"));
  const absl::Time paused = absl::Now();
  old_leader.Pause();
  // A write sent to the paused leader waits in its socket.
  grpc::Status late_status;
  std::thread late([&] {
    v1::SubmitGangResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    late_status = old_stub->SubmitGang(
        &context, SubmitRequest("a", 1, 8, "", "to-paused-leader"), &response);
  });
  const int next = NewLeader(0);
  ASSERT_EQ(next, 1) << replicas_[1]->output();
  std::printf("a follower led %.2f s after the pause (lease TTL 2 s)\n",
              absl::ToDoubleSeconds(absl::Now() - paused));
  auto new_stub = replicas_[1]->Scheduler();
  SubmitOk(*new_stub, SubmitRequest("a", 1, 8, "", "after-takeover"));

  const absl::Time resumed = absl::Now();
  old_leader.Signal(SIGCONT);
  late.join();
  // The late write was never acknowledged, and never committed.
  EXPECT_FALSE(late_status.ok());
  // The old leader stops (exits) rather than report itself the leader.
  ASSERT_TRUE(Eventually(
      [&] { return HealthStatus(old_leader.channel(), kLeader) != kServing; }));
  std::printf("the old leader stopped reporting Leader %.2f s after SIGCONT\n",
              absl::ToDoubleSeconds(absl::Now() - resumed));
  const v1::ListGangsResponse listed = ListAll(*new_stub);
  std::set<std::string> request_ids;
  for (const v1::Gang& gang : listed.gangs()) {
    request_ids.insert(gang.spec().request_id());
  }
  EXPECT_EQ(request_ids,
            (std::set<std::string>{"after-takeover", "before-pause"}));
  EXPECT_EQ(HealthStatus(replicas_[1]->channel(), kLeader), kServing);
  // The new leader still commits.
  SubmitOk(*new_stub, SubmitRequest("a", 1, 8, "", "after-resume"));
}

TEST_F(HaFollowTest, KillingTheLeaderUnderLoadLosesNoAcknowledgedWrite) {
  StartReplicas(2);
  DaemonProcess& leader = *replicas_[0];
  Writers writers({&leader}, 60, /*stop_on_error=*/true);
  writers.Start();
  // Kill once some writes are acknowledged (or the load is over).
  Eventually([&] { return writers.acknowledged() >= 20; });
  const absl::Time killed = absl::Now();
  leader.Kill9();
  writers.Join();
  const int next = NewLeader(0);
  ASSERT_GT(next, 0);
  std::printf("%d submits acknowledged; a follower led %.2f s after kill -9\n",
              writers.acknowledged(),
              absl::ToDoubleSeconds(absl::Now() - killed));
  auto stub = replicas_[next]->Scheduler();
  const v1::ListGangsResponse listed = ListAll(*stub);
  writers.Check(listed);
  // Request ids survive the failover: a repeat returns the same gang.
  ASSERT_FALSE(writers.submitted().empty());
  {
    const auto& [request_id, id] = *writers.submitted().begin();
    v1::SubmitGangResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(stub->SubmitGang(&context,
                                 SubmitRequest("a", 1, 1, "", request_id),
                                 &response)
                    .ok());
    EXPECT_FALSE(response.created()) << request_id;
    EXPECT_EQ(response.gang().id(), id);
  }
  // The other follower follows the new leader.
  const int other = next == 1 ? 2 : 1;
  SubmitOk(*stub, SubmitRequest("b", 1, 8));
  ASSERT_TRUE(ReachesRevision(*replicas_[other], ListAll(*stub).revision()));
  EXPECT_EQ(ListAll(*replicas_[other]->Scheduler()).SerializeAsString(),
            WithoutPlans(ListAll(*stub)).SerializeAsString());
}

TEST_F(HaFollowTest, ACycleAdmittingManyGangsCommitsInPartsEverywhere) {
  // Log entries of at most 4 KiB: the batch below (64 gangs admitted, with
  // their events) is tens of KiB, so it goes to etcd in parts.
  StartReplicas(1, {"--etcd-max-batch-bytes=4096"});
  DaemonProcess& leader = *replicas_[0];
  auto stub = leader.Scheduler();
  // One gang holds the whole fleet (8 nodes of 8 GPUs); 64 one-GPU gangs
  // wait behind it.
  const v1::Gang blocker = SubmitOk(*stub, SubmitRequest("a", 8, 8));
  ASSERT_TRUE(Eventually([&] {
    return GetOk(*stub, blocker.id()).state() == v1::GANG_STATE_ADMITTED;
  }));
  std::vector<std::string> waiting;
  for (int i = 0; i < 64; ++i) {
    waiting.push_back(
        SubmitOk(*stub, SubmitRequest("b", 1, 1, "", absl::StrCat("p", i)))
            .id());
  }
  EXPECT_EQ(GetOk(*stub, waiting.back()).state(), v1::GANG_STATE_PENDING);
  // One batch: the cancel frees the fleet and its cycle admits all 64.
  v1::CancelGangRequest cancel;
  cancel.set_gang_id(blocker.id());
  v1::CancelGangResponse cancelled;
  grpc::ClientContext context;
  ASSERT_TRUE(stub->CancelGang(&context, cancel, &cancelled).ok());
  auto admitted = [](const v1::ListGangsResponse& listed) {
    int n = 0;
    for (const v1::Gang& gang : listed.gangs()) {
      n += gang.state() == v1::GANG_STATE_ADMITTED;
    }
    return n;
  };
  ASSERT_TRUE(Eventually([&] { return admitted(ListAll(*stub)) == 64; }));
  // The leader did not stop, and the follower applied the same batch.
  EXPECT_EQ(HealthStatus(leader.channel(), kLeader), kServing)
      << leader.output();
  leader.ReadOutput();
  EXPECT_EQ(leader.output().find("commit failed"), std::string::npos);
  const size_t split = leader.output().find("a batch of ");
  ASSERT_NE(split, std::string::npos) << leader.output();
  std::printf("%s\n",
              leader.output()
                  .substr(split, leader.output().find('\n', split) - split)
                  .c_str());
  const v1::ListGangsResponse on_leader = ListAll(*stub);
  DaemonProcess& follower = *replicas_[1];
  ASSERT_TRUE(ReachesRevision(follower, on_leader.revision()));
  auto follower_stub = follower.Scheduler();
  EXPECT_EQ(ListAll(*follower_stub).SerializeAsString(),
            WithoutPlans(on_leader).SerializeAsString());
  EXPECT_EQ(GetOk(*follower_stub, waiting[17]).SerializeAsString(),
            WithoutPlan(GetOk(*stub, waiting[17])).SerializeAsString());
  EXPECT_EQ(HealthStatus(follower.channel(), ""), kServing);

  // The follower takes over with every acknowledged write.
  leader.Kill9();
  ASSERT_EQ(NewLeader(0), 1) << follower.output();
  const v1::ListGangsResponse after = ListAll(*follower_stub);
  EXPECT_EQ(admitted(after), 64);
  EXPECT_EQ(after.gangs_size(), on_leader.gangs_size());
  EXPECT_EQ(CheckNoGpuTwice(after), 64);
  EXPECT_EQ(GetOk(*follower_stub, blocker.id()).state(),
            v1::GANG_STATE_CANCELLED);
  SubmitOk(*follower_stub, SubmitRequest("a", 1, 1));  // it commits too
}

TEST_F(HaFollowTest, AuthAppliesOnAFollowerAsOnTheLeader) {
  const std::string admin = "admin-token-0123456789";
  const std::string viewer = "viewer-token-0123456789";
  const std::string tenant_b = "tenant-b-token-0123456789";
  const std::string auth =
      AuthJson({PrincipalJson("ops", admin, {"ROLE_ADMIN"}),
                PrincipalJson("dash", viewer, {"ROLE_VIEWER"}),
                PrincipalJson("team-b", tenant_b, {"ROLE_TENANT"}, {"b"})});
  for (int i = 0; i < 2; ++i) {
    replicas_.push_back(Replica(absl::StrCat("r", i)));
    replicas_[i]->AddArgs(
        {"--auth=" + replicas_[i]->WriteFile("auth.json", auth)});
    ASSERT_TRUE(replicas_[i]->Start()) << replicas_[i]->output();
    if (i == 0) {
      ASSERT_TRUE(Eventually([&] {
        return HealthStatus(replicas_[0]->channel(), kLeader) == kServing;
      })) << replicas_[0]->output();
    }
  }
  auto leader = replicas_[0]->Scheduler();
  auto follower = replicas_[1]->Scheduler();
  v1::SubmitGangResponse submitted;
  {
    auto context = WithToken(admin);
    ASSERT_TRUE(
        leader->SubmitGang(context.get(), SubmitRequest("a", 1, 8), &submitted)
            .ok());
  }
  ASSERT_TRUE(ReachesRevisionAs(*follower, submitted.revision(), viewer));
  auto get = [&](v1::Scheduler::Stub& stub, const std::string& token) {
    auto context = WithToken(token);
    v1::GetGangRequest request;
    request.set_gang_id(submitted.gang().id());
    v1::GetGangResponse response;
    return stub.GetGang(context.get(), request, &response).error_code();
  };
  auto submit = [&](v1::Scheduler::Stub& stub, const std::string& token) {
    auto context = WithToken(token);
    v1::SubmitGangResponse response;
    return stub.SubmitGang(context.get(), SubmitRequest("a", 1, 8), &response)
        .error_code();
  };
  // The same answers on both, for the same callers.
  for (const std::string& token :
       {std::string(), std::string("wrong-token-0123"), viewer, tenant_b}) {
    EXPECT_EQ(get(*follower, token), get(*leader, token)) << token;
  }
  EXPECT_EQ(get(*follower, ""), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(get(*follower, viewer), grpc::StatusCode::OK);
  EXPECT_EQ(get(*follower, tenant_b), grpc::StatusCode::NOT_FOUND);  // scope
  // A write is checked first, then redirected: refused callers are refused
  // as on the leader, allowed ones are sent to it.
  EXPECT_EQ(submit(*follower, ""), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(submit(*follower, viewer), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(submit(*leader, viewer), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(submit(*follower, admin), grpc::StatusCode::UNAVAILABLE);

  // The reads a follower serves itself are scoped as on the leader.
  auto nodes = [&](DaemonProcess& replica, const std::string& token) {
    auto context = WithToken(token);
    v1::ListNodesResponse response;
    const grpc::Status status =
        replica.Fleet()->ListNodes(context.get(), {}, &response);
    std::vector<std::string> seen = {absl::StrCat(status.error_code())};
    for (const v1::Node& node : response.nodes()) {
      seen.insert(seen.end(), node.gang_ids().begin(), node.gang_ids().end());
    }
    return seen;
  };
  for (const std::string& token : {std::string(), viewer, tenant_b}) {
    EXPECT_EQ(nodes(*replicas_[1], token), nodes(*replicas_[0], token))
        << token;
  }
  EXPECT_EQ(nodes(*replicas_[1], viewer).size(), 2u);  // OK, the gang
  auto audit = [&](DaemonProcess& replica, const std::string& token) {
    auto context = WithToken(token);
    v1::ListAuditRecordsResponse response;
    return replica.Admin()
        ->ListAuditRecords(context.get(), {}, &response)
        .error_code();
  };
  EXPECT_EQ(audit(*replicas_[1], viewer), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(audit(*replicas_[1], admin), grpc::StatusCode::OK);
  // A page token names where a listing goes on, not what its caller may
  // read: the tenant of "b" continuing an admin's listing on the follower
  // sees none of queue "a"'s gangs.
  v1::SubmitGangResponse second;
  {
    auto context = WithToken(admin);
    ASSERT_TRUE(
        leader->SubmitGang(context.get(), SubmitRequest("a", 1, 8), &second)
            .ok());
  }
  ASSERT_TRUE(ReachesRevisionAs(*follower, second.revision(), viewer));
  v1::ListGangsRequest page;
  page.set_page_size(1);
  v1::ListGangsResponse first_page;
  {
    auto context = WithToken(admin);
    ASSERT_TRUE(leader->ListGangs(context.get(), page, &first_page).ok());
  }
  ASSERT_FALSE(first_page.next_page_token().empty());
  page.set_page_token(first_page.next_page_token());
  auto next_page = [&](const std::string& token) {
    auto context = WithToken(token);
    v1::ListGangsResponse response;
    EXPECT_TRUE(follower->ListGangs(context.get(), page, &response).ok());
    return response.gangs_size();
  };
  EXPECT_EQ(next_page(admin), 1);
  EXPECT_EQ(next_page(tenant_b), 0);
}

// A unary call with a 10 s deadline, expecting OK.
template <typename Stub, typename Request, typename Response>
Response CallOk(Stub& stub,
                grpc::Status (Stub::*method)(grpc::ClientContext*,
                                             const Request&, Response*),
                const Request& request) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  Response response;
  grpc::Status status = (stub.*method)(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_code() << " "
                           << status.error_message();
  return response;
}

// What a follower reads of the fleet, its queues, its config, a gang's
// explanation, a dry run and the audit log, at its applied revision.
struct FleetReads {
  v1::ListNodesResponse nodes;
  v1::GetTopologyResponse topology;
  v1::ListQueuesResponse queues;
  v1::Config config;
  v1::ExplainGangResponse explained;
  v1::DryRunGangResponse dry_run;
  v1::ListAuditRecordsResponse audit;
};

FleetReads ReadFleet(DaemonProcess& replica, const std::string& gang_id,
                     const v1::DryRunGangRequest& dry_run) {
  auto scheduler = replica.Scheduler();
  auto fleet = replica.Fleet();
  auto admin = replica.Admin();
  FleetReads reads;
  reads.nodes = CallOk(*fleet, &v1::Fleet::Stub::ListNodes, {});
  // Heartbeats are not replicated: only the leader has heard them.
  for (v1::Node& node : *reads.nodes.mutable_nodes()) {
    node.clear_last_heartbeat();
  }
  reads.topology = CallOk(*fleet, &v1::Fleet::Stub::GetTopology, {});
  reads.queues = CallOk(*admin, &v1::Admin::Stub::ListQueues, {});
  reads.config = CallOk(*admin, &v1::Admin::Stub::GetConfig, {});
  v1::ExplainGangRequest explain;
  explain.set_gang_id(gang_id);
  reads.explained =
      CallOk(*scheduler, &v1::Scheduler::Stub::ExplainGang, explain);
  reads.dry_run = CallOk(*scheduler, &v1::Scheduler::Stub::DryRunGang, dry_run);
  reads.audit = CallOk(*admin, &v1::Admin::Stub::ListAuditRecords, {});
  return reads;
}

// Protobuf messages compared field by field (map order aside), printed
// when they differ.
#define EXPECT_SAME_MESSAGE(a, b)                                           \
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals((a), (b))) \
      << (a).DebugString() << "\nvs\n"                                      \
      << (b).DebugString()

TEST_F(HaFollowTest, AFollowerServesEveryReadAtItsAppliedRevision) {
  StartReplicas(1);
  DaemonProcess& leader = *replicas_[0];
  DaemonProcess& follower = *replicas_[1];
  auto stub = leader.Scheduler();
  const v1::Gang block = SubmitOk(*stub, SubmitRequest("a", 4, 8, "block"));
  SubmitOk(*stub, SubmitRequest("b", 1, 8));
  const v1::Gang cancelled = SubmitOk(*stub, SubmitRequest("b", 1, 8));
  {
    v1::CancelGangRequest cancel;
    cancel.set_gang_id(cancelled.id());
    CallOk(*stub, &v1::Scheduler::Stub::CancelGang, cancel);
  }
  {
    v1::PutQueueRequest put;
    put.mutable_queue()->set_name("c");
    put.mutable_queue()->set_weight(2);
    auto admin = leader.Admin();
    CallOk(*admin, &v1::Admin::Stub::PutQueue, put);
  }
  v1::DryRunGangRequest dry_run;
  *dry_run.mutable_spec() = SubmitRequest("a", 2, 8, "rack").spec();
  // Settled: no cycle changes anything more (the leader's reads are at the
  // revision the follower is waited for).
  int64_t revision = -1;
  ASSERT_TRUE(Eventually([&] {
    const int64_t now = ReadRevision(*stub);
    const bool settled = now == revision;
    revision = now;
    return settled;
  }));
  ASSERT_TRUE(ReachesRevision(follower, revision)) << follower.output();

  FleetReads on_leader = ReadFleet(leader, block.id(), dry_run);
  const FleetReads on_follower = ReadFleet(follower, block.id(), dry_run);
  // The plan is the leader's alone: its explanation says the admitted gang
  // has no place in it, the follower's says nothing.
  EXPECT_EQ(on_leader.explained.gang().plan_status(),
            v1::PLAN_STATUS_NOT_PENDING);
  EXPECT_EQ(on_follower.explained.gang().plan_status(),
            v1::PLAN_STATUS_UNSPECIFIED);
  *on_leader.explained.mutable_gang() = WithoutPlan(on_leader.explained.gang());
  EXPECT_SAME_MESSAGE(on_follower.nodes, on_leader.nodes);
  EXPECT_SAME_MESSAGE(on_follower.topology, on_leader.topology);
  EXPECT_SAME_MESSAGE(on_follower.config, on_leader.config);
  EXPECT_SAME_MESSAGE(on_follower.explained, on_leader.explained);
  EXPECT_SAME_MESSAGE(on_follower.dry_run, on_leader.dry_run);
  EXPECT_SAME_MESSAGE(on_follower.audit, on_leader.audit);
  // Queues: the same queues and usage (the fair-share figures decay with
  // the leader's clock).
  ASSERT_EQ(on_follower.queues.queues_size(), on_leader.queues.queues_size());
  for (int i = 0; i < on_leader.queues.queues_size(); ++i) {
    const v1::Queue& f = on_follower.queues.queues(i);
    const v1::Queue& l = on_leader.queues.queues(i);
    EXPECT_EQ(f.name(), l.name());
    EXPECT_EQ(f.weight(), l.weight());
    EXPECT_EQ(f.status().pending_gangs(), l.status().pending_gangs());
    EXPECT_EQ(f.status().active_gangs(), l.status().active_gangs());
    EXPECT_EQ(f.status().held_gpus().size(), l.status().held_gpus().size());
  }
  // Each answer names the revision it was read at.
  EXPECT_EQ(on_follower.nodes.revision(), revision);
  EXPECT_EQ(on_follower.topology.revision(), revision);
  EXPECT_EQ(on_follower.queues.revision(), revision);
  EXPECT_EQ(on_follower.explained.revision(), revision);
  EXPECT_EQ(on_follower.dry_run.revision(), revision);
  // What was read is what happened: the block gang's nodes, the fit, the
  // new queue and its audit record.
  EXPECT_EQ(on_follower.explained.gang().state(), v1::GANG_STATE_ADMITTED);
  EXPECT_TRUE(on_follower.dry_run.fits()) << on_follower.dry_run.reason();
  EXPECT_EQ(on_follower.dry_run.placement_size(), 2);
  EXPECT_EQ(on_follower.queues.queues_size(), 3);
  ASSERT_GT(on_follower.audit.records_size(), 0);
  EXPECT_EQ(
      on_follower.audit.records(on_follower.audit.records_size() - 1).method(),
      "/phalanx.v1.Admin/PutQueue");
  // The history export too, run times aside (each counts the running
  // gangs' run to its own read).
  auto history = [](DaemonProcess& replica) {
    auto admin = replica.Admin();
    v1::ExportHistoryResponse response = CallOk(
        *admin, &v1::Admin::Stub::ExportHistory, v1::ExportHistoryRequest());
    for (v1::HistoryRecord& record : *response.mutable_records()) {
      record.clear_run_time();
    }
    response.clear_read_time();
    return response;
  };
  const v1::ExportHistoryResponse exported = history(follower);
  EXPECT_EQ(exported.records_size(), 3);
  EXPECT_EQ(exported.revision(), revision);
  EXPECT_SAME_MESSAGE(exported, history(leader));
  // A dry run changed nothing on the follower.
  const FleetReads again = ReadFleet(follower, block.id(), dry_run);
  EXPECT_SAME_MESSAGE(again.nodes, on_follower.nodes);
  EXPECT_EQ(ReadRevision(*follower.Scheduler()), revision);
  EXPECT_EQ(ListAll(*follower.Scheduler()).gangs_size(), 3);
}

// The lines of the /metrics text on `port` that start with one of
// `prefixes`, sorted; those reading 0 left out (a label set once reported
// stays, at 0: a follower restored since never saw it).
std::vector<std::string> MetricLines(int port,
                                     const std::vector<std::string>& prefixes) {
  std::vector<std::string> lines;
  for (absl::string_view line :
       absl::StrSplit(HttpGet(port, "/metrics"), '\n')) {
    for (const std::string& prefix : prefixes) {
      if (absl::StartsWith(line, prefix) && !absl::EndsWith(line, " 0")) {
        lines.emplace_back(line);
      }
    }
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

TEST_F(HaFollowTest, AFollowersMetricsCarryTheSchedulerGauges) {
  StartReplicas(1);
  DaemonProcess& leader = *replicas_[0];
  DaemonProcess& follower = *replicas_[1];
  auto stub = leader.Scheduler();
  SubmitOk(*stub, SubmitRequest("a", 4, 8, "block"));
  SubmitOk(*stub, SubmitRequest("b", 4, 8, "block"));
  SubmitOk(*stub, SubmitRequest("b", 1, 8));  // pending: no room left
  const std::vector<std::string> gauges = {"phalanx_gangs{", "phalanx_gpus{",
                                           "phalanx_pending_gangs_by_reason{",
                                           "phalanx_queue_held_gpus{"};
  std::vector<std::string> on_leader, on_follower;
  // The follower refreshes its gauges every few seconds.
  const bool same = Eventually([&] {
    on_leader = MetricLines(leader.metrics_port(), gauges);
    on_follower = MetricLines(follower.metrics_port(), gauges);
    return !on_leader.empty() && on_leader == on_follower;
  });
  EXPECT_TRUE(same) << absl::StrJoin(on_leader, "\n") << "\nvs\n"
                    << absl::StrJoin(on_follower, "\n");
  EXPECT_THAT(on_follower,
              ::testing::Contains(::testing::HasSubstr("state=\"PENDING\"")));
}

// `token` with its revision replaced by `revision`.
std::string WithRevision(const std::string& token, int64_t revision) {
  return absl::StrCat(revision, token.substr(token.find('.')));
}

TEST_F(HaFollowTest, APageTokenFromOneReplicaReadsOnAnother) {
  StartReplicas(1);
  DaemonProcess& leader = *replicas_[0];
  DaemonProcess& follower = *replicas_[1];
  auto stub = leader.Scheduler();
  for (int i = 0; i < 5; ++i) SubmitOk(*stub, SubmitRequest("b", 1, 1));
  v1::ListGangsRequest request;
  request.set_page_size(2);
  const v1::ListGangsResponse first =
      CallOk(*stub, &v1::Scheduler::Stub::ListGangs, request);
  ASSERT_FALSE(first.next_page_token().empty());
  request.set_page_token(first.next_page_token());
  const v1::ListGangsResponse second =
      CallOk(*stub, &v1::Scheduler::Stub::ListGangs, request);
  // The listing goes on on the follower after newer writes: at the first
  // page's revision still.
  const int64_t later = SubmitOk(*stub, SubmitRequest("b", 1, 1)).revision();
  ASSERT_TRUE(ReachesRevision(follower, later)) << follower.output();
  auto follower_stub = follower.Scheduler();
  const v1::ListGangsResponse on_follower =
      CallOk(*follower_stub, &v1::Scheduler::Stub::ListGangs, request);
  // The leader's page carries the plan of its pending gangs; a follower
  // makes no plan.
  EXPECT_SAME_MESSAGE(on_follower, WithoutPlans(second));
  EXPECT_EQ(on_follower.revision(), first.revision());
  // A token of a revision this replica has not applied yet: retry.
  auto status_of = [&](const std::string& token) {
    v1::ListGangsRequest forged = request;
    forged.set_page_token(token);
    grpc::ClientContext context;
    v1::ListGangsResponse response;
    return follower_stub->ListGangs(&context, forged, &response);
  };
  const grpc::Status ahead =
      status_of(WithRevision(first.next_page_token(), later + 1000));
  EXPECT_EQ(ahead.error_code(), grpc::StatusCode::UNAVAILABLE)
      << ahead.error_message();
  // Once no view of its revision is kept (a restart keeps none): list
  // again.
  ASSERT_EQ(follower.Terminate(), 0);
  ASSERT_TRUE(follower.Start()) << follower.output();
  follower_stub = follower.Scheduler();
  const grpc::Status gone = status_of(first.next_page_token());
  EXPECT_EQ(gone.error_code(), grpc::StatusCode::ABORTED)
      << gone.error_message();
  EXPECT_THAT(gone.error_message(),
              ::testing::HasSubstr("list again from the first page"));
}

TEST_F(HaFollowTest, ALeaseDoesNotLapseBecauseOfTheFailover) {
  StartReplicas(1);
  auto stub = replicas_[0]->Scheduler();
  v1::SubmitGangRequest request = SubmitRequest("a", 1, 8, "", "leased");
  request.mutable_spec()->mutable_lease_duration()->set_seconds(1);
  const v1::Gang leased = SubmitOk(*stub, request);
  ASSERT_EQ(leased.state(), v1::GANG_STATE_ADMITTED);
  // Nobody renews it while the leader dies and a follower takes over (more
  // than the 1 s lease: a TTL of 2 s at least); the new leader restores it
  // like a restart does, with the start-up grace.
  replicas_[0]->Kill9();
  ASSERT_EQ(NewLeader(0), 1) << replicas_[1]->output();
  auto new_stub = replicas_[1]->Scheduler();
  SubmitOk(*new_stub, SubmitRequest("b", 1, 1));  // a batch, a cycle
  const v1::Gang after = GetOk(*new_stub, leased.id());
  EXPECT_EQ(after.state(), v1::GANG_STATE_ADMITTED) << after.DebugString();
  // And it can still be renewed there.
  v1::RenewGangLeaseRequest renew;
  renew.set_gang_id(leased.id());
  v1::RenewGangLeaseResponse renewed;
  grpc::ClientContext context;
  EXPECT_TRUE(new_stub->RenewGangLease(&context, renew, &renewed).ok());
}

TEST_F(HaFollowTest, AReplicaWithAnEmptyDataDirCatchesUp) {
  StartReplicas(0);
  auto stub = replicas_[0]->Scheduler();
  for (int i = 0; i < 5; ++i) SubmitOk(*stub, SubmitRequest("a", 1, 8));
  const v1::ListGangsResponse on_leader = ListAll(*stub);
  auto fresh = Replica("fresh");  // a new temporary data dir
  ASSERT_TRUE(fresh->Start()) << fresh->output();
  ASSERT_TRUE(ReachesRevision(*fresh, on_leader.revision()));
  EXPECT_EQ(HealthStatus(fresh->channel(), ""), kServing);
  EXPECT_EQ(ListAll(*fresh->Scheduler()).SerializeAsString(),
            WithoutPlans(on_leader).SerializeAsString());
  StopAndCheckStores({fresh.get()});
}

TEST_F(HaFollowTest, ANewReplicaCatchesUpFromASnapshotOnceTheLogIsCompacted) {
  // Snapshots every 4 entries and no other replica to hold the log back:
  // the log a fresh replica would replay from seq 1 is gone, so it must
  // load a snapshot, then follow the entries after it.
  const std::vector<std::string> snapshots = {"--etcd-snapshot-entries=4"};
  replicas_.push_back(Replica("r0", snapshots));
  ASSERT_TRUE(replicas_[0]->Start()) << replicas_[0]->output();
  ASSERT_TRUE(Eventually([&] {
    return HealthStatus(replicas_[0]->channel(), kLeader) == kServing;
  })) << replicas_[0]->output();
  auto stub = replicas_[0]->Scheduler();
  for (int i = 0; i < 16; ++i) SubmitOk(*stub, SubmitRequest("a", 1, 8));

  auto fresh = Replica("fresh", snapshots);  // a new temporary data dir
  ASSERT_TRUE(fresh->Start()) << fresh->output();
  ASSERT_TRUE(ReachesRevision(*fresh, ListAll(*stub).revision()));
  for (int i = 0; i < 3; ++i) SubmitOk(*stub, SubmitRequest("a", 1, 8));
  const v1::ListGangsResponse on_leader = ListAll(*stub);
  ASSERT_TRUE(ReachesRevision(*fresh, on_leader.revision()));
  EXPECT_EQ(ListAll(*fresh->Scheduler()).SerializeAsString(),
            WithoutPlans(on_leader).SerializeAsString());
  EXPECT_EQ(HealthStatus(fresh->channel(), ""), kServing);
  fresh->ReadOutput(200);
  EXPECT_THAT(fresh->output(),
              ::testing::HasSubstr("loaded the snapshot at seq"));
  StopAndCheckStores({fresh.get()});
}

TEST_F(HaFollowTest, EtcdMembersDieOneAtATime) {
  StartReplicas(1);
  auto submit = [&](int replica, const std::string& request_id) {
    v1::SubmitGangResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(15)));
    return replicas_[replica]->Scheduler()->SubmitGang(
        &context, SubmitRequest("a", 1, 8, "", request_id), &response);
  };
  // Submits on whichever replica leads (the request id makes a repeat
  // harmless); returns the replica that acknowledged, or -1.
  auto submit_on_leader = [&](const std::string& request_id) {
    int acknowledged = -1;
    Eventually(
        [&] {
          for (int i = 0; i < static_cast<int>(replicas_.size()); ++i) {
            if (submit(i, request_id).ok()) {
              acknowledged = i;
              return true;
            }
          }
          return false;
        },
        100);
    return acknowledged;
  };
  ASSERT_TRUE(submit(0, "quorum-3").ok());
  // With 2 of 3 members the service stays up: the clients move to a live
  // member. (While etcd elects a new raft leader, lease renewals fail; with
  // a short lease the replica may give leadership up, and the other one
  // takes over: either way a replica takes the write.)
  cluster_->Kill(0);
  const int leader = submit_on_leader("quorum-2");
  replicas_[0]->ReadOutput();
  ASSERT_GE(leader, 0) << replicas_[0]->output();
  const int other = 1 - leader;
  if (other == 0) {
    // r0 gave leadership up and exited: it comes back as a follower.
    replicas_[0]->Kill9();
    ASSERT_TRUE(replicas_[0]->Start()) << replicas_[0]->output();
  }
  ASSERT_TRUE(ReachesRevision(
      *replicas_[other], ListAll(*replicas_[leader]->Scheduler()).revision()));
  // Without quorum a write fails (the leader cannot commit, so it stops) and
  // is not acknowledged.
  cluster_->Kill(1);
  const grpc::Status lost = submit(leader, "quorum-1");
  EXPECT_FALSE(lost.ok());
  std::printf("without quorum: %d %s\n", lost.error_code(),
              lost.error_message().c_str());
  EXPECT_TRUE(lost.error_code() == grpc::StatusCode::UNAVAILABLE ||
              lost.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
      << lost.error_message();
  // Quorum back: a replica leads again (the follower, or the old leader
  // restarted) with every acknowledged write and nothing half-written.
  ASSERT_TRUE(cluster_->Restart(1)) << cluster_->logs();
  int next = NewLeader(-1);
  if (next < 0) {
    // Both stopped (a replica exits when it cannot renew for a lease TTL):
    // restart them on their data.
    for (auto& replica : replicas_) {
      replica->Kill9();
      ASSERT_TRUE(replica->Start()) << replica->output();
    }
    next = NewLeader(-1);
  }
  ASSERT_GE(next, 0);
  auto leader_stub = replicas_[next]->Scheduler();
  const v1::ListGangsResponse listed = ListAll(*leader_stub);
  std::map<std::string, int> request_ids;
  for (const v1::Gang& gang : listed.gangs()) {
    ++request_ids[gang.spec().request_id()];
  }
  EXPECT_EQ(request_ids["quorum-3"], 1);
  EXPECT_EQ(request_ids["quorum-2"], 1);
  EXPECT_LE(request_ids["quorum-1"], 1);  // unknown outcome, never twice
  CheckNoGpuTwice(listed);
}

// A paused etcd member stands for one cut off by the network: its sockets
// stay open and nothing answers (tests/partition_test.cc cuts real links).
TEST_F(HaFollowTest, AFollowerCutOffFromEtcdStopsServingWithinItsBound) {
  StartReplicas(0);
  const int member = cluster_->QuietMember(0);
  ASSERT_GE(member, 0) << cluster_->logs();
  // The follower talks to that member only.
  replicas_.push_back(Replica("r1", {}, {member}));
  DaemonProcess& follower = *replicas_[1];
  ASSERT_TRUE(follower.Start()) << follower.output();
  auto stub = replicas_[0]->Scheduler();
  const v1::Gang before = SubmitOk(*stub, SubmitRequest("a", 1, 8));
  ASSERT_TRUE(ReachesRevision(follower, ListAll(*stub).revision()));
  ASSERT_TRUE(Eventually(
      [&] { return HealthStatus(follower.channel(), "") == kServing; }));
  // A watch open on the follower, read until it ends (at most 20 s).
  auto follower_stub = follower.Scheduler();
  grpc::ClientContext watch_context;
  watch_context.set_deadline(
      absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  v1::WatchGangsRequest watch_request;
  watch_request.set_after_revision(ListAll(*follower_stub).revision());
  auto watch = follower_stub->WatchGangs(&watch_context, watch_request);
  std::atomic<bool> watch_ended{false};
  grpc::Status watch_status;
  absl::Time watch_ended_at;
  std::thread watching([&] {
    v1::GangEvent event;
    while (watch->Read(&event)) {
    }
    watch_status = watch->Finish();
    watch_ended_at = absl::Now();
    watch_ended = true;
  });

  const absl::Time cut = absl::Now();
  cluster_->Pause(member);
  // Bound: half the 2 s lease TTL plus a tenth (docs/ha.md); allowed here
  // twice the TTL for a loaded machine, far below what a watch's resync
  // and a call's deadline used to take (10 s and more).
  EXPECT_TRUE(Eventually(
      [&] { return HealthStatus(follower.channel(), "") != kServing; }, 80))
      << follower.output();
  const absl::Duration not_serving = absl::Now() - cut;
  // The open watch ends within the same bound, retryably, saying why.
  EXPECT_TRUE(Eventually([&] { return watch_ended.load(); }, 80));
  watching.join();
  EXPECT_EQ(watch_status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << watch_status.error_message();
  EXPECT_THAT(watch_status.error_message(),
              ::testing::HasSubstr("lost touch with etcd"));
  {
    v1::GetGangRequest request;
    request.set_gang_id(before.id());
    v1::GetGangResponse response;
    grpc::ClientContext context;
    const grpc::Status status =
        follower_stub->GetGang(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE)
        << status.error_message();
  }
  // The leader still commits (quorum intact); healed, the follower
  // catches up and serves again.
  SubmitOk(*stub, SubmitRequest("a", 1, 8));
  const int64_t revision = ListAll(*stub).revision();
  const absl::Time healed = absl::Now();
  cluster_->Resume(member);
  ASSERT_TRUE(ReachesRevision(follower, revision)) << follower.output();
  ASSERT_TRUE(Eventually(
      [&] { return HealthStatus(follower.channel(), "") == kServing; }));
  std::printf(
      "cut off from etcd: the follower stopped SERVING %.2f s and ended its "
      "watch %.2f s after the cut (lease TTL 2 s); healed, it read the "
      "leader's revision %.2f s later\n",
      absl::ToDoubleSeconds(not_serving),
      absl::ToDoubleSeconds(watch_ended_at - cut),
      absl::ToDoubleSeconds(absl::Now() - healed));
  EXPECT_EQ(ListAll(*follower_stub).SerializeAsString(),
            WithoutPlans(ListAll(*stub)).SerializeAsString());
}

// A follower that starts while its etcd member hangs has never caught up:
// it never reports SERVING nor serves a read until a catch-up succeeds.
TEST_F(HaFollowTest, AFollowerStartedWithoutEtcdServesNothingUntilCaughtUp) {
  StartReplicas(0);
  const int member = cluster_->QuietMember(0);
  ASSERT_GE(member, 0) << cluster_->logs();
  auto stub = replicas_[0]->Scheduler();
  const v1::Gang gang = SubmitOk(*stub, SubmitRequest("a", 1, 8));
  cluster_->Pause(member);
  // The follower talks to that member only.
  replicas_.push_back(Replica("r1", {}, {member}));
  DaemonProcess& follower = *replicas_[1];
  ASSERT_TRUE(follower.Start()) << follower.output();
  auto follower_stub = follower.Scheduler();
  // Twice the 2 s lease TTL, probed every 50 ms: never SERVING, every
  // read refused.
  int probes = 0;
  for (const absl::Time end = absl::Now() + absl::Seconds(4);
       absl::Now() < end && probes < 200; ++probes) {
    ASSERT_NE(HealthStatus(follower.channel(), ""), kServing)
        << "after " << probes << " probes\n"
        << follower.output();
    v1::GetGangRequest request;
    request.set_gang_id(gang.id());
    v1::GetGangResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    const grpc::Status status =
        follower_stub->GetGang(&context, request, &response);
    ASSERT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE)
        << status.error_message();
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_GT(probes, 10);
  // Once etcd answers, it catches up and serves.
  cluster_->Resume(member);
  ASSERT_TRUE(Eventually([&] {
    return HealthStatus(follower.channel(), "") == kServing;
  })) << follower.output();
  EXPECT_EQ(GetOk(*follower_stub, gang.id()).id(), gang.id());
}

TEST_F(HaFollowTest, AHungEtcdMemberUnderTheLeaderCausesNoFailover) {
  const int member = cluster_->QuietMember();
  ASSERT_GE(member, 0) << cluster_->logs();
  // The leader's client starts on that member.
  std::vector<int> members = {member};
  for (int m = 0; m < 3; ++m) {
    if (m != member) members.push_back(m);
  }
  replicas_.push_back(Replica("r0", {}, members));
  ASSERT_TRUE(replicas_[0]->Start()) << replicas_[0]->output();
  ASSERT_TRUE(Eventually([&] {
    return HealthStatus(replicas_[0]->channel(), kLeader) == kServing;
  })) << replicas_[0]->output();
  replicas_.push_back(Replica("r1"));
  ASSERT_TRUE(replicas_[1]->Start()) << replicas_[1]->output();

  Writers writers({replicas_[0].get(), replicas_[1].get()}, 60,
                  /*stop_on_error=*/false);
  writers.Start();
  Eventually([&] { return writers.acknowledged() >= 20; });
  const absl::Time cut = absl::Now();
  cluster_->Pause(member);
  writers.Join();
  cluster_->Resume(member);
  std::printf(
      "an etcd member hung under the leader: %d writes acknowledged, "
      "%zu errors, longest write gap %.2f s\n",
      writers.acknowledged(), writers.errors(),
      absl::ToDoubleSeconds(writers.LongestGap(cut)));
  replicas_[0]->ReadOutput();
  EXPECT_EQ(HealthStatus(replicas_[0]->channel(), kLeader), kServing)
      << replicas_[0]->output();
  EXPECT_EQ(replicas_[0]->output().find("not the leader"), std::string::npos)
      << replicas_[0]->output();
  EXPECT_NE(HealthStatus(replicas_[1]->channel(), kLeader), kServing);
  writers.CheckErrorsAreRetryable();
  writers.Check(ListAll(*replicas_[0]->Scheduler()));
}

TEST_F(HaFollowTest, ALeaderCutOffFromEtcdStepsDownAndExitsDeposed) {
  const int member = cluster_->QuietMember();
  ASSERT_GE(member, 0) << cluster_->logs();
  // The leader talks to that member only; the follower to the others.
  replicas_.push_back(Replica("r0", {}, {member}));
  ASSERT_TRUE(replicas_[0]->Start()) << replicas_[0]->output();
  ASSERT_TRUE(Eventually([&] {
    return HealthStatus(replicas_[0]->channel(), kLeader) == kServing;
  })) << replicas_[0]->output();
  std::vector<int> others;
  for (int m = 0; m < 3; ++m) {
    if (m != member) others.push_back(m);
  }
  replicas_.push_back(Replica("r1", {}, others));
  ASSERT_TRUE(replicas_[1]->Start()) << replicas_[1]->output();

  Writers writers({replicas_[0].get(), replicas_[1].get()}, 80,
                  /*stop_on_error=*/false);
  writers.Start();
  Eventually([&] { return writers.acknowledged() >= 20; });
  const absl::Time cut = absl::Now();
  cluster_->Pause(member);
  ASSERT_TRUE(Eventually([&] {
    return HealthStatus(replicas_[0]->channel(), kLeader) != kServing;
  })) << replicas_[0]->output();
  const absl::Duration stepped_down = absl::Now() - cut;
  const int next = NewLeader(0);
  ASSERT_EQ(next, 1) << replicas_[1]->output();
  const absl::Duration new_leader = absl::Now() - cut;
  // The documented exit of a deposed leader.
  EXPECT_EQ(replicas_[0]->WaitForExit(absl::Seconds(10)), 3)
      << replicas_[0]->output();
  writers.Join();
  cluster_->Resume(member);
  std::printf(
      "leader cut off from etcd: it stopped reporting Leader %.2f s after "
      "the cut, a new leader served %.2f s after it (lease TTL 2 s); "
      "longest write gap %.2f s, %zu errors\n",
      absl::ToDoubleSeconds(stepped_down), absl::ToDoubleSeconds(new_leader),
      absl::ToDoubleSeconds(writers.LongestGap(cut)), writers.errors());
  writers.CheckErrorsAreRetryable();
  writers.Check(ListAll(*replicas_[1]->Scheduler()));
}

}  // namespace
}  // namespace phalanx::testing
