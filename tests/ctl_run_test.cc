// `phalanxctl run` against the real daemon, with a fake torchrun (a shell
// script) that records its environment rank by rank: the environment
// against the placement, failure exit codes, preemption (SIGTERM, then the
// acknowledgement, then exit 75), Ctrl-C (the gang is cancelled), and an
// elastic gang's grow and shrink (every rank restarted at the new size, or
// with --elastic-rendezvous only the ranks added or removed).
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/child_process.h"
#include "tests/daemon.h"
#include "tests/etcd_cluster.h"

namespace phalanx::testing {
namespace {

using ::testing::HasSubstr;

// Records the launcher's variables (and FAKE_SSH_HOST, set by fake_ssh.sh)
// and the directory it started in (START_DIR) in OUT/rank-R.env and the
// hostfile in OUT/hostfile-R; then exits 0
// ("ok"), exits 0 after 3 s ("nap"), exits 3 on rank 1 ("fail"), or waits for
// SIGTERM and records it in OUT/term-R ("sleep").
constexpr char kFakeTorchrun[] = R"sh(#!/bin/sh
out="$1"; mode="$2"
# Installed before the environment file is written: tests signal the ranks
# as soon as that file exists.
if [ "$mode" = sleep ]; then
  trap 'echo term > "$out/term-$NODE_RANK"; exit 0' TERM
fi
env | grep -E '^(PHALANX_|MASTER_|NNODES=|NODE_RANK=|NPROC_PER_NODE=|CUDA_VISIBLE_DEVICES=|FAKE_SSH_HOST=)' | sort > "$out/rank-$NODE_RANK.tmp"
echo "START_DIR=$(pwd -P)" >> "$out/rank-$NODE_RANK.tmp"
cp "$PHALANX_HOSTFILE" "$out/hostfile-$NODE_RANK"
mv "$out/rank-$NODE_RANK.tmp" "$out/rank-$NODE_RANK.env"
case "$mode" in
  ok) exit 0 ;;
  nap) sleep 3; exit 0 ;;
  fail) if [ "$NODE_RANK" = 1 ]; then exit 3; fi; exit 0 ;;
  sleep) sleep 120 & wait $! ;;
esac
)sh";

// Stands in for ssh: "fake_ssh.sh HOST WORDS..." runs WORDS through a shell,
// as sshd does, with FAKE_SSH_HOST=HOST, starting in / (as a remote shell
// starts in the remote $HOME, not in the launching directory).
constexpr char kFakeSsh[] = R"(#!/bin/sh
host="$1"; shift
cd / && FAKE_SSH_HOST="$host" exec /bin/sh -c "$*"
)";

