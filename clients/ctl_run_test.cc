#include "clients/ctl_run.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clients/ctl_args.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace phalanx::ctl {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

v1::Gang TwoPodsOnOneNode() {
  v1::Gang gang;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(id: "g-7"
           placement {
             node: "n-2"
             gpu_indices: [ 4, 5, 6, 7 ]
           }
           placement {
             node: "n-1"
             gpu_indices: [ 0, 1 ]
           }
           placement {
             node: "n-2"
             gpu_indices: [ 0, 1, 2, 3 ]
           })pb",
      &gang));
  return gang;
}

TEST(PlanRanksTest, RankOrderIsPlacementOrderEvenOnASharedNode) {
  const std::vector<RankPlan> ranks = PlanRanks(
      TwoPodsOnOneNode(), {{"n-2", "10.0.0.2"}, {"n-1", ""}}, 29500, "/h");
  ASSERT_EQ(ranks.size(), 3u);
  EXPECT_EQ(ranks[0].host, "10.0.0.2");
  EXPECT_EQ(ranks[1].host, "n-1") << "an empty address falls back to the id";
  EXPECT_EQ(ranks[2].node, "n-2");
  EXPECT_THAT(ranks[2].gpus, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(
      ranks[1].env,
      ElementsAre(Pair("PHALANX_GANG_ID", "g-7"), Pair("PHALANX_NODE", "n-1"),
                  Pair("PHALANX_HOSTFILE", "/h"),
                  Pair("MASTER_ADDR", "10.0.0.2"), Pair("MASTER_PORT", "29500"),
                  Pair("NNODES", "3"), Pair("NODE_RANK", "1"),
                  Pair("NPROC_PER_NODE", "2"),
                  Pair("CUDA_VISIBLE_DEVICES", "0,1")));
  EXPECT_EQ(HostfileText(ranks),
            "10.0.0.2 slots=4\nn-1 slots=2\n10.0.0.2 slots=4\n");
}

// A gang of a fixed pod set "head" (1 pod) and an elastic pod set
// "workers" (2..6 pods) holding `workers` pods: head first, then the
// workers in index order, one pod a node.
v1::Gang ElasticGang(int workers) {
  v1::Gang gang;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(id: "g-9"
           spec {
             pod_sets { name: "head" count: 1 gpus: 8 }
             pod_sets { name: "workers" count: 6 min_count: 2 gpus: 8 }
           })pb",
      &gang));
  v1::PodPlacement* head = gang.add_placement();
  head->set_pod_set("head");
  head->set_node("n-head");
  head->add_gpu_indices(0);
  for (int i = 0; i < workers; ++i) {
    v1::PodPlacement* pod = gang.add_placement();
    pod->set_pod_set("workers");
    pod->set_index(i);
    pod->set_node(absl::StrCat("n-", i));
    pod->add_gpu_indices(0);
  }
  return gang;
}

TEST(ElasticTest, TheElasticPodSetAndTheRangeOfRanks) {
  const v1::Gang gang = ElasticGang(3);
  EXPECT_EQ(ElasticPodSet(gang.spec()), 1);
  EXPECT_EQ(NnodesRange(gang.spec()), "3:7") << "1 head + 2..6 workers";
  v1::GangSpec fixed = gang.spec();
  fixed.mutable_pod_sets(1)->set_min_count(6);
  EXPECT_EQ(ElasticPodSet(fixed), -1) << "min_count == count is fixed";
  EXPECT_EQ(NnodesRange(fixed), "7:7");
  fixed.mutable_pod_sets(1)->set_min_count(0);
  EXPECT_EQ(ElasticPodSet(fixed), -1) << "min_count unset is fixed";
  EXPECT_EQ(ElasticPodSet(TwoPodsOnOneNode().spec()), -1);
}

