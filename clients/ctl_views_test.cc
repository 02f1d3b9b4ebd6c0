#include "clients/ctl_views.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "clients/ctl_format.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace phalanx::ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const absl::Time kNow = absl::FromUnixSeconds(1714564803);  // 12:00:03Z

template <typename T>
T TextProto(const std::string& text) {
  T message;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &message))
      << text;
  return message;
}

// An admitted gang: 2 pods of 4 GPUs on two nodes, submitted 5m ago.
v1::Gang AdmittedGang() {
  v1::Gang gang = TextProto<v1::Gang>(R"pb(
    id: "g-000042"
    spec {
      queue: "llm"
      priority: 5
      pod_sets {
        name: "workers"
        count: 2
        gpus: 4
        gpu_models: "H100"
        topology { mode: TOPOLOGY_MODE_REQUIRED level: "rack" }
      }
    }
    state: GANG_STATE_ADMITTED
    placement {
      pod_set: "workers"
      index: 0
      node: "n-1"
      gpu_indices: [ 0, 1, 2, 3 ]
    }
    placement {
      pod_set: "workers"
      index: 1
      node: "n-2"
      gpu_indices: [ 4, 5, 6, 7 ]
    }
    revision: 1042
    attempts: 1
  )pb");
  *gang.mutable_submit_time() = ToProto(kNow - absl::Minutes(5));
  *gang.mutable_admit_time() = ToProto(kNow - absl::Minutes(1));
  return gang;
}

v1::Gang PendingGang() {
  v1::Gang gang = TextProto<v1::Gang>(R"pb(
    id: "g-000043"
    spec {
      queue: "batch"
      pod_sets { name: "w" count: 1 gpus: 4 }
    }
    state: GANG_STATE_PENDING
    reason: "no node with 4 free GPUs"
  )pb");
  *gang.mutable_submit_time() = ToProto(kNow - absl::Seconds(30));
  return gang;
}

TEST(GangsTableTest, OneRowPerGang) {
  v1::ListGangsResponse list;
  *list.add_gangs() = AdmittedGang();
  *list.add_gangs() = PendingGang();
  list.mutable_gangs(0)->set_owner("team-llm");
  EXPECT_EQ(GangsTable(list.gangs(), kNow),
            "ID        QUEUE  OWNER     STATE     PRIO  PODS  GPUS  AGE  "
            "REASON\n"
            "g-000042  llm    team-llm  ADMITTED  5     2     8     5m\n"
            "g-000043  batch  -         PENDING   0     1     4     30s  no "
            "node with 4 free GPUs\n");
}

TEST(GangDetailsTest, FieldsPodSetsAndPlacement) {
  EXPECT_EQ(GangDetails(AdmittedGang(), kNow),
            "ID:         g-000042\n"
            "Queue:      llm\n"
            "State:      ADMITTED\n"
            "Priority:   5\n"
            "Submitted:  2024-05-01T11:55:03Z (5m ago)\n"
            "Admitted:   2024-05-01T11:59:03Z (1m ago)\n"
            "Attempts:   1\n"
            "Revision:   1042\n"
            "\n"
            "Pod sets:\n"
            "  NAME     PODS  GPUS/POD  MODELS  TOPOLOGY       SLICE  GROUP\n"
            "  workers  2     4         H100    required rack  -      -\n"
            "\n"
            "Placement (2 pods on 2 nodes):\n"
            "  POD SET  INDEX  NODE  GPUS\n"
            "  workers  0      n-1   0-3\n"
            "  workers  1      n-2   4-7\n");
}

TEST(GangsTableTest, AnElasticGangShowsWhatItHoldsOfItsMaximum) {
  v1::Gang gang = AdmittedGang();
  gang.mutable_spec()->mutable_pod_sets(0)->set_count(4);
  gang.mutable_spec()->mutable_pod_sets(0)->set_min_count(1);
  google::protobuf::RepeatedPtrField<v1::Gang> one;
  *one.Add() = gang;
  EXPECT_THAT(GangsTable(one, kNow), HasSubstr("ADMITTED  5     2/4   8 "));
  gang.set_shrink_to_count(1);
  gang.set_resizes(2);
  *gang.mutable_last_resize_time() = ToProto(kNow - absl::Minutes(1));
  const std::string details = GangDetails(gang, kNow);
  EXPECT_THAT(details, HasSubstr("Shrinking to:  1 pod\n"));
  EXPECT_THAT(
      details,
      HasSubstr("Resizes:       2, last 2024-05-01T11:59:03Z (1m ago)"));
  EXPECT_THAT(details, HasSubstr("workers  1..4  4 "));
}