// The demo fleet with addresses, but none for node-001 (MASTER_ADDR falls
// back to the node id there).
std::string FleetWithAddresses() {
  std::vector<std::string> nodes;
  for (int b = 0; b < 2; ++b) {
    for (int r = 0; r < 2; ++r) {
      for (int n = 0; n < 2; ++n) {
        const std::string id = absl::StrFormat("node-%d%d%d", b, r, n);
        const std::string address =
            id == "node-001" ? "" : absl::StrFormat("10.0.%d.%d", b * 2 + r, n);
        nodes.push_back(absl::StrFormat(
            R"({"id":"%s","gpuModel":"H100","gpuCount":8,"address":"%s",)"
            R"("labels":{"block":"b%d","rack":"b%d-r%d"}})",
            id, address, b, b, r));
      }
    }
  }
  return absl::StrCat(R"({"nodes":[)", absl::StrJoin(nodes, ","), "]}");
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

class CtlRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<DaemonProcess>();
    StartDaemon(
        {"--config=" + daemon_->WriteFile("config.json", DemoConfigJson()),
         "--fleet=" + daemon_->WriteFile("fleet.json", FleetWithAddresses()),
         "--queues=" + daemon_->WriteFile("queues.json", DemoQueuesJson())});
  }

  // Starts daemon_ with `args`; writes the fake torchrun and ssh.
  void StartDaemon(const std::vector<std::string>& args) {
    daemon_->AddArgs(args);
    ASSERT_TRUE(daemon_->Start()) << daemon_->output();
    scheduler_ = daemon_->Scheduler();
    out_ = std::filesystem::path(daemon_->data_dir()).parent_path() / "out";
    std::filesystem::create_directories(out_);
    torchrun_ = daemon_->WriteFile("fake_torchrun.sh", kFakeTorchrun);
    ssh_ = daemon_->WriteFile("fake_ssh.sh", kFakeSsh);
  }

  // A phalanxctl still running gets SIGTERM first (it stops its ranks,
  // which are in process groups of their own), SIGKILL 20 s later.
  void TearDown() override { phalanxctl_.Stop(absl::Seconds(20)); }

  // Starts `phalanxctl --server … ARGS` with stdout and stderr to a file.
  void Start(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {PHALANXCTL_PATH, "--server",
                                     daemon_->address()};
    argv.insert(argv.end(), args.begin(), args.end());
    log_ = (out_ / "phalanxctl.log").string();
    ASSERT_TRUE(phalanxctl_.Start({.args = argv,
                                   .env = {},
                                   .output_path = log_,
                                   .append_output = false}));
  }

  // Waits (at most 120 s) for phalanxctl to exit; returns its exit code.
  int Finish() {
    phalanxctl_.WaitUntil([] { return false; }, absl::Seconds(120),
                          absl::Milliseconds(100));
    if (!phalanxctl_.Running()) {
      ExpectNoTsanReport("phalanxctl (" + log_ + ")", ReadFile(log_));
      return phalanxctl_.exit_code();
    }
    ADD_FAILURE() << "phalanxctl did not exit:\n" << ReadFile(log_);
    return -1;
  }

  // The gang id phalanxctl printed ("submitted g-…"), waiting up to 30 s.
  std::string GangId() {
    const std::regex re("submitted (g-[0-9]+)");
    for (int i = 0; i < 300; ++i) {
      std::smatch match;
      const std::string log = ReadFile(log_);
      if (std::regex_search(log, match, re)) return match[1];
      absl::SleepFor(absl::Milliseconds(100));
    }
    ADD_FAILURE() << "no gang id in:\n" << ReadFile(log_);
    return "";
  }

  // Waits (at most 60 s) until the gang is RUNNING and every rank wrote
  // its environment file.
  void WaitRunning(const std::string& id, int ranks) {
    for (int i = 0; i < 600; ++i) {
      bool all = GetOk(*scheduler_, id).state() == v1::GANG_STATE_RUNNING;
      for (int r = 0; all && r < ranks; ++r) {
        all = std::filesystem::exists(out_ / absl::StrCat("rank-", r, ".env"));
      }
      if (all) return;
      absl::SleepFor(absl::Milliseconds(100));
    }
    ADD_FAILURE() << "not running:\n" << ReadFile(log_);
  }

  // Changes the daemon's config with `change` (compare-and-set).
  void UpdateConfig(const std::function<void(v1::Config&)>& change) {
    grpc::ClientContext get_context;
    v1::Config config;
    ASSERT_TRUE(daemon_->Admin()->GetConfig(&get_context, {}, &config).ok());
    change(config);
    grpc::ClientContext context;
    v1::UpdateConfigRequest request;
    *request.mutable_config() = config;
    request.set_expected_version(config.version());
    v1::Config updated;
    ASSERT_TRUE(
        daemon_->Admin()->UpdateConfig(&context, request, &updated).ok());
  }

  // Preemption of running gangs at once, with a long grace period (the
  // launcher's acknowledgement ends it).
  void EnablePreemption() {
    UpdateConfig([](v1::Config& config) {
      config.mutable_preemption()->set_enabled(true);
      config.mutable_preemption()->mutable_min_runtime()->set_seconds(0);
      config.mutable_preemption()->mutable_grace_period()->set_seconds(600);
    });
  }

  // Waits (at most 30 s) until `predicate` holds of the gang; returns it.
  v1::Gang WaitForGang(const std::string& id,
                       const std::function<bool(const v1::Gang&)>& predicate,
                       const std::string& what) {
    v1::Gang gang;
    for (int i = 0; i < 300; ++i) {
      gang = GetOk(*scheduler_, id);
      if (predicate(gang)) return gang;
      absl::SleepFor(absl::Milliseconds(100));
    }
    ADD_FAILURE() << id << " never " << what << ": " << gang.DebugString()
                  << "\n"
                  << ReadFile(log_);
    return gang;
  }

  // Waits (at most 60 s) until ranks 0..ranks-1 all wrote their
  // environment with NNODES=nnodes.
  void WaitForRanksAt(int ranks, int nnodes) {
    for (int i = 0; i < 600; ++i) {
      bool all = true;
      for (int r = 0; all && r < ranks; ++r) {
        all =
            std::filesystem::exists(out_ / absl::StrCat("rank-", r, ".env")) &&
            RankEnv(r)["NNODES"] == absl::StrCat(nnodes);
      }
      if (all) return;
      absl::SleepFor(absl::Milliseconds(100));
    }
    ADD_FAILURE() << "ranks 0.." << ranks - 1
                  << " never ran with NNODES=" << nnodes << ":\n"
                  << ReadFile(log_);
  }

  bool Terminated(int rank) {
    return std::filesystem::exists(out_ / absl::StrCat("term-", rank));
  }

  // The gang as admitted (its placement), from the watch history.
  v1::Gang Admitted(const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::WatchGangsRequest request;
    request.set_after_revision(0);
    request.add_gang_ids(id);
    auto reader = scheduler_->WatchGangs(&context, request);
    v1::GangEvent event;
    while (reader->Read(&event)) {
      if (event.type() == v1::EVENT_TYPE_ADMITTED) {
        context.TryCancel();
        return event.gang();
      }
    }
    ADD_FAILURE() << "no ADMITTED event for " << id;
    return v1::Gang();
  }

  // KEY=VALUE lines of OUT/rank-R.env.
  std::map<std::string, std::string> RankEnv(int rank) {
    std::map<std::string, std::string> env;
    for (absl::string_view line : absl::StrSplit(
             ReadFile((out_ / absl::StrCat("rank-", rank, ".env")).string()),
             '\n', absl::SkipEmpty())) {
      std::vector<std::string> kv =
          absl::StrSplit(line, absl::MaxSplits('=', 1));
      if (kv.size() == 2) env[kv[0]] = kv[1];
    }
    return env;
  }

  // The host phalanxctl must use for `node`: its address as ListNodes
  // reports it, else the node id.
  std::string Address(const std::string& node) {
    if (addresses_.empty()) {
      grpc::ClientContext context;
      v1::ListNodesResponse response;
      EXPECT_TRUE(daemon_->Fleet()->ListNodes(&context, {}, &response).ok());
      for (const v1::Node& n : response.nodes()) {
        addresses_[n.id()] = n.address().empty() ? n.id() : n.address();
      }
      // A daemon that keeps Node.address has the fleet file's.
      if (addresses_["node-010"] != "node-010") {
        EXPECT_EQ(addresses_["node-010"], "10.0.1.0");
        EXPECT_EQ(addresses_["node-001"], "node-001");
      }
    }
    return addresses_.at(node);
  }

  // The host of `node`'s ranks: its address over ssh; this machine's
  // loopback address under --exec local.
  std::string Host(const std::string& node, bool ssh) {
    return ssh ? Address(node) : "127.0.0.1";
  }

  // Checks rank r's environment and hostfile against the placement.
  void ExpectEnvironment(const v1::Gang& gang, bool ssh) {
    std::string hostfile;
    for (const v1::PodPlacement& pod : gang.placement()) {
      absl::StrAppend(&hostfile, Host(pod.node(), ssh),
                      " slots=", pod.gpu_indices_size(), "\n");
    }
    for (int r = 0; r < gang.placement_size(); ++r) {
      SCOPED_TRACE(absl::StrCat("rank ", r));
      const v1::PodPlacement& pod = gang.placement(r);
      std::map<std::string, std::string> env = RankEnv(r);
      EXPECT_EQ(env["PHALANX_GANG_ID"], gang.id());
      EXPECT_EQ(env["PHALANX_NODE"], pod.node());
      EXPECT_EQ(env["MASTER_ADDR"], Host(gang.placement(0).node(), ssh));
      EXPECT_EQ(env["MASTER_PORT"], ssh ? "1234" : "29500");
      EXPECT_EQ(env["NNODES"], absl::StrCat(gang.placement_size()));
      EXPECT_EQ(env["NODE_RANK"], absl::StrCat(r));
      EXPECT_EQ(env["NPROC_PER_NODE"], absl::StrCat(pod.gpu_indices_size()));
      EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"],
                absl::StrJoin(pod.gpu_indices(), ","));
      EXPECT_FALSE(env["PHALANX_HOSTFILE"].empty());
      EXPECT_EQ(ReadFile((out_ / absl::StrCat("hostfile-", r)).string()),
                hostfile);
      if (ssh) {
        EXPECT_EQ(env["FAKE_SSH_HOST"], Address(pod.node()));
      } else {
        EXPECT_EQ(env.count("FAKE_SSH_HOST"), 0u);
      }
    }
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::Scheduler::Stub> scheduler_;
  std::filesystem::path out_;
  std::string torchrun_, ssh_, log_;
  std::map<std::string, std::string> addresses_;
  ChildProcess phalanxctl_;
};