TEST(ElasticTest, ElasticRanksGetTheRangeFixedOnesDoNot) {
  const std::vector<RankPlan> ranks = PlanRanks(ElasticGang(3), {}, 1, "/h");
  ASSERT_EQ(ranks.size(), 4u);
  EXPECT_EQ(ranks[2].pod_set, "workers");
  EXPECT_EQ(ranks[2].pod_index, 1);
  EXPECT_THAT(ranks[2].env, ::testing::Contains(Pair("NNODES", "4")));
  EXPECT_THAT(ranks[2].env.back(), Pair("PHALANX_NNODES_RANGE", "3:7"));
  for (const RankPlan& rank : PlanRanks(TwoPodsOnOneNode(), {}, 1, "/h")) {
    EXPECT_THAT(rank.env, ::testing::Not(::testing::Contains(
                              ::testing::Key("PHALANX_NNODES_RANGE"))));
  }
}

TEST(ElasticTest, AfterShrinkKeepsTheFixedPodsAndTheLowIndices) {
  v1::Gang gang = ElasticGang(5);
  EXPECT_EQ(AfterShrink(gang).placement_size(), 6) << "no shrink asked";
  gang.set_shrink_to_count(2);
  const v1::Gang shrunk = AfterShrink(gang);
  ASSERT_EQ(shrunk.placement_size(), 3);
  EXPECT_EQ(shrunk.placement(0).pod_set(), "head");
  EXPECT_EQ(shrunk.placement(1).node(), "n-0");
  EXPECT_EQ(shrunk.placement(2).node(), "n-1");
}

struct RankDiffCase {
  std::string name;
  v1::Gang running;
  v1::Gang next;
  std::vector<int> added;    // ranks of `next`
  std::vector<int> removed;  // ranks of `running`
};

TEST(DiffRanksTest, OnlyThePodsThatCameOrWent) {
  v1::Gang moved = ElasticGang(3);
  moved.mutable_placement(2)->set_node("n-elsewhere");
  v1::Gang shrinking = ElasticGang(5);
  shrinking.set_shrink_to_count(2);
  const RankDiffCase cases[] = {
      {"grow 2 -> 5", ElasticGang(2), ElasticGang(5), {3, 4, 5}, {}},
      {"shrink 5 -> 2", ElasticGang(5), ElasticGang(2), {}, {3, 4, 5}},
      {"same plan", ElasticGang(3), ElasticGang(3), {}, {}},
      {"a pod on another node is another pod", ElasticGang(3), moved, {2}, {2}},
      {"the plan after a shrink",
       shrinking,
       AfterShrink(shrinking),
       {},
       {3, 4, 5}},
  };
  for (const RankDiffCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<RankPlan> running = PlanRanks(c.running, {}, 1, "/h");
    const std::vector<RankPlan> next = PlanRanks(c.next, {}, 1, "/h");
    const RankDiff diff = DiffRanks(running, next);
    EXPECT_EQ(diff.added, c.added);
    EXPECT_EQ(diff.removed, c.removed);
  }
}

TEST(ShellQuoteTest, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(ShellQuote("train.py"), "train.py");
  EXPECT_EQ(ShellQuote("--lr=3e-4"), "--lr=3e-4");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("$(rm -rf /)"), "'$(rm -rf /)'");
}

TEST(RankArgvTest, TemplateThenEnvThenCommand) {
  const std::vector<RankPlan> ranks =
      PlanRanks(TwoPodsOnOneNode(), {}, 1234, "/tmp/h f");
  const std::vector<std::string> command = {"torchrun", "train.py", "a b"};
  EXPECT_EQ(RankArgv("local", ranks[0], "/w", command), command);
  const std::vector<std::string> argv =
      RankArgv("ssh -o BatchMode=yes {host} #{rank}", ranks[1], "", command);
  EXPECT_THAT(argv,
              ElementsAre("ssh", "-o", "BatchMode=yes", "n-1", "#1", "env",
                          "PHALANX_GANG_ID=g-7", "PHALANX_NODE=n-1",
                          "'PHALANX_HOSTFILE=/tmp/h f'", "MASTER_ADDR=n-2",
                          "MASTER_PORT=1234", "NNODES=3", "NODE_RANK=1",
                          "NPROC_PER_NODE=2", "CUDA_VISIBLE_DEVICES=0,1",
                          "torchrun", "train.py", "'a b'"));
}