TEST(GangDetailsTest, AGangOnLoanSaysSo) {
  v1::Gang gang = AdmittedGang();
  EXPECT_THAT(GangDetails(gang, kNow), Not(HasSubstr("On loan:")));
  gang.set_on_loan(true);
  EXPECT_THAT(GangDetails(gang, kNow),
              HasSubstr("On loan:    yes: on nodes reserved for another "
                        "gang, which may preempt it\n"));
}

TEST(GangDetailsTest, AReasonCodeGetsItsOwnRow) {
  v1::Gang gang = PendingGang();
  gang.set_reason_code(v1::REASON_CODE_NO_FIT);
  EXPECT_THAT(GangDetails(gang, kNow),
              HasSubstr("Reason code:  NO_FIT\n"
                        "Reason:       no node with 4 free GPUs\n"));
  google::protobuf::RepeatedPtrField<v1::Gang> one;
  *one.Add() = gang;
  EXPECT_THAT(GangsTable(one, kNow, /*wide=*/true),
              HasSubstr("CODE    START  REASON"));
  EXPECT_THAT(GangsTable(one, kNow, /*wide=*/true),
              HasSubstr("NO_FIT  -      no node with 4 free GPUs"));
  v1::DryRunGangResponse no;
  no.set_reason_code(v1::REASON_CODE_QUOTA);
  EXPECT_THAT(DryRunText(no), HasSubstr("Reason code:  QUOTA\n"));
}

TEST(GangDetailsTest, PendingGangShowsReasonAndNoPlacement) {
  const std::string text = GangDetails(PendingGang(), kNow);
  EXPECT_THAT(text, HasSubstr("Reason:     no node with 4 free GPUs\n"));
  EXPECT_THAT(text, HasSubstr("TOPOLOGY  SLICE"));
  EXPECT_THAT(text, HasSubstr("  w     1     4         -       any"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("Placement")));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("Owner")));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("Priority class")));
}

TEST(GangDetailsTest, OwnerAndPriorityClass) {
  v1::Gang gang = PendingGang();
  gang.set_owner("team-a");
  gang.mutable_spec()->set_priority(1000);
  gang.mutable_spec()->set_priority_class("production");
  const std::string text = GangDetails(gang, kNow);
  EXPECT_THAT(text, HasSubstr("Queue:           batch\n"
                              "Owner:           team-a\n"
                              "State:           PENDING\n"));
  EXPECT_THAT(text, HasSubstr("Priority:        1000\n"
                              "Priority class:  production\n"));
}

TEST(GangDetailsTest, LeaseExpiryAndGraceDeadline) {
  v1::Gang gang = PendingGang();
  *gang.mutable_lease_expire_time() = ToProto(kNow + absl::Seconds(30));
  *gang.mutable_grace_deadline() = ToProto(kNow + absl::Minutes(5));
  const std::string text = GangDetails(gang, kNow);
  EXPECT_THAT(text, HasSubstr("Lease expires:   "));
  EXPECT_THAT(text, HasSubstr("(in 30s)\n"));
  EXPECT_THAT(text, HasSubstr("Grace deadline:  "));
  EXPECT_THAT(text, HasSubstr("(in 5m)\n"));
  EXPECT_THAT(GangDetails(PendingGang(), kNow),
              ::testing::Not(HasSubstr("Lease")));
}