TEST_F(CtlRunTest, LocalRanksGetTheirPlacementAndTheGangSucceeds) {
  Start({"run", "--exec", "local", "--queue", "a", "--pods", "3", "--gpus", "4",
         "--level", "block", "--", "/bin/sh", torchrun_, out_.string(), "ok"});
  EXPECT_EQ(Finish(), 0) << ReadFile(log_);
  const std::string id = GangId();
  EXPECT_EQ(GetOk(*scheduler_, id).state(), v1::GANG_STATE_SUCCEEDED);
  const v1::Gang gang = Admitted(id);
  ASSERT_EQ(gang.placement_size(), 3);
  ExpectEnvironment(gang, /*ssh=*/false);
}

TEST_F(CtlRunTest, ExecTemplateStartsEachRankOnItsHost) {
  Start({"run", "--exec", absl::StrCat("/bin/sh ", ssh_, " {host}"),
         "--master-port", "1234", "--queue", "a", "--pods", "2", "--gpus", "8",
         "--", "/bin/sh", torchrun_, out_.string(), "ok"});
  EXPECT_EQ(Finish(), 0) << ReadFile(log_);
  const v1::Gang gang = Admitted(GangId());
  ASSERT_EQ(gang.placement_size(), 2);
  ExpectEnvironment(gang, /*ssh=*/true);
}