TEST(RankArgvTest, RemoteRanksChangeToTheWorkdirFirst) {
  const std::vector<RankPlan> ranks =
      PlanRanks(TwoPodsOnOneNode(), {}, 1234, "/h");
  const std::vector<std::string> argv =
      RankArgv("ssh {host}", ranks[0], "/shared/my job", {"./train.sh"});
  ASSERT_GE(argv.size(), 6u);
  EXPECT_THAT(std::vector<std::string>(argv.begin(), argv.begin() + 6),
              ElementsAre("ssh", "n-2", "cd", "'/shared/my job'", "&&", "env"));
  EXPECT_EQ(argv.back(), "./train.sh");
}

TEST(LocalAddressesTest, EveryRankAndTheHostfileNameThisMachine) {
  const std::vector<RankPlan> ranks = PlanRanks(
      TwoPodsOnOneNode(), LocalAddresses(TwoPodsOnOneNode()), 29500, "/h");
  ASSERT_EQ(ranks.size(), 3u);
  for (const RankPlan& rank : ranks) {
    EXPECT_EQ(rank.host, "127.0.0.1");
    EXPECT_THAT(rank.env,
                ::testing::Contains(Pair("MASTER_ADDR", "127.0.0.1")));
  }
  EXPECT_EQ(ranks[1].node, "n-1") << "PHALANX_NODE keeps the node id";
  EXPECT_EQ(HostfileText(ranks),
            "127.0.0.1 slots=4\n127.0.0.1 slots=2\n127.0.0.1 slots=4\n");
}

TEST(CheckResolvesTest, LoopbackResolvesAnUnknownNameIsRefused) {
  EXPECT_TRUE(CheckResolves("127.0.0.1").ok());
  EXPECT_TRUE(CheckResolves("localhost").ok());
  // RFC 6761: names under .invalid never resolve.
  const absl::Status status = CheckResolves("h100-b1r1n1.invalid");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      std::string(status.message()),
      ::testing::HasSubstr("MASTER_ADDR h100-b1r1n1.invalid does not resolve"));
  EXPECT_THAT(std::string(status.message()),
              ::testing::HasSubstr("--exec local"));
}

TEST(RunArgsTest, CommandAfterDoubleDashAndSubmitFlags) {
  Invocation inv = ParseCommandLine(
      {"run", "--queue", "a", "--pods", "2", "--gpus", "8", "--exec", "local",
       "--master-port", "1", "--", "torchrun", "--nproc", "8", "-o", "x"},
      {});
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  EXPECT_THAT(inv.args, ElementsAre("torchrun", "--nproc", "8", "-o", "x"));
  EXPECT_EQ(inv.global.output, OutputFormat::kTable) << "-o after -- is the "
                                                        "command's";
  EXPECT_EQ(inv.options.run.exec, "local");
  EXPECT_EQ(inv.options.run.master_port, 1);
  EXPECT_EQ(inv.options.run.workdir, "") << "default: the launching directory";
  Invocation workdir = ParseCommandLine(
      {"run", "--queue", "a", "--workdir", "/w", "--", "true"}, {});
  ASSERT_TRUE(workdir.error.ok()) << workdir.error;
  EXPECT_EQ(workdir.options.run.workdir, "/w");
  Invocation none = ParseCommandLine({"run", "--queue", "a"}, {});
  EXPECT_THAT(std::string(none.error.message()),
              ::testing::HasSubstr("needs a COMMAND"));
}

}  // namespace
}  // namespace phalanx::ctl