TEST(WatchLineTest, FixedColumns) {
  v1::GangEvent event;
  event.set_revision(1042);
  event.set_type(v1::EVENT_TYPE_ADMITTED);
  *event.mutable_time() = ToProto(kNow);
  *event.mutable_gang() = AdmittedGang();
  EXPECT_EQ(WatchHeader(),
            "REVISION  TIME                 EVENT      GANG         QUEUE      "
            "    STATE      DETAIL\n");
  EXPECT_EQ(WatchLine(event),
            "1042      2024-05-01T12:00:03Z ADMITTED   g-000042     llm        "
            "    ADMITTED   2 pods on 2 nodes\n");

  v1::GangEvent bookmark;
  bookmark.set_revision(1050);
  bookmark.set_type(v1::EVENT_TYPE_BOOKMARK);
  EXPECT_EQ(WatchLine(bookmark),
            "1050      -                    BOOKMARK   -            -          "
            "    -\n");
}

TEST(NodesTableTest, UsageLabelsAndHeartbeat) {
  v1::ListNodesResponse nodes = TextProto<v1::ListNodesResponse>(R"pb(
    nodes {
      id: "n-1"
      address: "10.0.0.1"
      gpu_model: "H100"
      gpu_count: 8
      labels { key: "rack" value: "r07" }
      labels { key: "block" value: "b1" }
      state: NODE_STATE_READY
      used_gpu_indices: [ 0, 1, 2, 3 ]
      gang_ids: "g-000042"
    }
    nodes {
      id: "n-2"
      address: "n-2"  # the daemon's answer for a node without an address
      gpu_model: "H200"
      gpu_count: 8
      state: NODE_STATE_CORDONED
      state_reason: "maint"
    }
  )pb");
  *nodes.mutable_nodes(0)->mutable_last_heartbeat() =
      ToProto(kNow - absl::Seconds(10));
  EXPECT_EQ(NodesTable(nodes.nodes(), kNow),
            "NODE  ADDRESS   MODEL  USED/GPUS  STATE     LABELS             "
            "GANGS     HEARTBEAT  REASON\n"
            "n-1   10.0.0.1  H100   4/8        READY     block=b1,rack=r07  "
            "g-000042  10s ago\n"
            "n-2   -         H200   0/8        CORDONED  -                  "
            "-         -          maint\n");
}

TEST(NodesTableTest, DrainDeadlineBesideTheState) {
  v1::ListNodesResponse nodes = TextProto<v1::ListNodesResponse>(R"pb(
    nodes {
      id: "n-1"
      gpu_model: "H100"
      gpu_count: 8
      state: NODE_STATE_DRAINING
    }
    nodes {
      id: "n-2"
      gpu_model: "H100"
      gpu_count: 8
      state: NODE_STATE_DRAINING
    }
  )pb");
  *nodes.mutable_nodes(0)->mutable_drain_deadline() =
      ToProto(kNow + absl::Minutes(90));
  *nodes.mutable_nodes(1)->mutable_drain_deadline() =
      ToProto(kNow - absl::Seconds(1));
  const std::string table = NodesTable(nodes.nodes(), kNow);
  EXPECT_THAT(table, HasSubstr("n-1   -        H100   0/8        DRAINING "
                               "(deadline in 1h30m)"));
  EXPECT_THAT(table, HasSubstr("n-2   -        H100   0/8        DRAINING "
                               "(deadline passed)"));
}

TEST(QueuesTableTest, QuotaAndUsage) {
  v1::ListQueuesResponse queues = TextProto<v1::ListQueuesResponse>(R"pb(
    queues {
      name: "llm"
      weight: 2
      nominal_gpus { key: "H100" value: 64 }
      status {
        held_gpus { key: "H100" value: 72 }
        pending_gangs: 3
        active_gangs: 4
        borrowed_gpus: 8
        fair_share_score: 0.5625
      }
    }
    queues {
      name: "batch"
      parent: "research"
      weight: 0.5
      held: true
      max_priority: 0
    }
  )pb");
  EXPECT_EQ(QueuesTable(queues.queues()),
            "NAME   PARENT    WEIGHT  NOMINAL  USED     BORROWED  PENDING  "
            "ACTIVE  SCORE   MAX PRIO  HELD\n"
            "llm    -         2       H100=64  H100=72  8         3        4 "
            "      0.5625  -         no\n"
            "batch  research  0.5     -        -        0         0        0 "
            "      0       0         yes\n");
}