TEST_F(CtlRunTest, RanksStartInTheLaunchingDirectoryOrTheWorkdir) {
  const std::string here =
      std::filesystem::canonical(std::filesystem::current_path()).string();
  const std::string there = std::filesystem::canonical(out_).string();
  struct Case {
    std::string name;
    std::string exec;
    std::vector<std::string> workdir;  // the flag, or nothing
    std::string want;
  };
  const std::vector<Case> cases = {
      {"ssh, no flag", absl::StrCat("/bin/sh ", ssh_, " {host}"), {}, here},
      {"ssh, --workdir",
       absl::StrCat("/bin/sh ", ssh_, " {host}"),
       {"--workdir", out_.string()},
       there},
      {"local, --workdir", "local", {"--workdir", out_.string()}, there},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::filesystem::remove(out_ / "rank-0.env");
    std::vector<std::string> args = {"run", "--exec", c.exec};
    args.insert(args.end(), c.workdir.begin(), c.workdir.end());
    args.insert(args.end(), {"--queue", "a", "--pods", "1", "--gpus", "8", "--",
                             "/bin/sh", torchrun_, out_.string(), "ok"});
    Start(args);
    EXPECT_EQ(Finish(), 0) << ReadFile(log_);
    EXPECT_EQ(RankEnv(0)["START_DIR"], c.want);
  }
}

TEST_F(CtlRunTest, AnUnresolvableMasterAddrFailsBeforeAnyRankStarts) {
  // The demo fleet's way: no node has an address, so MASTER_ADDR is a node
  // id, which does not resolve here.
  v1::ListNodesResponse nodes;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(daemon_->Fleet()->ListNodes(&context, {}, &nodes).ok());
  }
  v1::UpsertNodesRequest upsert;
  for (v1::Node& node : *nodes.mutable_nodes()) {
    node.clear_address();
    node.clear_used_gpu_indices();
    node.clear_gang_ids();
    *upsert.add_nodes() = node;
  }
  {
    grpc::ClientContext context;
    v1::UpsertNodesResponse response;
    ASSERT_TRUE(
        daemon_->Fleet()->UpsertNodes(&context, upsert, &response).ok());
  }
  Start({"run", "--exec", absl::StrCat("/bin/sh ", ssh_, " {host}"), "--queue",
         "a", "--pods", "2", "--gpus", "8", "--", "/bin/sh", torchrun_,
         out_.string(), "ok"});
  EXPECT_EQ(Finish(), 1) << ReadFile(log_);
  const std::string log = ReadFile(log_);
  EXPECT_THAT(log, HasSubstr("does not resolve on this machine"));
  EXPECT_THAT(log, HasSubstr("--exec local"));
  const v1::Gang gang = GetOk(*scheduler_, GangId());
  EXPECT_EQ(gang.state(), v1::GANG_STATE_FAILED);
  EXPECT_THAT(gang.message(), HasSubstr("no rank started"));
  EXPECT_FALSE(std::filesystem::exists(out_ / "rank-0.env"));
  EXPECT_FALSE(std::filesystem::exists(out_ / "rank-1.env"));

  // Under --exec local every rank is on this machine: MASTER_ADDR is
  // loopback and the same fleet runs.
  Start({"run", "--exec", "local", "--queue", "a", "--pods", "2", "--gpus", "8",
         "--", "/bin/sh", torchrun_, out_.string(), "ok"});
  EXPECT_EQ(Finish(), 0) << ReadFile(log_);
  EXPECT_EQ(RankEnv(0)["MASTER_ADDR"], "127.0.0.1");
  EXPECT_EQ(RankEnv(1)["MASTER_ADDR"], "127.0.0.1");
}

