#include "clients/ctl_requests.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "clients/ctl_args.h"
#include "clients/ctl_format.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace phalanx::ctl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The typed options of a command line, parsed by the real parser.
CommandOptions Flags(std::vector<std::string> argv) {
  Invocation inv = ParseCommandLine(argv, {});
  EXPECT_TRUE(inv.error.ok()) << inv.error;
  return inv.options;
}

// The usage error of a command line whose flag values are checked by the
// parser (its validators), before any request is built.
absl::Status ParseError(std::vector<std::string> argv) {
  return ParseCommandLine(argv, {}).error;
}

template <typename T>
T TextProto(const std::string& text) {
  T message;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &message))
      << text;
  return message;
}

template <typename T>
void ExpectProtoEq(const T& got, const T& want) {
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(got, want))
      << "got:\n"
      << got.DebugString() << "want:\n"
      << want.DebugString();
}

void ExpectInvalid(const absl::Status& status, const std::string& text) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(text));
}

TEST(SpecFromFlagsTest, EveryFlag) {
  absl::StatusOr<v1::GangSpec> spec = SpecFromFlags(
      Flags({"submit", "--queue",          "llm",       "--pods",
             "32",     "--gpus",           "8",         "--level",
             "rack",   "--mode",           "preferred", "--priority",
             "5",      "--request-id",     "r-1",       "--name",
             "llama",  "--models",         "H100,H200", "--estimated-runtime",
             "3600s",  "--max-runtime",    "2h",        "--slice",
             "8@rack", "--priority-class", "production"})
          .spec);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ExpectProtoEq(*spec, TextProto<v1::GangSpec>(R"pb(
    queue: "llm"
    priority: 5
    priority_class: "production"
    labels { key: "name" value: "llama" }
    request_id: "r-1"
    estimated_runtime { seconds: 3600 }
    max_runtime { seconds: 7200 }
    pod_sets {
      name: "workers"
      count: 32
      gpus: 8
      gpu_models: [ "H100", "H200" ]
      topology { mode: TOPOLOGY_MODE_PREFERRED level: "rack" }
      slice { size: 8 level: "rack" }
    }
  )pb"));
}

TEST(SpecFromFlagsTest, MinimalSpecHasNoTopology) {
  absl::StatusOr<v1::GangSpec> spec = SpecFromFlags(
      Flags({"submit", "--queue", "q", "--pods", "1", "--gpus", "0"}).spec);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ExpectProtoEq(*spec, TextProto<v1::GangSpec>(R"pb(
    queue: "q"
    pod_sets { name: "workers" count: 1 gpus: 0 }
  )pb"));
}

TEST(SpecFromFlagsTest, LevelAloneMeansRequired) {
  absl::StatusOr<v1::GangSpec> spec =
      SpecFromFlags(Flags({"submit", "--queue", "q", "--pods", "4", "--gpus",
                           "8", "--level", "block"})
                        .spec);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->pod_sets(0).topology().mode(), v1::TOPOLOGY_MODE_REQUIRED);
  EXPECT_EQ(spec->pod_sets(0).topology().level(), "block");
}

TEST(SpecFromFlagsTest, UnconstrainedNeedsNoLevel) {
  absl::StatusOr<v1::GangSpec> spec =
      SpecFromFlags(Flags({"submit", "--queue", "q", "--pods", "4", "--gpus",
                           "8", "--mode", "unconstrained"})
                        .spec);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->pod_sets(0).topology().mode(),
            v1::TOPOLOGY_MODE_UNCONSTRAINED);
}

struct SpecErrorCase {
  std::vector<std::string> extra;  // after "submit"
  std::string message;
};