TEST(TopologyTextTest, SummaryDomainsAndLevels) {
  v1::GetTopologyResponse topology = TextProto<v1::GetTopologyResponse>(R"pb(
    levels: [ "block", "rack" ]
    domains {
      path: "b1"
      level: "block"
      nodes: 4
      gpus_total: 32
      gpus_free: 12
      free_whole_nodes: 1
    }
    domains {
      path: "b1/r07"
      level: "rack"
      nodes: 2
      gpus_total: 16
      gpus_free: 12
      free_whole_nodes: 1
    }
    node_fragmentation: 0.125
    levels_fragmentation {
      level: "rack"
      largest_free_whole_nodes: 1
      stranded_whole_node_fraction: 0
    }
  )pb");
  EXPECT_EQ(TopologyText(topology),
            "Levels:              block, rack\n"
            "Node fragmentation:  12.5%\n"
            "\n"
            "DOMAIN  LEVEL  NODES  GPUS  FREE GPUS  FREE NODES\n"
            "b1      block  4      32    12         1\n"
            "b1/r07  rack   2      16    12         1\n"
            "\n"
            "LEVEL  LARGEST FREE (NODES)  STRANDED\n"
            "rack   1                     0.0%\n");
}

TEST(DryRunTextTest, FitsOrWhyNot) {
  v1::DryRunGangResponse fits;
  fits.set_fits(true);
  *fits.mutable_placement() = AdmittedGang().placement();
  EXPECT_EQ(DryRunText(fits),
            "Fits:  yes\n"
            "\n"
            "Placement (2 pods on 2 nodes):\n"
            "  POD SET  INDEX  NODE  GPUS\n"
            "  workers  0      n-1   0-3\n"
            "  workers  1      n-2   4-7\n");
  v1::DryRunGangResponse single;
  single.set_fits(true);
  *single.add_placement() = AdmittedGang().placement(0);
  EXPECT_THAT(DryRunText(single), HasSubstr("Placement (1 pod on 1 node):"));
  v1::DryRunGangResponse no;
  no.set_reason("no rack with 2 free nodes");
  EXPECT_EQ(DryRunText(no),
            "Fits:    no\n"
            "Reason:  no rack with 2 free nodes\n");
}

TEST(ExplainTextTest, PositionAndEstimate) {
  v1::ExplainGangResponse response;
  *response.mutable_gang() = PendingGang();
  response.set_reason("no node with 4 free GPUs");
  response.set_position(3);
  response.set_position_in_queue(1);
  *response.mutable_estimated_start() = ToProto(kNow + absl::Minutes(20));
  response.set_revision(1100);
  EXPECT_EQ(ExplainText(response, kNow),
            "ID:               g-000043\n"
            "Queue:            batch\n"
            "State:            PENDING\n"
            "Reason:           no node with 4 free GPUs\n"
            "Position:         3 of all pending, 1 in queue batch\n"
            "Estimated start:  2024-05-01T12:20:03Z (in 20m)\n"
            "Revision:         1100\n");
}

// PendingGang with a place in the plan: planned to start at `start` in
// `domain`, rank `rank`.
v1::Gang PlannedGang(absl::Time start, const std::string& domain, int rank) {
  v1::Gang gang = PendingGang();
  gang.set_plan_status(v1::PLAN_STATUS_PLANNED);
  *gang.mutable_estimated_start() = ToProto(start);
  gang.set_planned_domain(domain);
  gang.set_plan_rank(rank);
  return gang;
}