TEST_F(CtlRunTest, TheLeaseIsRenewedWhileTheRanksRun) {
  // A 1 s lease outlived three times over: only renewals keep the gang.
  Start({"run", "--exec", "local", "--lease", "1s", "--queue", "a", "--pods",
         "1", "--gpus", "8", "--", "/bin/sh", torchrun_, out_.string(), "nap"});
  EXPECT_EQ(Finish(), 0) << ReadFile(log_);
  const v1::Gang gang = GetOk(*scheduler_, GangId());
  EXPECT_EQ(gang.state(), v1::GANG_STATE_SUCCEEDED) << gang.reason();
  EXPECT_EQ(gang.spec().lease_duration().seconds(), 1);
}

TEST_F(CtlRunTest, AFailingRankFailsTheGangWithItsExitCode) {
  Start({"run", "--exec", "local", "--queue", "a", "--pods", "3", "--gpus", "8",
         "--", "/bin/sh", torchrun_, out_.string(), "fail"});
  EXPECT_EQ(Finish(), 3) << ReadFile(log_);
  const std::string id = GangId();
  const v1::Gang gang = GetOk(*scheduler_, id);
  EXPECT_EQ(gang.state(), v1::GANG_STATE_FAILED);
  EXPECT_THAT(gang.message(), HasSubstr("rank 1"));
  EXPECT_THAT(ReadFile(log_), HasSubstr("rank 1 ("));
  EXPECT_THAT(ReadFile(log_), HasSubstr("exited with code 3"));
}

TEST_F(CtlRunTest, PreemptionStopsTheRanksAcknowledgesAndExits75) {
  EnablePreemption();
  Start({"run", "--exec", "local", "--queue", "a", "--pods", "8", "--gpus", "8",
         "--", "/bin/sh", torchrun_, out_.string(), "sleep"});
  const std::string id = GangId();
  WaitRunning(id, 8);
  v1::SubmitGangRequest high = SubmitRequest("a", 2, 8, "rack");
  high.mutable_spec()->set_priority(10);
  const v1::Gang preemptor = SubmitOk(*scheduler_, high);

  EXPECT_EQ(Finish(), 75) << ReadFile(log_);
  for (int r = 0; r < 8; ++r) {
    EXPECT_TRUE(std::filesystem::exists(out_ / absl::StrCat("term-", r)))
        << "rank " << r << " got SIGTERM";
  }
  EXPECT_THAT(ReadFile(log_), HasSubstr("preemption acknowledged"));
  EXPECT_EQ(GetOk(*scheduler_, id).state(), v1::GANG_STATE_PENDING);
  EXPECT_EQ(GetOk(*scheduler_, preemptor.id()).state(),
            v1::GANG_STATE_ADMITTED);
}

TEST_F(CtlRunTest, CtrlCStopsTheRanksAndCancelsTheGang) {
  Start({"run", "--exec", "local", "--queue", "a", "--pods", "2", "--gpus", "8",
         "--", "/bin/sh", torchrun_, out_.string(), "sleep"});
  const std::string id = GangId();
  WaitRunning(id, 2);
  phalanxctl_.Signal(SIGINT);
  EXPECT_EQ(Finish(), 130) << ReadFile(log_);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(std::filesystem::exists(out_ / absl::StrCat("term-", r)));
  }
  EXPECT_EQ(GetOk(*scheduler_, id).state(), v1::GANG_STATE_CANCELLED);
}

