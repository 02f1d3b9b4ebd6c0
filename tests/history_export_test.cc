// Admin.ExportHistory over real gRPC against the real phalanxd: gangs that
// finished, were preempted, are running and never started, each exported
// with its shape, times, run time and attempts; paging, the `since` filter,
// labels only when asked, and bad requests named by field. Who may call it
// is in auth_test.cc's table of every RPC.
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "tests/daemon.h"

namespace phalanx::testing {
namespace {

using ::google::protobuf::util::TimeUtil;
using ::testing::HasSubstr;

class HistoryExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = StartDemoDaemon();
    ASSERT_TRUE(daemon_->Start()) << daemon_->output();
    scheduler_ = daemon_->Scheduler();
    admin_ = daemon_->Admin();
    EnablePreemption();
  }

  void EnablePreemption() {
    grpc::ClientContext context;
    v1::UpdateConfigRequest request;
    v1::PreemptionConfig* preemption =
        request.mutable_config()->mutable_preemption();
    preemption->set_enabled(true);
    preemption->mutable_min_runtime()->set_seconds(0);
    preemption->mutable_grace_period()->set_seconds(600);
    request.mutable_update_mask()->add_paths("preemption");
    v1::Config updated;
    ASSERT_TRUE(admin_->UpdateConfig(&context, request, &updated).ok());
  }