TEST(StartCellTest, RelativeStartOrWhyThereIsNone) {
  EXPECT_EQ(StartCell(PlannedGang(kNow + absl::Minutes(130), "/", 1), kNow),
            "in 2h10m");
  EXPECT_EQ(StartCell(PlannedGang(kNow, "/", 1), kNow), "now");
  EXPECT_EQ(StartCell(PlannedGang(kNow - absl::Seconds(5), "/", 1), kNow),
            "now");
  struct Case {
    v1::PlanStatus status;
    const char* cell;
  };
  for (const Case& c : {Case{v1::PLAN_STATUS_BEYOND_DEPTH, "beyond-depth"},
                        Case{v1::PLAN_STATUS_BEYOND_WINDOW, "beyond-window"},
                        Case{v1::PLAN_STATUS_NEVER_FITS, "never-fits"},
                        Case{v1::PLAN_STATUS_UNPLANNED, "-"},
                        Case{v1::PLAN_STATUS_NOT_PENDING, "-"},
                        Case{v1::PLAN_STATUS_UNSPECIFIED, "-"}}) {
    v1::Gang gang = PendingGang();
    gang.set_plan_status(c.status);
    EXPECT_EQ(StartCell(gang, kNow), c.cell) << v1::PlanStatus_Name(c.status);
  }
}

TEST(GangsTableTest, WideHasTheStartColumn) {
  v1::ListGangsResponse list;
  *list.add_gangs() = AdmittedGang();
  list.mutable_gangs(0)->set_plan_status(v1::PLAN_STATUS_NOT_PENDING);
  *list.add_gangs() = PlannedGang(kNow + absl::Minutes(20), "b1/r07", 1);
  EXPECT_EQ(
      GangsTable(list.gangs(), kNow, /*wide=*/true),
      "ID        QUEUE  OWNER  STATE     PRIO  PODS  GPUS  AGE  ATTEMPTS  "
      "NODES    CODE  START   REASON\n"
      "g-000042  llm    -      ADMITTED  5     2     8     5m   1         "
      "n-1,n-2  -     -\n"
      "g-000043  batch  -      PENDING   0     1     4     30s  0         "
      "-        -     in 20m  no node with 4 free GPUs\n");
}

TEST(PlanTextTest, EachStatusInWordsWithTheConfigsFiguresWhenKnown) {
  v1::PlanningConfig planning;
  planning.set_max_gangs(500);
  planning.mutable_window()->set_seconds(7 * 24 * 3600);
  struct Case {
    v1::PlanStatus status;
    const char* with_config;
    const char* without;
  };
  const Case cases[] = {
      {v1::PLAN_STATUS_UNPLANNED,
       "not planned yet: it came after the last plan was made",
       "not planned yet: it came after the last plan was made"},
      {v1::PLAN_STATUS_BEYOND_DEPTH,
       "not planned: more than 500 gangs are ahead of it",
       "not planned: more gangs are ahead of it than the plan holds"},
      {v1::PLAN_STATUS_BEYOND_WINDOW,
       "not planned: it would start more than 7d from now",
       "not planned: it would start beyond the plan's window"},
      {v1::PLAN_STATUS_NEVER_FITS,
       "not planned: no time within 7d fits it on the fleet as built",
       "not planned: no time in the plan's window fits it on the fleet as "
       "built"},
      {v1::PLAN_STATUS_NOT_PENDING, "", ""},
      {v1::PLAN_STATUS_UNSPECIFIED, "", ""},
  };
  for (const Case& c : cases) {
    v1::Gang gang = PendingGang();
    gang.set_plan_status(c.status);
    EXPECT_EQ(PlanText(gang, &planning), c.with_config)
        << v1::PlanStatus_Name(c.status);
    EXPECT_EQ(PlanText(gang, nullptr), c.without)
        << v1::PlanStatus_Name(c.status);
  }
  EXPECT_EQ(PlanText(PlannedGang(kNow, "/", 3), nullptr), "planned, rank 3");
}

TEST(GangDetailsTest, APlannedGangShowsItsStartDomainAndRank) {
  EXPECT_THAT(
      GangDetails(PlannedGang(kNow + absl::Minutes(20), "b1/r07", 2), kNow),
      HasSubstr("Reason:           no node with 4 free GPUs\n"
                "Plan:             planned, rank 2\n"
                "Estimated start:  2024-05-01T12:20:03Z (in 20m)\n"
                "Planned domain:   b1/r07\n"));
  v1::Gang deep = PendingGang();
  deep.set_plan_status(v1::PLAN_STATUS_BEYOND_DEPTH);
  v1::PlanningConfig planning;
  planning.set_max_gangs(40);
  EXPECT_THAT(GangDetails(deep, kNow, &planning),
              HasSubstr("Plan:       not planned: more than 40 gangs are ahead "
                        "of it\n"));
  // Read from an HA follower: no plan, no rows.
  EXPECT_THAT(GangDetails(PendingGang(), kNow),
              ::testing::Not(HasSubstr("Plan")));
}