TEST_F(CtlRunTest, CtrlCWhilePendingCancelsTheGang) {
  SubmitOk(*scheduler_, SubmitRequest("b", 8, 8));  // the whole fleet
  Start({"run", "--exec", "local", "--queue", "a", "--pods", "1", "--gpus", "8",
         "--", "/bin/true"});
  const std::string id = GangId();
  for (int i = 0;
       i < 300 && ReadFile(log_).find("pending:") == std::string::npos; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_THAT(ReadFile(log_), HasSubstr(id + " pending: "));
  phalanxctl_.Signal(SIGINT);
  EXPECT_EQ(Finish(), 130) << ReadFile(log_);
  EXPECT_EQ(GetOk(*scheduler_, id).state(), v1::GANG_STATE_CANCELLED);
}

// An elastic gang of 1..4 pods started while a gang of queue b holds 6 of
// the 8 nodes: admitted at 2 pods. Once that gang is cancelled the elastic
// one grows to 4 at the next cycle (elastic.grow_interval 0s). Returns
// phalanxctl's gang id, its 2 ranks running.
class CtlRunElasticTest : public CtlRunTest {
 protected:
  std::string StartAtTwoOfFour(const std::vector<std::string>& mode_flags) {
    UpdateConfig([](v1::Config& config) {
      config.mutable_elastic()->mutable_grow_interval()->set_seconds(0);
    });
    blocker_ = SubmitOk(*scheduler_, SubmitRequest("b", 6, 8)).id();
    WaitForGang(
        blocker_,
        [](const v1::Gang& g) { return g.state() == v1::GANG_STATE_ADMITTED; },
        "admitted");
    std::vector<std::string> args = {"run", "--exec", "local", "--queue",
                                     "a",   "--pods", "4",     "--min-pods",
                                     "1",   "--gpus", "8"};
    args.insert(args.end(), mode_flags.begin(), mode_flags.end());
    args.insert(args.end(),
                {"--", "/bin/sh", torchrun_, out_.string(), "sleep"});
    Start(args);
    const std::string id = GangId();
    WaitRunning(id, 2);
    return id;
  }

  void CancelBlocker() {
    grpc::ClientContext context;
    v1::CancelGangRequest request;
    request.set_gang_id(blocker_);
    v1::CancelGangResponse response;
    ASSERT_TRUE(scheduler_->CancelGang(&context, request, &response).ok());
  }

  // An elastic gang of 2..8 pods on the empty fleet (8 pods), then a gang
  // of priority 10 needing 6 nodes: the elastic gang is asked to shrink to
  // 2. Returns phalanxctl's gang id.
  std::string StartAtEightThenShrink(const std::vector<std::string>& flags) {
    EnablePreemption();
    std::vector<std::string> args = {"run", "--exec", "local", "--queue",
                                     "a",   "--pods", "8",     "--min-pods",
                                     "2",   "--gpus", "8"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(),
                {"--", "/bin/sh", torchrun_, out_.string(), "sleep"});
    Start(args);
    const std::string id = GangId();
    WaitRunning(id, 8);
    v1::SubmitGangRequest high = SubmitRequest("a", 6, 8);
    high.mutable_spec()->set_priority(10);
    preemptor_ = SubmitOk(*scheduler_, high).id();
    return id;
  }

  std::string blocker_;
  std::string preemptor_;
};

TEST_F(CtlRunElasticTest, AGrowRestartsEveryRankAtTheNewSize) {
  const std::string id = StartAtTwoOfFour({});
  EXPECT_EQ(RankEnv(0)["NNODES"], "2");
  EXPECT_EQ(RankEnv(1)["PHALANX_NNODES_RANGE"], "1:4");
  CancelBlocker();

  WaitForRanksAt(4, 4);
  EXPECT_TRUE(Terminated(0) && Terminated(1))
      << "the ranks of 2 pods were stopped before the ranks of 4 started";
  EXPECT_THAT(ReadFile(log_),
              HasSubstr(id + " resized: 2 -> 4 pods; restarting every rank"));
  const v1::Gang gang = GetOk(*scheduler_, id);
  EXPECT_EQ(gang.state(), v1::GANG_STATE_RUNNING);
  EXPECT_EQ(gang.resizes(), 1);
  ASSERT_EQ(gang.placement_size(), 4);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(RankEnv(r)["NODE_RANK"], absl::StrCat(r));
    EXPECT_EQ(RankEnv(r)["PHALANX_NODE"], gang.placement(r).node());
  }
  std::string hostfile;
  for (int r = 0; r < 4; ++r) absl::StrAppend(&hostfile, "127.0.0.1 slots=8\n");
  EXPECT_EQ(ReadFile((out_ / "hostfile-3").string()), hostfile);

  phalanxctl_.Signal(SIGINT);
  EXPECT_EQ(Finish(), 130) << ReadFile(log_);
  EXPECT_EQ(GetOk(*scheduler_, id).state(), v1::GANG_STATE_CANCELLED);
}

