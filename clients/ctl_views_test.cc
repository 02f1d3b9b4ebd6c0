#include "clients/ctl_views.h"

#include <string>

#include "absl/time/time.h"
#include "clients/ctl_format.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace phalanx::ctl {
namespace {

using ::testing::HasSubstr;

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
  EXPECT_EQ(GangsTable(list.gangs(), kNow),
            "ID        QUEUE  STATE     PRIO  PODS  GPUS  AGE  REASON\n"
            "g-000042  llm    ADMITTED  5     2     8     5m\n"
            "g-000043  batch  PENDING   0     1     4     30s  no node with 4 "
            "free GPUs\n");
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

TEST(GangDetailsTest, PendingGangShowsReasonAndNoPlacement) {
  const std::string text = GangDetails(PendingGang(), kNow);
  EXPECT_THAT(text, HasSubstr("Reason:     no node with 4 free GPUs\n"));
  EXPECT_THAT(text, HasSubstr("TOPOLOGY  SLICE"));
  EXPECT_THAT(text, HasSubstr("  w     1     4         -       any"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("Placement")));
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
      gpu_model: "H200"
      gpu_count: 8
      state: NODE_STATE_CORDONED
      state_reason: "maint"
    }
  )pb");
  *nodes.mutable_nodes(0)->mutable_last_heartbeat() =
      ToProto(kNow - absl::Seconds(10));
  EXPECT_EQ(NodesTable(nodes.nodes(), kNow),
            "NODE  MODEL  USED/GPUS  STATE     LABELS             GANGS     "
            "HEARTBEAT  REASON\n"
            "n-1   H100   4/8        READY     block=b1,rack=r07  g-000042  "
            "10s ago\n"
            "n-2   H200   0/8        CORDONED  -                  -         "
            "-          maint\n");
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
  EXPECT_THAT(table, HasSubstr("n-1   H100   0/8        DRAINING (deadline "
                               "in 1h30m)"));
  EXPECT_THAT(table, HasSubstr("n-2   H100   0/8        DRAINING (deadline "
                               "passed)"));
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
    queues { name: "batch" parent: "research" weight: 0.5 held: true }
  )pb");
  EXPECT_EQ(QueuesTable(queues.queues()),
            "NAME   PARENT    WEIGHT  NOMINAL  USED     BORROWED  PENDING  "
            "ACTIVE  SCORE  HELD\n"
            "llm    -         2       H100=64  H100=72  8         3        4 "
            "      0.562  no\n"
            "batch  research  0.5     -        -        0         0        0 "
            "      0      yes\n");
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

}  // namespace
}  // namespace phalanx::ctl