TEST(ExplainTextTest, ThePlansStartDomainAndReservation) {
  v1::ExplainGangResponse response;
  *response.mutable_gang() = PlannedGang(kNow + absl::Hours(2), "/", 1);
  response.set_reason("no node with 4 free GPUs");
  response.set_position(1);
  response.set_position_in_queue(1);
  *response.mutable_estimated_start() = response.gang().estimated_start();
  response.set_reserved_domain("b1");
  response.set_revision(1200);
  EXPECT_EQ(ExplainText(response, kNow),
            "ID:               g-000043\n"
            "Queue:            batch\n"
            "State:            PENDING\n"
            "Reason:           no node with 4 free GPUs\n"
            "Position:         1 of all pending, 1 in queue batch\n"
            "Plan:             planned, rank 1\n"
            "Estimated start:  2024-05-01T14:00:03Z (in 2h)\n"
            "Planned domain:   /\n"
            "Reserved:         b1\n"
            "Revision:         1200\n");
  v1::ExplainGangResponse beyond;
  *beyond.mutable_gang() = PendingGang();
  beyond.mutable_gang()->set_plan_status(v1::PLAN_STATUS_BEYOND_WINDOW);
  v1::PlanningConfig planning;
  planning.mutable_window()->set_seconds(3600);
  EXPECT_THAT(ExplainText(beyond, kNow, &planning),
              HasSubstr("Plan:      not planned: it would start more than 1h "
                        "from now\n"));
}

// Text no terminal would act on: valid UTF-8 (so no stray C1 byte), no C0
// control but '\n', no DEL, no C1 control, no bidirectional override.
void ExpectTerminalSafe(const std::string& text, const std::string& view) {
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    ASSERT_FALSE((c < 0x20 && c != '\n') || c == 0x7f)
        << view << ": byte " << int{c} << " at " << i;
    const size_t length = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
    ASSERT_TRUE(c < 0x80 || (c >= 0xc2 && c <= 0xf4))
        << view << ": not a lead byte at " << i;
    ASSERT_LE(i + length, text.size()) << view << ": cut character";
    for (size_t k = 1; k < length; ++k) {
      ASSERT_EQ(static_cast<unsigned char>(text[i + k]) & 0xc0, 0x80)
          << view << ": bad continuation at " << i + k;
    }
    if (c == 0xc2) {
      const unsigned char next = static_cast<unsigned char>(text[i + 1]);
      ASSERT_FALSE(next >= 0x80 && next <= 0x9f)
          << view << ": C1 control at " << i;
    }
    i += length;
  }
  EXPECT_THAT(text, ::testing::Not(HasSubstr("\xe2\x80\xae"))) << view;
}

// Every hostile sequence at once.
const std::string kHostile = std::string("\x1b]0;pwned\x07|\x1b[2J|\r|\x7f|") +
                             "\xc2\x9b"
                             "31m|\x9b|\xe2\x80\xae|\xff|" +
                             std::string(1, '\0');