TEST(SpecFromFlagsTest, Errors) {
  const std::vector<std::string> ok = {"--queue", "q",      "--pods",
                                       "2",       "--gpus", "8"};
  auto with = [&ok](std::vector<std::string> extra) {
    std::vector<std::string> argv = {"submit"};
    argv.insert(argv.end(), ok.begin(), ok.end());
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  };
  ExpectInvalid(
      SpecFromFlags(Flags(with({"--mode", "required"})).spec).status(),
      "need --level");
  // A flag's own value is checked by the parser, from its declaration.
  const SpecErrorCase cases[] = {
      {with({"--priority", "high"}), "--priority: want an integer"},
      {with({"--estimated-runtime", "soon"}), "--estimated-runtime"},
      {with({"--max-runtime", "-5s"}), "--max-runtime: want a positive"},
      {with({"--max-runtime", "0"}), "--max-runtime: want a positive"},
      {with({"--slice", "8"}), "--slice: want SIZE@LEVEL"},
      {with({"--slice", "0@rack"}), "--slice: want SIZE@LEVEL"},
  };
  for (const SpecErrorCase& c : cases) {
    ExpectInvalid(ParseError(c.extra), c.message);
  }
  ExpectInvalid(
      ParseCommandLine(with({"--mode", "strict", "--level", "rack"}), {}).error,
      "--mode: want required, preferred or unconstrained, got \"strict\"");
  ExpectInvalid(
      SpecFromFlags(Flags({"submit", "--pods", "1", "--gpus", "1"}).spec)
          .status(),
      "--queue is required");
  ExpectInvalid(
      SpecFromFlags(Flags({"submit", "--queue", "q", "--gpus", "1"}).spec)
          .status(),
      "--pods and --gpus are required");
  ExpectInvalid(
      ParseError({"submit", "--queue", "q", "--pods", "0", "--gpus", "1"}),
      "--pods: want an integer in [1, 2147483647]");
  ExpectInvalid(
      ParseError({"submit", "--queue", "q", "--pods", "1", "--gpus", "-1"}),
      "--gpus");
}

TEST(SpecFromFlagsTest, MinPodsMakesTheOnePodSetElastic) {
  absl::StatusOr<v1::GangSpec> spec =
      SpecFromFlags(Flags({"submit", "--queue", "q", "--pods", "8",
                           "--min-pods", "2", "--gpus", "8"})
                        .spec);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->pod_sets(0).count(), 8);
  EXPECT_EQ(spec->pod_sets(0).min_count(), 2);
  absl::StatusOr<v1::GangSpec> sliced = SpecFromFlags(
      Flags({"submit", "--queue", "q", "--pods", "8", "--min-pods", "4",
             "--gpus", "8", "--slice", "4@rack"})
          .spec);
  ASSERT_TRUE(sliced.ok()) << sliced.status();
  EXPECT_EQ(sliced->pod_sets(0).min_count(), 4);
  absl::StatusOr<v1::GangSpec> fixed = SpecFromFlags(
      Flags({"submit", "--queue", "q", "--pods", "8", "--gpus", "8"}).spec);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(fixed->pod_sets(0).min_count(), 0) << "no flag: a fixed size";
}

TEST(SpecFromFlagsTest, MinPodsErrorsNameTheFlag) {
  ExpectInvalid(SpecFromFlags(Flags({"submit", "--queue", "q", "--pods", "2",
                                     "--min-pods", "3", "--gpus", "8"})
                                  .spec)
                    .status(),
                "--min-pods: want at most --pods (2), got 3");
  ExpectInvalid(SpecFromFlags(Flags({"submit", "--queue", "q", "--pods", "8",
                                     "--min-pods", "3", "--gpus", "8",
                                     "--slice", "2@rack"})
                                  .spec)
                    .status(),
                "--min-pods: want a multiple of --slice's size (2), got 3");
  ExpectInvalid(ParseError({"submit", "--queue", "q", "--pods", "2",
                            "--min-pods", "0", "--gpus", "8"}),
                "--min-pods: want an integer in [1, 2147483647]");
  ExpectInvalid(
      BuildSpec(
          Flags({"run", "-f", "s.json", "--min-pods", "1", "--", "x"}).run.spec,
          "{}")
          .status(),
      "-f cannot be combined with --min-pods");
}