TEST_F(CtlRunElasticTest, AGrowUnderElasticRendezvousStartsOnlyTheNewRanks) {
  const std::string id = StartAtTwoOfFour({"--elastic-rendezvous"});
  CancelBlocker();

  WaitForRanksAt(2, 2);
  for (int i = 0; i < 600 && !std::filesystem::exists(out_ / "rank-3.env");
       ++i) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  for (int r = 2; r < 4; ++r) {
    SCOPED_TRACE(absl::StrCat("new rank ", r));
    std::map<std::string, std::string> env = RankEnv(r);
    EXPECT_EQ(env["NNODES"], "4");
    EXPECT_EQ(env["NODE_RANK"], absl::StrCat(r));
    EXPECT_EQ(env["PHALANX_NNODES_RANGE"], "1:4");
  }
  EXPECT_EQ(RankEnv(0)["NNODES"], "2") << "rank 0 was not restarted";
  EXPECT_FALSE(Terminated(0) || Terminated(1))
      << "the first ranks keep running";
  EXPECT_THAT(ReadFile(log_), HasSubstr(id + " resized: 2 -> 4 pods; ranks "
                                             "started: 2,3; stopped: none"));
  EXPECT_EQ(GetOk(*scheduler_, id).placement_size(), 4);

  phalanxctl_.Signal(SIGINT);
  EXPECT_EQ(Finish(), 130) << ReadFile(log_);
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(Terminated(r)) << "rank " << r;
}

TEST_F(CtlRunElasticTest, AShrinkStopsEveryRankAcknowledgesAndRestarts) {
  const std::string id = StartAtEightThenShrink({});

  WaitForRanksAt(2, 2);
  for (int r = 0; r < 8; ++r) {
    EXPECT_TRUE(Terminated(r)) << "rank " << r << " got SIGTERM";
  }
  const std::string log = ReadFile(log_);
  EXPECT_THAT(log, HasSubstr(id + " shrinks to 2 pods of its elastic pod "
                                  "set; stopping every rank by"));
  EXPECT_THAT(
      log, HasSubstr("shrink acknowledged; " + id + " is RUNNING with 2 pods"));
  EXPECT_THAT(log,
              HasSubstr(id + " resized: 8 -> 2 pods; starting every rank"));
  EXPECT_THAT(log, ::testing::Not(HasSubstr("preemption acknowledged")));
  const v1::Gang gang = GetOk(*scheduler_, id);
  EXPECT_EQ(gang.state(), v1::GANG_STATE_RUNNING);
  EXPECT_EQ(gang.placement_size(), 2);
  EXPECT_EQ(gang.resizes(), 1);
  WaitForGang(
      preemptor_,
      [](const v1::Gang& g) { return g.state() == v1::GANG_STATE_ADMITTED; },
      "admitted");

  phalanxctl_.Signal(SIGINT);
  EXPECT_EQ(Finish(), 130) << ReadFile(log_);
  EXPECT_EQ(GetOk(*scheduler_, id).state(), v1::GANG_STATE_CANCELLED);
}