TEST(HostileTextTest, EveryViewEscapesServerStrings) {
  v1::Gang gang = AdmittedGang();
  gang.set_id("g-" + kHostile);
  gang.set_reason(kHostile);
  gang.set_message(kHostile);
  gang.mutable_spec()->set_queue(kHostile);
  gang.mutable_spec()->set_request_id(kHostile);
  (*gang.mutable_spec()->mutable_labels())["name"] = kHostile;
  gang.mutable_spec()->mutable_pod_sets(0)->set_name(kHostile);
  gang.mutable_spec()->mutable_pod_sets(0)->add_gpu_models(kHostile);
  gang.mutable_placement(0)->set_node(kHostile);
  google::protobuf::RepeatedPtrField<v1::Gang> gangs;
  *gangs.Add() = gang;
  ExpectTerminalSafe(GangsTable(gangs, kNow), "GangsTable");
  const std::string details = GangDetails(gang, kNow);
  ExpectTerminalSafe(details, "GangDetails");
  EXPECT_THAT(details, HasSubstr("name=\\x1b]0;pwned\\x07|\\x1b[2J|\\r|\\x7f|"
                                 "\\u009b31m|\\x9b|\\u202e|\\xff|\\x00"));

  v1::GangEvent event;
  event.set_type(v1::EVENT_TYPE_SUBMITTED);
  *event.mutable_gang() = gang;
  event.mutable_gang()->clear_placement();
  ExpectTerminalSafe(WatchLine(event), "WatchLine");
  EXPECT_THAT(WatchLine(event), HasSubstr("\\x1b]0;pwned"));

  v1::ExplainGangResponse explain;
  *explain.mutable_gang() = gang;
  explain.set_reason(kHostile);
  explain.set_reserved_domain(kHostile);
  explain.set_position(1);
  ExpectTerminalSafe(ExplainText(explain, kNow), "ExplainText");

  v1::DryRunGangResponse dryrun;
  dryrun.set_reason(kHostile);
  *dryrun.mutable_placement() = gang.placement();
  ExpectTerminalSafe(DryRunText(dryrun), "DryRunText");

  v1::ListNodesResponse nodes;
  v1::Node* node = nodes.add_nodes();
  node->set_id(kHostile);
  node->set_gpu_model(kHostile);
  (*node->mutable_labels())[kHostile] = kHostile;
  node->add_gang_ids(kHostile);
  node->set_state_reason(kHostile);
  ExpectTerminalSafe(NodesTable(nodes.nodes(), kNow), "NodesTable");

  v1::ListQueuesResponse queues;
  v1::Queue* queue = queues.add_queues();
  queue->set_name(kHostile);
  queue->set_parent(kHostile);
  (*queue->mutable_nominal_gpus())[kHostile] = 8;
  ExpectTerminalSafe(QueuesTable(queues.queues()), "QueuesTable");

  v1::GetTopologyResponse topology;
  topology.add_levels(kHostile);
  v1::Domain* domain = topology.add_domains();
  domain->set_path(kHostile);
  domain->set_level(kHostile);
  topology.add_levels_fragmentation()->set_level(kHostile);
  ExpectTerminalSafe(TopologyText(topology), "TopologyText");

  gang.set_owner(kHostile);
  *gangs.Mutable(0) = gang;
  ExpectTerminalSafe(GangsTable(gangs, kNow), "GangsTable owner");
  ExpectTerminalSafe(GangDetails(gang, kNow), "GangDetails owner");
  EXPECT_THAT(GangDetails(gang, kNow),
              ::testing::ContainsRegex(R"(Owner: +\\x1b\]0;pwned)"));
}

TEST(AuditMethodNameTest, ShortNameOfOurMethodsOnly) {
  EXPECT_EQ(AuditMethodName("/phalanx.v1.Admin/PutQueue"), "PutQueue");
  EXPECT_EQ(AuditMethodName("/phalanx.v1.Scheduler/CancelGang"), "CancelGang");
  for (const char* whole :
       {"", "/grpc.health.v1.Health/Check", "/phalanx.v1.Admin/",
        "/phalanx.v1./PutQueue", "/phalanx.v1.Admin", "/phalanx.v1.A/b/c",
        "unknown"}) {
    EXPECT_EQ(AuditMethodName(whole), whole);
  }
}

v1::ListAuditRecordsResponse AuditPage() {
  v1::ListAuditRecordsResponse response =
      TextProto<v1::ListAuditRecordsResponse>(R"pb(
        records {
          principal: "team-a"
          method: "/phalanx.v1.Admin/PutQueue"
          target: "a"
          outcome: "PERMISSION_DENIED"
          summary: "role TENANT may not call PutQueue"
          sequence: 7
        }
        records {
          method: "/phalanx.v1.Admin/GetConfig"
          outcome: "UNAUTHENTICATED"
          sequence: 8
        }
      )pb");
  *response.mutable_records(0)->mutable_time() = ToProto(kNow);
  return response;
}