  void Report(const std::string& id, v1::GangState state, bool ack = false) {
    grpc::ClientContext context;
    v1::ReportGangRequest request;
    request.set_gang_id(id);
    request.set_state(state);
    request.set_preemption_acknowledged(ack);
    v1::ReportGangResponse response;
    grpc::Status status = scheduler_->ReportGang(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  grpc::Status Export(const v1::ExportHistoryRequest& request,
                      v1::ExportHistoryResponse* response) {
    grpc::ClientContext context;
    return admin_->ExportHistory(&context, request, response);
  }

  // Every record, following next_page_token with `page_size`; at most 20
  // pages.
  std::vector<v1::HistoryRecord> ExportAll(v1::ExportHistoryRequest request,
                                           int* pages = nullptr) {
    std::vector<v1::HistoryRecord> records;
    for (int page = 1; page <= 20; ++page) {
      v1::ExportHistoryResponse response;
      grpc::Status status = Export(request, &response);
      EXPECT_TRUE(status.ok()) << status.error_message();
      records.insert(records.end(), response.records().begin(),
                     response.records().end());
      if (pages != nullptr) *pages = page;
      if (response.next_page_token().empty()) break;
      request.set_page_token(response.next_page_token());
    }
    return records;
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::Scheduler::Stub> scheduler_;
  std::unique_ptr<v1::Admin::Stub> admin_;
};

absl::Duration RunTime(const v1::HistoryRecord& record) {
  return absl::Milliseconds(
      TimeUtil::DurationToMilliseconds(record.run_time()));
}

absl::Duration Between(const google::protobuf::Timestamp& from,
                       const google::protobuf::Timestamp& to) {
  return absl::Milliseconds(TimeUtil::DurationToMilliseconds(to - from));
}

TEST_F(HistoryExportTest, EveryGangWithItsRunsInSubmitOrderPageByPage) {
  // Finished: 2 pods of 8 in one rack, ran about 0.2 s.
  const v1::Gang done = SubmitOk(*scheduler_, SubmitRequest("a", 2, 8, "rack"));
  ASSERT_EQ(done.state(), v1::GANG_STATE_ADMITTED);
  Report(done.id(), v1::GANG_STATE_RUNNING);
  absl::SleepFor(absl::Milliseconds(200));
  Report(done.id(), v1::GANG_STATE_SUCCEEDED);
  // Preempted once and requeued: 4 pods, labelled.
  v1::SubmitGangRequest low_request = SubmitRequest("a", 4, 8);
  (*low_request.mutable_spec()->mutable_labels())["team"] = "vision";
  low_request.mutable_spec()->mutable_estimated_runtime()->set_seconds(3600);
  const v1::Gang low = SubmitOk(*scheduler_, low_request);
  ASSERT_EQ(low.state(), v1::GANG_STATE_ADMITTED);
  absl::SleepFor(absl::Milliseconds(100));
  v1::SubmitGangRequest high_request = SubmitRequest("a", 6, 8);
  high_request.mutable_spec()->set_priority(10);
  const v1::Gang high = SubmitOk(*scheduler_, high_request);
  ASSERT_EQ(GetOk(*scheduler_, low.id()).state(), v1::GANG_STATE_PREEMPTING);
  Report(low.id(), v1::GANG_STATE_UNSPECIFIED, /*ack=*/true);
  ASSERT_EQ(GetOk(*scheduler_, low.id()).state(), v1::GANG_STATE_PENDING);
  ASSERT_EQ(GetOk(*scheduler_, high.id()).state(), v1::GANG_STATE_ADMITTED);
  // Never started: cancelled while pending.
  const v1::Gang never = SubmitOk(*scheduler_, SubmitRequest("a", 8, 8));
  ASSERT_EQ(never.state(), v1::GANG_STATE_PENDING);
  {
    grpc::ClientContext context;
    v1::CancelGangRequest request;
    request.set_gang_id(never.id());
    v1::CancelGangResponse response;
    ASSERT_TRUE(scheduler_->CancelGang(&context, request, &response).ok());
  }

  v1::ExportHistoryRequest request;
  request.set_page_size(3);
  int pages = 0;
  const std::vector<v1::HistoryRecord> records = ExportAll(request, &pages);
  EXPECT_EQ(pages, 2);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0].gang_id(), done.id());
  EXPECT_EQ(records[1].gang_id(), low.id());
  EXPECT_EQ(records[2].gang_id(), high.id());
  EXPECT_EQ(records[3].gang_id(), never.id());

  const v1::HistoryRecord& r0 = records[0];
  EXPECT_EQ(r0.queue(), "a");
  EXPECT_EQ(r0.state(), v1::GANG_STATE_SUCCEEDED);
  ASSERT_EQ(r0.pod_sets_size(), 1);
  EXPECT_EQ(r0.pod_sets(0).count(), 2);
  EXPECT_EQ(r0.pod_sets(0).gpus(), 8);
  EXPECT_EQ(r0.pod_sets(0).topology().level(), "rack");
  EXPECT_EQ(r0.submit_time(), done.submit_time());
  ASSERT_TRUE(r0.has_first_admit_time() && r0.has_finish_time());
  EXPECT_EQ(RunTime(r0), Between(r0.first_admit_time(), r0.finish_time()));
  EXPECT_GE(RunTime(r0), absl::Milliseconds(200));
  EXPECT_EQ(r0.attempts(), 1);
  EXPECT_EQ(r0.preemptions(), 0);

  const v1::HistoryRecord& r1 = records[1];
  EXPECT_EQ(r1.state(), v1::GANG_STATE_PENDING);
  EXPECT_EQ(r1.priority(), 0);
  EXPECT_EQ(r1.attempts(), 1);
  EXPECT_EQ(r1.preemptions(), 1);
  EXPECT_TRUE(r1.has_first_admit_time());
  EXPECT_FALSE(r1.has_finish_time());
  EXPECT_GE(RunTime(r1), absl::Milliseconds(100));
  EXPECT_EQ(r1.estimated_runtime().seconds(), 3600);
  EXPECT_TRUE(r1.labels().empty());  // not asked for

  const v1::HistoryRecord& r2 = records[2];
  EXPECT_EQ(r2.state(), v1::GANG_STATE_ADMITTED);
  EXPECT_EQ(r2.priority(), 10);
  EXPECT_GT(RunTime(r2), absl::ZeroDuration());

  const v1::HistoryRecord& r3 = records[3];
  EXPECT_EQ(r3.state(), v1::GANG_STATE_CANCELLED);
  EXPECT_FALSE(r3.has_first_admit_time());
  EXPECT_TRUE(r3.has_finish_time());
  EXPECT_EQ(RunTime(r3), absl::ZeroDuration());
  EXPECT_EQ(r3.attempts(), 0);

  // A running gang's run time is measured to the page's read time.
  v1::ExportHistoryResponse one;
  request.set_page_size(0);
  ASSERT_TRUE(Export(request, &one).ok());
  ASSERT_EQ(one.records_size(), 4);
  EXPECT_EQ(RunTime(one.records(2)),
            Between(one.records(2).first_admit_time(), one.read_time()));
  EXPECT_TRUE(one.next_page_token().empty());

  // Labels and the message only when asked.
  request.set_include_labels(true);
  ASSERT_TRUE(Export(request, &one).ok());
  EXPECT_EQ(one.records(1).labels().at("team"), "vision");

  // `since`: only gangs submitted at or after it.
  v1::ExportHistoryRequest since;
  *since.mutable_since() = high.submit_time();
  since.set_page_size(1);
  const std::vector<v1::HistoryRecord> later = ExportAll(since);
  ASSERT_EQ(later.size(), 2u);
  EXPECT_EQ(later[0].gang_id(), high.id());
  EXPECT_EQ(later[1].gang_id(), never.id());
}

TEST_F(HistoryExportTest, BadRequestsNameTheirField) {
  SubmitOk(*scheduler_, SubmitRequest("a", 1, 8));
  SubmitOk(*scheduler_, SubmitRequest("a", 1, 8));
  v1::ExportHistoryRequest request;
  v1::ExportHistoryResponse response;
  request.set_page_size(10001);
  grpc::Status status = Export(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("page_size"));

  request.set_page_size(0);
  request.set_page_token("not-a-token");
  status = Export(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("page_token"));

  // A token is good only with the `since` it was made with.
  request.clear_page_token();
  request.set_page_size(1);
  ASSERT_TRUE(Export(request, &response).ok());
  ASSERT_FALSE(response.next_page_token().empty());
  request.set_page_token(response.next_page_token());
  request.mutable_since()->set_seconds(1);
  status = Export(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("page_token"));

  request.clear_page_token();
  request.mutable_since()->set_nanos(-1);
  status = Export(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("since"));
}

}  // namespace
}  // namespace phalanx::testing