TEST_F(CtlRunElasticTest, AShrinkUnderElasticRendezvousStopsOnlyTheLastRanks) {
  const std::string id = StartAtEightThenShrink({"--elastic-rendezvous"});

  const v1::Gang gang = WaitForGang(
      id,
      [](const v1::Gang& g) {
        return g.state() == v1::GANG_STATE_RUNNING && g.resizes() == 1;
      },
      "shrank");
  EXPECT_EQ(gang.placement_size(), 2);
  for (int r = 2; r < 8; ++r) {
    EXPECT_TRUE(Terminated(r)) << "rank " << r << " got SIGTERM";
  }
  EXPECT_FALSE(Terminated(0) || Terminated(1)) << "ranks 0 and 1 keep running";
  EXPECT_EQ(RankEnv(0)["NNODES"], "8") << "rank 0 was not restarted";
  const std::string log = ReadFile(log_);
  EXPECT_THAT(log, HasSubstr(id + " shrinks to 2 pods of its elastic pod set; "
                                  "stopping ranks 2,3,4,5,6,7 by"));
  EXPECT_THAT(
      log, HasSubstr("shrink acknowledged; " + id + " is RUNNING with 2 pods"));
  for (int i = 0;
       i < 100 && ReadFile(log_).find(" resized: 8 -> 2") == std::string::npos;
       ++i) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_THAT(ReadFile(log_),
              HasSubstr(id + " resized: 8 -> 2 pods; ranks started: none; "
                             "stopped: 2,3,4,5,6,7"));
  WaitForGang(
      preemptor_,
      [](const v1::Gang& g) { return g.state() == v1::GANG_STATE_ADMITTED; },
      "admitted");

  phalanxctl_.Signal(SIGINT);
  EXPECT_EQ(Finish(), 130) << ReadFile(log_);
}

TEST_F(CtlRunElasticTest, ElasticRendezvousNeedsAnElasticGang) {
  Start({"run", "--exec", "local", "--elastic-rendezvous", "--queue", "a",
         "--pods", "2", "--gpus", "8", "--", "/bin/true"});
  EXPECT_EQ(Finish(), 2) << ReadFile(log_);
  EXPECT_THAT(ReadFile(log_),
              HasSubstr("--elastic-rendezvous: the gang is not elastic"));
}

// One rank of torch.distributed (started by torch.distributed.run, which
// sets RANK and WORLD_SIZE): a gloo all-reduce of rank+1 over env://
// rendezvous; writes "WORLD SUM" to OUT/allreduce-RANK.
constexpr char kAllReduce[] = R"py(import datetime, os, sys
import torch
import torch.distributed as dist
dist.init_process_group("gloo", init_method="env://",
                        timeout=datetime.timedelta(seconds=60))
rank = dist.get_rank()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
with open(os.path.join(sys.argv[1], "allreduce-%d" % rank), "w") as out:
    out.write("%d %g\n" % (dist.get_world_size(), value.item()))
dist.destroy_process_group()
)py";

// `run --exec local` on the demo fleet (deploy/: no node has an address)
// with real torch.distributed ranks. Skipped without Debian's python3-torch.
class CtlRunTorchTest : public CtlRunTest {
 protected:
  void SetUp() override {
    if (std::system("/usr/bin/python3 -c 'import torch.distributed' "
                    ">/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "/usr/bin/python3 cannot import torch (Debian's "
                      "python3-torch is not installed)";
    }
    daemon_ = std::make_unique<DaemonProcess>();
    const std::string deploy = PHALANX_SOURCE_DIR "/deploy/";
    StartDaemon({"--config=" + deploy + "config.json",
                 "--fleet=" + deploy + "fleet.json",
                 "--queues=" + deploy + "queues.json"});
  }
};

TEST_F(CtlRunTorchTest, AGlooAllReduceOfTwoPodsOfTwoRanksEach) {
  std::set<int> taken;
  const int port = FreePortPair(taken);
  ASSERT_NE(port, 0);
  const std::string script = daemon_->WriteFile("allreduce.py", kAllReduce);
  Start({"run", "--exec", "local", "--master-port", absl::StrCat(port),
         "--queue", "eval", "--pods", "2", "--gpus", "2", "--", "/bin/sh", "-c",
         // Debian's torch 1.13 spells its flags with underscores, and on
         // Python 3.11 needs --redirects and --tee other than 0.
         "exec /usr/bin/python3 -m torch.distributed.run --redirects 1 "
         "--tee 1 --log_dir \"$1\" --nnodes \"$NNODES\" "
         "--node_rank \"$NODE_RANK\" --nproc_per_node \"$NPROC_PER_NODE\" "
         "--master_addr \"$MASTER_ADDR\" --master_port \"$MASTER_PORT\" "
         "\"$0\" \"$1\"",
         script, out_.string()});
  EXPECT_EQ(Finish(), 0) << ReadFile(log_);
  EXPECT_EQ(GetOk(*scheduler_, GangId()).state(), v1::GANG_STATE_SUCCEEDED);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(ReadFile((out_ / absl::StrCat("allreduce-", rank)).string()),
              "4 10\n")
        << "rank " << rank << " of 4 sums 1+2+3+4\n"
        << ReadFile(log_);
  }
}

}  // namespace
}  // namespace phalanx::testing