TEST(AuditTextTest, OneRowPerRecordInOrder) {
  EXPECT_EQ(AuditText(AuditPage()),
            "TIME                  PRINCIPAL  METHOD     TARGET  OUTCOME       "
            "     SUMMARY\n"
            "2024-05-01T12:00:03Z  team-a     PutQueue   a       "
            "PERMISSION_DENIED  role TENANT may not call PutQueue\n"
            "-                     -          GetConfig  -       "
            "UNAUTHENTICATED\n");
}

TEST(AuditTextTest, DroppedRecordsAreCounted) {
  v1::ListAuditRecordsResponse response = AuditPage();
  response.set_dropped(12);
  EXPECT_THAT(AuditText(response),
              ::testing::EndsWith("UNAUTHENTICATED\ndropped: 12 (records over "
                                  "the per-principal audit rate)\n"));
  response.clear_records();
  EXPECT_EQ(AuditText(response),
            "dropped: 12 (records over the per-principal audit rate)\n");
  EXPECT_EQ(AuditText(v1::ListAuditRecordsResponse()), "");
}

TEST(AuditTextTest, HostileFieldsAreEscapedAndBounded) {
  v1::ListAuditRecordsResponse response = AuditPage();
  v1::AuditRecord* record = response.add_records();
  record->set_principal(kHostile);
  record->set_method("/phalanx.v1.Admin/" + kHostile);
  record->set_target(kHostile);
  record->set_outcome(kHostile);
  record->set_summary(kHostile + std::string(1 << 20, 's'));
  const std::string text = AuditText(response);
  ExpectTerminalSafe(text, "AuditText");
  EXPECT_THAT(text, HasSubstr("\\x1b]0;pwned\\x07|\\x1b[2J"));
  EXPECT_LT(text.size(), 2000u);
  EXPECT_THAT(text, ::testing::EndsWith("ss\xe2\x80\xa6\n"));
}

TEST(HugeFieldTest, NodesTableStaysBoundedWithAHugeLabel) {
  v1::ListNodesResponse nodes;
  for (int i = 0; i < 4000; ++i) {
    v1::Node* node = nodes.add_nodes();
    node->set_id(absl::StrCat("n-", i));
    node->set_gpu_model("H100");
    node->set_gpu_count(8);
    (*node->mutable_labels())["rack"] = "r1";
  }
  (*nodes.mutable_nodes(0)->mutable_labels())["big"] =
      std::string(3 << 20, 'x');
  const std::string table = NodesTable(nodes.nodes(), kNow);
  EXPECT_LT(table.size(), 4000u * 200) << "was 3 MiB of padding per row";
  EXPECT_THAT(table, HasSubstr("big=xxxxxxxxxx"));
  EXPECT_THAT(table, HasSubstr("x\xe2\x80\xa6  "));
}

TEST(HugeFieldTest, DetailsCutOneFieldWithANote) {
  v1::Gang gang = PendingGang();
  gang.set_message(std::string(1 << 20, 'm'));
  const std::string details = GangDetails(gang, kNow);
  EXPECT_LT(details.size(), 8192u);
  EXPECT_THAT(details, HasSubstr("m\xe2\x80\xa6 (1044480 more bytes)\n"));
}

TEST(HugeFieldTest, WatchLineIsBounded) {
  v1::GangEvent event;
  event.set_type(v1::EVENT_TYPE_SUBMITTED);
  *event.mutable_gang() = PendingGang();
  event.mutable_gang()->set_id(std::string(1000, 'i'));
  event.mutable_gang()->set_reason(std::string(1 << 20, 'r'));
  const std::string line = WatchLine(event);
  EXPECT_LT(line.size(), 600u);
  EXPECT_THAT(line, HasSubstr(std::string(63, 'i') + "\xe2\x80\xa6 "));
  EXPECT_THAT(line,
              ::testing::EndsWith(std::string(255, 'r') + "\xe2\x80\xa6\n"));
}

}  // namespace
}  // namespace phalanx::ctl
