#include "server/audit_log.h"

#include <stdlib.h>

#include <filesystem>

#include "gtest/gtest.h"
#include "storage/rocksdb_store.h"

namespace phalanx::server {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

class AuditLogTest : public ::testing::Test {
 protected:
  AuditLogTest() {
    char pattern[] = "/tmp/phalanx-audit-XXXXXX";
    dir_ = mkdtemp(pattern);
    store_ = *storage::RocksDbStore::Open(dir_);
    log_ = *AuditLog::Open(store_.get());
  }
  ~AuditLogTest() override {
    log_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  AuditEntry Entry(const std::string& principal, absl::StatusCode outcome,
                   absl::Time time = kT0) {
    return {time, principal, "/phalanx.v1.Admin/PutQueue", "q", outcome, "s"};
  }

  // What the loop does with a batch: the pending records, committed.
  core::Mutation Commit(const core::Scheduler& scheduler,
                        absl::Time now = kT0) {
    core::Mutation mutation;
    log_->Contribute(mutation, scheduler, now);
    EXPECT_TRUE(store_->Commit(mutation).ok());
    return mutation;
  }

  std::string dir_;
  std::unique_ptr<storage::RocksDbStore> store_;
  std::unique_ptr<AuditLog> log_;
  core::Scheduler scheduler_;
};

TEST_F(AuditLogTest, AFloodOfRefusalsIsBoundedPerPrincipalAndCounted) {
  for (int i = 0; i < 1000; ++i) {
    log_->Record(Entry("flooder", absl::StatusCode::kPermissionDenied));
  }
  log_->Record(Entry("other", absl::StatusCode::kPermissionDenied));
  // Successful changes are never dropped.
  for (int i = 0; i < 300; ++i) {
    log_->Record(Entry("flooder", absl::StatusCode::kOk));
  }
  const core::Mutation m = Commit(scheduler_);
  int refusals = 0, others = 0, changes = 0;
  for (const core::AuditRecord& r : m.audit_put) {
    if (r.outcome == "OK")
      ++changes;
    else if (r.principal == "other")
      ++others;
    else
      ++refusals;
  }
  EXPECT_EQ(refusals, 200);  // the burst
  EXPECT_EQ(others, 1);
  EXPECT_EQ(changes, 300);
  EXPECT_EQ(log_->dropped(), 800);
  // Sequences are strictly increasing from 1.
  for (size_t i = 0; i < m.audit_put.size(); ++i) {
    EXPECT_EQ(m.audit_put[i].sequence, static_cast<int64_t>(i) + 1);
  }
}

TEST_F(AuditLogTest, ListsInPagesAndContinuesTheSequenceAfterARestart) {
  for (int i = 0; i < 5; ++i) {
    log_->Record(Entry("a", absl::StatusCode::kOk));
  }
  Commit(scheduler_);
  v1::ListAuditRecordsRequest request;
  request.set_page_size(2);
  std::vector<int64_t> seen;
  for (int page = 0; page < 10; ++page) {
    v1::ListAuditRecordsResponse response;
    ASSERT_TRUE(log_->List(request, &response).ok());
    for (const auto& r : response.records()) seen.push_back(r.sequence());
    if (response.next_page_token().empty()) break;
    request.set_page_token(response.next_page_token());
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 2, 3, 4, 5}));
  request.set_page_token("x");
  v1::ListAuditRecordsResponse bad;
  EXPECT_EQ(log_->List(request, &bad).code(),
            absl::StatusCode::kInvalidArgument);
  request.set_page_token("");
  request.set_page_size(1001);
  EXPECT_EQ(log_->List(request, &bad).code(),
            absl::StatusCode::kInvalidArgument);

  log_ = *AuditLog::Open(store_.get());
  log_->Record(Entry("a", absl::StatusCode::kOk));
  EXPECT_EQ(Commit(scheduler_).audit_put.at(0).sequence, 6);
}

TEST_F(AuditLogTest, RetentionTrimsByCountAndByAge) {
  core::Config config;
  config.retention.audit_records = 100;
  config.retention.audit_age = absl::Hours(24);
  core::Scheduler scheduler(config);
  for (int i = 0; i < 150; ++i) {
    log_->Record(Entry("a", absl::StatusCode::kOk, kT0 - absl::Hours(48)));
  }
  // Count: the newest 100 of 150 stay.
  EXPECT_EQ(Commit(scheduler, kT0 - absl::Hours(47)).trim_audit_before, 51);
  // Age: a minute later, everything older than a day goes.
  log_->Record(Entry("a", absl::StatusCode::kOk, kT0));
  EXPECT_EQ(Commit(scheduler, kT0).trim_audit_before, 151);
  v1::ListAuditRecordsResponse response;
  ASSERT_TRUE(log_->List(v1::ListAuditRecordsRequest(), &response).ok());
  ASSERT_EQ(response.records_size(), 1);
  EXPECT_EQ(response.records(0).sequence(), 151);
}

}  // namespace
}  // namespace phalanx::server
