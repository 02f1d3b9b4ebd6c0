#include "proto/log_convert.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "core/scheduler.h"
#include "core/testing.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "phalanx/v1/types.pb.h"

namespace phalanx::convert {
namespace {

using core::testing::MakeNodes;
using core::testing::Spec;

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

// A batch with every kind of record: nodes, a queue, config, an admitted
// gang, its idempotency key, events, an audit record, trims and deletes.
core::Mutation FullMutation() {
  core::Config config;
  config.topology_levels = {"block", "rack"};
  core::Scheduler s(config);
  EXPECT_TRUE(s.UpsertNodes(MakeNodes(1, 2, 2)).ok());
  core::Queue queue;
  queue.name = core::QueueName("llm");
  EXPECT_TRUE(s.PutQueue(queue).ok());
  EXPECT_TRUE(s.Submit(Spec("llm").Pods(2, 8).RequestId("r1"), kT0).ok());
  s.RunCycle(kT0 + absl::Seconds(1));
  core::Mutation m = s.TakeMutation();
  m.config = s.config();
  m.gangs_deleted.emplace_back("g-old");
  m.nodes_deleted.emplace_back("n-old");
  m.queues_deleted.emplace_back("q-old");
  m.requests_deleted.emplace_back(core::QueueName("llm"), "r0");
  m.ledger_put.emplace_back(core::QueueName("llm"),
                            core::LedgerEntry{{{"H100", 2.5}}, kT0});
  m.ledger_deleted.emplace_back("q-old");
  m.trim_events_before = 7;
  m.audit_put.push_back(
      {3, kT0, "alice", "/phalanx.v1.Admin/PutQueue", "llm", "OK", "put"});
  m.trim_audit_before = 2;
  m.startup_files = core::StartupFileHashes{"c0ffee", "", "beef"};
  return m;
}

storage::v1::LogBatch Encode(const core::Mutation& m) {
  storage::v1::LogBatch batch;
  ToProto(m, &batch);
  return batch;
}

TEST(LogConvertTest, RoundTripKeepsEveryRecord) {
  const core::Mutation m = FullMutation();
  storage::v1::LogBatch batch;
  ToProto(m, &batch);
  auto back = MutationFromProto(batch);
  ASSERT_TRUE(back.ok()) << back.status();
  // Maps (labels) serialize in any order: compare the messages.
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(Encode(*back),
                                                                 Encode(m)));
  ASSERT_EQ(back->gangs_put.size(), 1u);
  EXPECT_EQ(*back->gangs_put[0], *m.gangs_put[0]);
  EXPECT_EQ(back->nodes_put.size(), 4u);
  EXPECT_EQ(back->queues_put.size(), 1u);
  EXPECT_EQ(back->config, m.config);
  EXPECT_EQ(back->requests_put.size(), 1u);
  EXPECT_EQ(back->requests_deleted, m.requests_deleted);
  EXPECT_EQ(back->ledger_put, m.ledger_put);
  EXPECT_EQ(back->ledger_deleted, m.ledger_deleted);
  EXPECT_EQ(back->events.size(), m.events.size());
  EXPECT_EQ(back->trim_events_before, 7);
  EXPECT_EQ(back->audit_put, m.audit_put);
  EXPECT_EQ(back->trim_audit_before, 2);
  EXPECT_EQ(back->meta, m.meta);
  EXPECT_EQ(back->startup_files, m.startup_files);
}

TEST(LogConvertTest, NoConfigStaysNoConfig) {
  core::Mutation m;
  m.meta.last_revision = 4;
  storage::v1::LogBatch batch;
  ToProto(m, &batch);
  auto back = MutationFromProto(batch);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->config.has_value());
  EXPECT_FALSE(back->startup_files.has_value());
  EXPECT_EQ(back->meta.last_revision, 4);
}

TEST(LogConvertTest, UnconvertibleRecordIsDataLoss) {
  storage::v1::LogBatch batch;
  batch.add_gangs_put()->set_state(static_cast<v1::GangState>(999));
  EXPECT_EQ(MutationFromProto(batch).status().code(),
            absl::StatusCode::kDataLoss);
}

// Maps filled in opposite orders may iterate in different orders; their
// encodings are the same bytes all the same, and parse back.
TEST(LogConvertTest, DeterministicBytesAreTheSameForEqualMessages) {
  v1::Node forward;
  v1::Node backward;
  for (int i = 0; i < 64; ++i) {
    (*forward.mutable_labels())[absl::StrCat("label-", i)] = "x";
    (*backward.mutable_labels())[absl::StrCat("label-", 63 - i)] = "x";
  }
  const std::string bytes = DeterministicBytes(forward);
  EXPECT_EQ(DeterministicBytes(backward), bytes);
  v1::Node parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_TRUE(
      google::protobuf::util::MessageDifferencer::Equals(parsed, forward));
}

}  // namespace
}  // namespace phalanx::convert
