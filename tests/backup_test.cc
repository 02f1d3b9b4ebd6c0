// Backups of a live daemon restored into a second one; schema versions of
// the data dir at start-up; the WAL fsync counter.
#include <atomic>
#include <filesystem>
#include <iostream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/store_testing.h"
#include "tests/daemon.h"

namespace phalanx::testing {
namespace {

using ::testing::HasSubstr;

struct Acked {
  std::string gang_id;
  int64_t revision = 0;
};

grpc::Status Backup(DaemonProcess& daemon, const std::string& directory,
                    v1::CreateBackupResponse* response) {
  grpc::ClientContext context;
  v1::CreateBackupRequest request;
  request.set_directory(directory);
  return daemon.Admin()->CreateBackup(&context, request, response);
}

TEST(BackupTest, BackupOfALiveDaemonRestoresUpToItsRevision) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  // Submits keep coming while the backup is taken.
  std::atomic<bool> stop{false};
  std::vector<Acked> acked;
  std::thread client([&] {
    auto scheduler = daemon->Scheduler();
    for (int n = 0; n < 400 && !stop.load(); ++n) {
      grpc::ClientContext context;
      v1::SubmitGangResponse response;
      if (!scheduler
               ->SubmitGang(&context,
                            SubmitRequest("a", 1, 1, "", absl::StrCat("r", n)),
                            &response)
               .ok()) {
        break;
      }
      acked.push_back({response.gang().id(), response.revision()});
    }
  });
  // A few submits before the backup, some more after.
  auto scheduler = daemon->Scheduler();
  for (int i = 0; i < 3; ++i) SubmitOk(*scheduler, SubmitRequest("b", 1, 1));
  DaemonProcess restored;
  v1::CreateBackupResponse backup;
  grpc::Status status = Backup(*daemon, restored.data_dir(), &backup);
  for (int i = 0; i < 3; ++i) SubmitOk(*scheduler, SubmitRequest("b", 1, 1));
  stop = true;
  client.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(backup.directory(), restored.data_dir());
  EXPECT_GT(backup.revision(), 0);
  ASSERT_FALSE(acked.empty());

  // A second daemon on the backup holds exactly the batches up to its
  // revision (a submit's revision lies in its batch, and the backup ends at
  // a batch boundary).
  ASSERT_TRUE(restored.Start()) << restored.output();
  auto copy = restored.Scheduler();
  grpc::ClientContext list_context;
  v1::ListGangsRequest list_request;
  list_request.set_page_size(1000);
  v1::ListGangsResponse listed;
  ASSERT_TRUE(copy->ListGangs(&list_context, list_request, &listed).ok());
  EXPECT_EQ(listed.revision(), backup.revision());
  int before = 0, after = 0;
  for (const Acked& gang : acked) {
    grpc::ClientContext context;
    v1::GetGangRequest request;
    request.set_gang_id(gang.gang_id);
    v1::GetGangResponse got;
    const grpc::Status get = copy->GetGang(&context, request, &got);
    if (gang.revision <= backup.revision()) {
      ++before;
      EXPECT_TRUE(get.ok()) << gang.gang_id << " at " << gang.revision;
    } else {
      ++after;
      EXPECT_EQ(get.error_code(), grpc::StatusCode::NOT_FOUND)
          << gang.gang_id << " at " << gang.revision;
    }
  }
  EXPECT_GT(before, 0);
  std::cout << before << " acknowledged gangs before the backup's revision, "
            << after << " after\n";
  // The original still serves, and audited the backup.
  grpc::ClientContext audit_context;
  v1::ListAuditRecordsResponse audit;
  ASSERT_TRUE(daemon->Admin()
                  ->ListAuditRecords(&audit_context,
                                     v1::ListAuditRecordsRequest(), &audit)
                  .ok());
  bool audited = false;
  for (const v1::AuditRecord& record : audit.records()) {
    audited |= record.method() == "/phalanx.v1.Admin/CreateBackup" &&
               record.outcome() == "OK";
  }
  EXPECT_TRUE(audited);
}

TEST(BackupTest, RefusesRelativeAndNonEmptyDirectories) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  v1::CreateBackupResponse response;
  EXPECT_EQ(Backup(*daemon, "", &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Backup(*daemon, "backups/today", &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Its own data dir is not empty.
  const grpc::Status full = Backup(*daemon, daemon->data_dir(), &response);
  EXPECT_EQ(full.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(full.error_message(), HasSubstr("not empty"));
}

TEST(SchemaVersionTest, PreviousReleaseIsMigratedAndNewerIsRefused) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  auto scheduler = daemon->Scheduler();
  const v1::Gang gang = SubmitOk(*scheduler, SubmitRequest("a", 1, 1));
  ASSERT_EQ(daemon->Terminate(), 0);

  // A data dir of the release before schema versions.
  ASSERT_TRUE(
      storage::testing::SetRawSchemaVersion(daemon->data_dir(), "").ok());
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  EXPECT_THAT(daemon->output(), HasSubstr("from schema version 1 to 2"));
  GetOk(*daemon->Scheduler(), gang.id());
  ASSERT_EQ(daemon->Terminate(), 0);

  // A data dir of a newer release.
  ASSERT_TRUE(
      storage::testing::SetRawSchemaVersion(daemon->data_dir(), "7").ok());
  EXPECT_FALSE(daemon->Start());
  EXPECT_THAT(daemon->output(),
              HasSubstr("data dir schema version 7 is newer than this "
                        "phalanxd supports (2); upgrade phalanxd"));
}

// The value of an unlabelled metric in a /metrics page; -1 when missing.
double MetricValue(const std::string& page, const std::string& name) {
  std::smatch match;
  if (!std::regex_search(page, match,
                         std::regex("\n" + name + " ([0-9.e+]+)"))) {
    return -1;
  }
  return std::stod(match[1]);
}

TEST(StorageMetricsTest, WalSyncsCountASubmit) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  auto scheduler = daemon->Scheduler();
  SubmitOk(*scheduler, SubmitRequest("a", 1, 1));
  const double before = MetricValue(HttpGet(daemon->metrics_port(), "/metrics"),
                                    "phalanx_storage_wal_syncs_total");
  ASSERT_GE(before, 1);
  SubmitOk(*scheduler, SubmitRequest("a", 1, 1));
  const double after = MetricValue(HttpGet(daemon->metrics_port(), "/metrics"),
                                   "phalanx_storage_wal_syncs_total");
  EXPECT_GT(after, before);
}

}  // namespace
}  // namespace phalanx::testing