TEST(BuildSpecTest, FromFile) {
  absl::StatusOr<v1::GangSpec> spec = BuildSpec(
      Flags({"submit", "-f", "spec.json"}).spec,
      R"({"queue": "llm", "pod_sets": [{"name": "w", "count": 2, "gpus": 8,
          "topology": {"mode": "TOPOLOGY_MODE_REQUIRED", "level": "rack"}}],
          "estimatedRuntime": "90s"})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ExpectProtoEq(*spec, TextProto<v1::GangSpec>(R"pb(
    queue: "llm"
    estimated_runtime { seconds: 90 }
    pod_sets {
      name: "w"
      count: 2
      gpus: 8
      topology { mode: TOPOLOGY_MODE_REQUIRED level: "rack" }
    }
  )pb"));
}

TEST(BuildSpecTest, FileErrors) {
  ExpectInvalid(
      BuildSpec(Flags({"submit", "-f", "s.json", "--queue", "q"}).spec, "{}")
          .status(),
      "-f cannot be combined with --queue");
  ExpectInvalid(
      BuildSpec(Flags({"submit", "-f", "s.json"}).spec, "{not json").status(),
      "s.json: not a valid phalanx.v1.GangSpec in JSON");
  ExpectInvalid(BuildSpec(Flags({"submit", "-f", "s.json"}).spec,
                          R"({"queue": "q", "bogus": 1})")
                    .status(),
                "s.json");
}

TEST(BuildListQueryTest, FiltersAndLimit) {
  const ListQuery query =
      BuildListQuery(Flags({"list", "--queue", "llm", "--state",
                            "pending,admitted", "--limit", "5"})
                         .list);
  EXPECT_EQ(query.limit, 5);
  ExpectProtoEq(query.request, TextProto<v1::ListGangsRequest>(R"pb(
                  queue: "llm"
                  states: [ GANG_STATE_PENDING, GANG_STATE_ADMITTED ]
                  page_size: 5
                )pb"));
  ExpectInvalid(ParseError({"list", "--limit", "0"}), "--limit");
}

TEST(BuildListQueryTest, OwnerAndLabelsFilterOnTheClient) {
  const ListQuery query =
      BuildListQuery(Flags({"list", "--owner", "team-a", "-l",
                            "team=a,tier!=batch,!draft", "--no-headers"})
                         .list);
  EXPECT_EQ(query.request.ByteSizeLong(),
            BuildListQuery(Flags({"list"}).list).request.ByteSizeLong())
      << "the daemon has no owner or label filter: nothing more is sent";
  struct Case {
    const char* name;
    const char* gang;
    bool want;
  };
  const std::vector<Case> cases = {
      {"all hold", R"pb(owner: "team-a"
                        spec { labels { key: "team" value: "a" } })pb",
       true},
      {"another owner", R"pb(owner: "team-b"
                             spec { labels { key: "team" value: "a" } })pb",
       false},
      {"label missing", R"pb(owner: "team-a")pb", false},
      {"tier is batch", R"pb(owner: "team-a"
                             spec {
                               labels { key: "team" value: "a" }
                               labels { key: "tier" value: "batch" }
                             })pb",
       false},
      {"tier is other", R"pb(owner: "team-a"
                             spec {
                               labels { key: "team" value: "a" }
                               labels { key: "tier" value: "prod" }
                             })pb",
       true},
      {"draft set", R"pb(owner: "team-a"
                         spec {
                           labels { key: "team" value: "a" }
                           labels { key: "draft" value: "" }
                         })pb",
       false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(query.Matches(TextProto<v1::Gang>(c.gang)), c.want) << c.name;
  }
  EXPECT_TRUE(Flags({"list", "--no-headers"}).list.no_headers);
}

TEST(BuildCancelQueryTest, UnfinishedGangsWithTheLabels) {
  const ListQuery query =
      BuildCancelQuery(Flags({"cancel", "-l", "team=a"}).cancel.labels);
  ExpectProtoEq(query.request, TextProto<v1::ListGangsRequest>(R"pb(
                  states: [
                    GANG_STATE_PENDING,
                    GANG_STATE_ADMITTED,
                    GANG_STATE_RUNNING,
                    GANG_STATE_PREEMPTING
                  ]
                  page_size: 1000
                )pb"));
  EXPECT_TRUE(query.Matches(TextProto<v1::Gang>(
      R"pb(spec { labels { key: "team" value: "a" } })pb")));
  EXPECT_FALSE(query.Matches(TextProto<v1::Gang>(
      R"pb(spec { labels { key: "team" value: "b" } })pb")));
}

TEST(BuildListQueryTest, NoLimitUsesFullPages) {
  const ListQuery query = BuildListQuery(Flags({"list"}).list);
  EXPECT_EQ(query.limit, 0);
  EXPECT_EQ(query.request.page_size(), 1000);
}

TEST(NextPageSizeTest, Cases) {
  EXPECT_EQ(NextPageSize(0, 5000), 1000);
  EXPECT_EQ(NextPageSize(2500, 0), 1000);
  EXPECT_EQ(NextPageSize(2500, 2000), 500);
  EXPECT_EQ(NextPageSize(2500, 2500), 0);
}

TEST(BuildWatchRequestTest, AfterIsOptional) {
  const v1::WatchGangsRequest live = BuildWatchRequest(Flags({"watch"}).watch);
  EXPECT_FALSE(live.has_after_revision());

  const v1::WatchGangsRequest replay = BuildWatchRequest(
      Flags({"watch", "--after", "0", "--queue", "a,b", "--gang", "g-1"})
          .watch);
  ExpectProtoEq(replay, TextProto<v1::WatchGangsRequest>(R"pb(
                  after_revision: 0
                  queues: [ "a", "b" ]
                  gang_ids: [ "g-1" ]
                )pb"));
  EXPECT_TRUE(replay.has_after_revision());
  ExpectInvalid(ParseError({"watch", "--after", "-1"}), "--after");
}

TEST(BuildReportRequestTest, StateCheckpointAck) {
  const absl::Time now = absl::FromUnixSeconds(1714564803);
  absl::StatusOr<v1::ReportGangRequest> request = BuildReportRequest(
      "g-1",
      Flags({"report", "g-1", "--state", "RUNNING", "--checkpoint", "now",
             "--ack-preemption", "--message", "ok"})
          .report,
      now);
  ASSERT_TRUE(request.ok()) << request.status();
  ExpectProtoEq(*request, TextProto<v1::ReportGangRequest>(R"pb(
    gang_id: "g-1"
    state: GANG_STATE_RUNNING
    last_checkpoint_time { seconds: 1714564803 }
    preemption_acknowledged: true
    message: "ok"
  )pb"));
}

TEST(BuildReportRequestTest, Rfc3339CheckpointAlone) {
  absl::StatusOr<v1::ReportGangRequest> request = BuildReportRequest(
      "g-1",
      Flags({"report", "g-1", "--checkpoint", "2024-05-01T12:00:03.5Z"}).report,
      absl::UnixEpoch());
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->state(), v1::GANG_STATE_UNSPECIFIED);
  EXPECT_EQ(request->last_checkpoint_time().seconds(), 1714564803);
  EXPECT_EQ(request->last_checkpoint_time().nanos(), 500000000);
}

TEST(BuildReportRequestTest, Errors) {
  const absl::Time now = absl::UnixEpoch();
  ExpectInvalid(
      BuildReportRequest("g", Flags({"report", "g"}).report, now).status(),
      "at least one of --state");
  ExpectInvalid(
      ParseCommandLine({"report", "g", "--state", "pending"}, {}).error,
      "--state: want running, succeeded or failed");
  ExpectInvalid(ParseError({"report", "g", "--checkpoint", "yesterday"}),
                "--checkpoint");
}

TEST(BuildListNodesRequestTest, Filters) {
  const v1::ListNodesRequest request = BuildListNodesRequest(
      Flags({"nodes", "list", "--state", "draining", "--model", "H200"})
          .nodes_list);
  EXPECT_EQ(request.state(), v1::NODE_STATE_DRAINING);
  EXPECT_EQ(request.gpu_model(), "H200");
}

TEST(BuildSetNodeStateRequestTest, Verbs) {
  const std::pair<const char*, v1::NodeState> verbs[] = {
      {"cordon", v1::NODE_STATE_CORDONED},
      {"drain", v1::NODE_STATE_DRAINING},
      {"uncordon", v1::NODE_STATE_READY},
      {"unhealthy", v1::NODE_STATE_UNHEALTHY}};
  for (const auto& [verb, state] : verbs) {
    absl::StatusOr<v1::SetNodeStateRequest> request = BuildSetNodeStateRequest(
        verb, "n-1",
        Flags({"nodes", verb, "n-1", "--reason", "maint"}).node_state,
        absl::UnixEpoch());
    ASSERT_TRUE(request.ok()) << verb;
    EXPECT_EQ(request->state(), state) << verb;
    EXPECT_EQ(request->node_id(), "n-1");
    EXPECT_EQ(request->reason(), "maint");
  }
  ExpectInvalid(BuildSetNodeStateRequest("melt", "n", NodeStateOptions(),
                                         absl::UnixEpoch())
                    .status(),
                "melt");
}

TEST(BuildSetNodeStateRequestTest, DrainDeadlineFromNowOrRfc3339) {
  const absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  absl::StatusOr<v1::SetNodeStateRequest> in_90m = BuildSetNodeStateRequest(
      "drain", "n-1",
      Flags({"nodes", "drain", "n-1", "--deadline", "90m"}).node_state, now);
  ASSERT_TRUE(in_90m.ok()) << in_90m.status();
  EXPECT_EQ(in_90m->drain_deadline().seconds(), 1'700'000'000 + 90 * 60);
  absl::StatusOr<v1::SetNodeStateRequest> at = BuildSetNodeStateRequest(
      "drain", "n-1",
      Flags({"nodes", "drain", "n-1", "--deadline", "2023-11-14T22:13:20Z"})
          .node_state,
      now);
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_EQ(at->drain_deadline().seconds(), 1'700'000'000);
  absl::StatusOr<v1::SetNodeStateRequest> none = BuildSetNodeStateRequest(
      "drain", "n-1", Flags({"nodes", "drain", "n-1"}).node_state, now);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_drain_deadline());
  ExpectInvalid(ParseError({"nodes", "drain", "n-1", "--deadline", "soon"}),
                "--deadline: want a duration");
}

TEST(BuildQueueTest, FromFlags) {
  absl::StatusOr<v1::Queue> queue = BuildQueue(
      Flags({"queues", "put", "--name", "llm", "--parent", "research",
             "--weight", "2.5", "--nominal", "H100=64,H200=32", "--held",
             "true", "--borrowing-limit", "-1", "--lending-limit", "8",
             "--max-priority", "-3"})
          .queue_put,
      "");
  ASSERT_TRUE(queue.ok()) << queue.status();
  ExpectProtoEq(*queue, TextProto<v1::Queue>(R"pb(
    name: "llm"
    parent: "research"
    weight: 2.5
    nominal_gpus { key: "H100" value: 64 }
    nominal_gpus { key: "H200" value: 32 }
    borrowing_limit_gpus: -1
    lending_limit_gpus: 8
    held: true
    max_priority: -3
  )pb"));
}

TEST(BuildQueueTest, MaxPriorityStaysUnsetWithoutTheFlag) {
  absl::StatusOr<v1::Queue> queue =
      BuildQueue(Flags({"queues", "put", "--name", "llm"}).queue_put, "");
  ASSERT_TRUE(queue.ok()) << queue.status();
  EXPECT_FALSE(queue->has_max_priority());

  absl::StatusOr<v1::Queue> zero = BuildQueue(
      Flags({"queues", "put", "--name", "llm", "--max-priority", "0"})
          .queue_put,
      "");
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_TRUE(zero->has_max_priority());
  EXPECT_EQ(zero->max_priority(), 0);

  for (const char* bad : {"x", "1.5", "2147483648", ""}) {
    ExpectInvalid(
        ParseError({"queues", "put", "--name", "llm", "--max-priority", bad}),
        "--max-priority: want an integer");
  }
  ExpectInvalid(
      BuildQueue(Flags({"queues", "put", "-f", "q.json", "--max-priority", "3"})
                     .queue_put,
                 "{}")
          .status(),
      "-f cannot be combined with --max-priority");
}

TEST(BuildQueueUpdateTest, NamesOnlyTheGivenFieldsInTheMask) {
  absl::StatusOr<v1::PutQueueRequest> held = BuildQueueUpdate(
      "llm", Flags({"queues", "set", "llm", "--held"}).queue_set);
  ASSERT_TRUE(held.ok()) << held.status();
  ExpectProtoEq(*held, TextProto<v1::PutQueueRequest>(R"pb(
    queue { name: "llm" held: true }
    update_mask { paths: "held" }
  )pb"));
  absl::StatusOr<v1::PutQueueRequest> both = BuildQueueUpdate(
      "llm",
      Flags({"queues", "set", "llm", "--no-held", "--weight", "0"}).queue_set);
  ASSERT_TRUE(both.ok()) << both.status();
  ExpectProtoEq(*both, TextProto<v1::PutQueueRequest>(R"pb(
    queue { name: "llm" held: false weight: 0 }
    update_mask { paths: "held" paths: "weight" }
  )pb"));
  EXPECT_TRUE(both->queue().has_weight());
  ExpectInvalid(
      BuildQueueUpdate("llm", Flags({"queues", "set", "llm"}).queue_set)
          .status(),
      "give what to change");
  ExpectInvalid(
      BuildQueueUpdate(
          "llm",
          Flags({"queues", "set", "llm", "--held", "--no-held"}).queue_set)
          .status(),
      "not both");
  ExpectInvalid(ParseError({"queues", "set", "llm", "--weight", "-1"}),
                "--weight");
}

TEST(BuildSpecTest, PriorityClassFromFlagsOnly) {
  ExpectInvalid(BuildSpec(Flags({"submit", "-f", "s.json", "--priority-class",
                                 "production"})
                              .spec,
                          "{}")
                    .status(),
                "-f cannot be combined with --priority-class");
  absl::StatusOr<v1::GangSpec> file = BuildSpec(
      Flags({"submit", "-f", "s.json"}).spec, R"({"priority_class": "batch"})");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->priority_class(), "batch");
}

TEST(BuildAuditQueryTest, PageSizeTokenAndAll) {
  const AuditQuery plain = BuildAuditQuery(Flags({"audit"}).audit);
  EXPECT_FALSE(plain.all);
  EXPECT_EQ(plain.request.page_size(), 0);  // the server's default
  EXPECT_EQ(plain.request.page_token(), "");

  const AuditQuery all = BuildAuditQuery(Flags({"audit", "--all"}).audit);
  EXPECT_TRUE(all.all);
  EXPECT_EQ(all.request.page_size(), kMaxAuditPageSize);

  const AuditQuery sized = BuildAuditQuery(
      Flags({"audit", "--page-size", "5", "--page-token", "42", "--all"})
          .audit);
  EXPECT_EQ(sized.request.page_size(), 5);
  EXPECT_EQ(sized.request.page_token(), "42");

  for (const char* bad : {"0", "-1", "1001", "x"}) {
    ExpectInvalid(ParseError({"audit", "--page-size", bad}),
                  "--page-size: want an integer in [1, 1000]");
  }
}

TEST(PageFollowerTest, FollowsUntilTheLastPage) {
  PageFollower follower;
  EXPECT_EQ(follower.After("10", false), PageFollower::Next::kFetch);
  EXPECT_EQ(follower.After("20", false), PageFollower::Next::kFetch);
  EXPECT_EQ(follower.After("", false), PageFollower::Next::kDone);
  EXPECT_EQ(follower.pages(), 3);
  PageFollower empty_log;
  EXPECT_EQ(empty_log.After("", true), PageFollower::Next::kDone);
}

TEST(PageFollowerTest, NeverLoopsOnARepeatedToken) {
  PageFollower follower;
  EXPECT_EQ(follower.After("10", false), PageFollower::Next::kFetch);
  EXPECT_EQ(follower.After("20", false), PageFollower::Next::kFetch);
  EXPECT_EQ(follower.After("10", false), PageFollower::Next::kNoProgress);

  PageFollower same;
  EXPECT_EQ(same.After("7", false), PageFollower::Next::kFetch);
  EXPECT_EQ(same.After("7", false), PageFollower::Next::kNoProgress);

  PageFollower empty_page;
  EXPECT_EQ(empty_page.After("7", true), PageFollower::Next::kNoProgress);
}

TEST(PageFollowerTest, StopsAtThePageLimit) {
  PageFollower follower(3);
  EXPECT_EQ(follower.After("1", false), PageFollower::Next::kFetch);
  EXPECT_EQ(follower.After("2", false), PageFollower::Next::kFetch);
  EXPECT_EQ(follower.After("3", false), PageFollower::Next::kPageLimit);

  // The default bound: a server that hands out new tokens forever.
  PageFollower endless;
  int fetched = 1;
  while (endless.After(absl::StrCat(fetched), false) ==
             PageFollower::Next::kFetch &&
         fetched < 2 * kMaxAuditPages) {
    ++fetched;
  }
  EXPECT_EQ(fetched, kMaxAuditPages);
  EXPECT_EQ(endless.pages(), kMaxAuditPages);
}

TEST(BuildQueueTest, FromFileAndErrors) {
  absl::StatusOr<v1::Queue> queue =
      BuildQueue(Flags({"queues", "put", "-f", "q.json"}).queue_put,
                 R"({"name": "llm", "nominal_gpus": {"H100": "16"}})");
  ASSERT_TRUE(queue.ok()) << queue.status();
  EXPECT_EQ(queue->nominal_gpus().at("H100"), 16);

  ExpectInvalid(BuildQueue(Flags({"queues", "put"}).queue_put, "").status(),
                "--name is required");
  ExpectInvalid(
      BuildQueue(
          Flags({"queues", "put", "-f", "q.json", "--held", "true"}).queue_put,
          "{}")
          .status(),
      "-f cannot be combined with --held");
  const std::vector<std::vector<std::string>> bad = {
      {"--nominal", "H100"}, {"--nominal", "H100=x"},
      {"--nominal", "=3"},   {"--weight", "-1"},
      {"--held", "maybe"},   {"--lending-limit", "-2"}};
  for (const auto& extra : bad) {
    std::vector<std::string> argv = {"queues", "put", "--name", "q"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    ExpectInvalid(ParseError(argv), extra[0]);
  }
}

TEST(BuildUpdateConfigRequestTest, VersionIsOptional) {
  const std::string json = R"({"topology_levels": ["block", "rack"],
                               "cycle_interval": "2s"})";
  absl::StatusOr<v1::UpdateConfigRequest> plain = BuildUpdateConfigRequest(
      Flags({"config", "set", "-f", "c.json"}).config_set, json);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->has_expected_version());
  EXPECT_THAT(plain->config().topology_levels(), ElementsAre("block", "rack"));
  EXPECT_EQ(plain->config().cycle_interval().seconds(), 2);

  absl::StatusOr<v1::UpdateConfigRequest> guarded = BuildUpdateConfigRequest(
      Flags({"config", "set", "-f", "c.json", "--expected-version", "4"})
          .config_set,
      json);
  ASSERT_TRUE(guarded.ok()) << guarded.status();
  EXPECT_TRUE(guarded->has_expected_version());
  EXPECT_EQ(guarded->expected_version(), 4);
  ExpectInvalid(BuildUpdateConfigRequest(
                    Flags({"config", "set", "-f", "c.json"}).config_set, "[]")
                    .status(),
                "c.json");
}

}  // namespace
}  // namespace phalanx::ctl
