// `watch` as RunCommand runs it, against a real gRPC server in this process
// that implements only one of the two watch RPCs: WatchGangBatches is used
// when the server has it, and WatchGangs when it answers UNIMPLEMENTED (a
// daemon older than WatchGangBatches).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clients/ctl_test_support.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "phalanx/v1/scheduler.grpc.pb.h"

namespace phalanx::ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::GangEvent Event(int64_t revision) {
  v1::GangEvent event;
  event.set_revision(revision);
  event.set_type(v1::EVENT_TYPE_SUBMITTED);
  event.mutable_gang()->set_id(absl::StrCat("g-", revision));
  return event;
}

// Serves revisions 1..3 on the RPC it implements (`batches`: two messages
// of WatchGangBatches; else three of WatchGangs), then ends the stream;
// every other RPC, the other watch RPC too, is UNIMPLEMENTED.
class OneWatchRpc final : public v1::Scheduler::Service {
 public:
  explicit OneWatchRpc(bool batches) : batches_(batches) {}

  grpc::Status WatchGangs(grpc::ServerContext* context,
                          const v1::WatchGangsRequest* request,
                          grpc::ServerWriter<v1::GangEvent>* writer) override {
    if (batches_) {
      return Service::WatchGangs(context, request, writer);
    }
    for (int64_t revision = 1; revision <= 3; ++revision) {
      writer->Write(Event(revision));
    }
    return grpc::Status::OK;
  }

  grpc::Status WatchGangBatches(
      grpc::ServerContext* context, const v1::WatchGangsRequest* request,
      grpc::ServerWriter<v1::GangEventBatch>* writer) override {
    if (!batches_) {
      return Service::WatchGangBatches(context, request, writer);
    }
    v1::GangEventBatch first;
    *first.add_events() = Event(1);
    *first.add_events() = Event(2);
    writer->Write(first);
    v1::GangEventBatch second;
    *second.add_events() = Event(3);
    writer->Write(second);
    return grpc::Status::OK;
  }

 private:
  const bool batches_;
};

class WatchServer : public LoopbackServer<OneWatchRpc> {
 public:
  explicit WatchServer(bool batches)
      : LoopbackServer(grpc::InsecureServerCredentials(), batches) {}
};

TEST(WatchCommandTest, ReadsEveryEventOfEachBatchInOrder) {
  WatchServer server(/*batches=*/true);
  CtlRun run = RunCtl({"--server", server.address(), "watch"});
  ASSERT_EQ(run.exit_code, kExitOk) << run.err;
  const size_t one = run.out.find("g-1");
  const size_t two = run.out.find("g-2");
  const size_t three = run.out.find("g-3");
  ASSERT_NE(one, std::string::npos) << run.out;
  ASSERT_NE(two, std::string::npos) << run.out;
  ASSERT_NE(three, std::string::npos) << run.out;
  EXPECT_LT(one, two);
  EXPECT_LT(two, three);
}

TEST(WatchCommandTest, FallsBackToWatchGangsOnUnimplemented) {
  WatchServer server(/*batches=*/false);
  CtlRun run = RunCtl({"--server", server.address(), "-o", "json", "watch"});
  ASSERT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_THAT(run.out, HasSubstr("\"g-1\""));
  EXPECT_THAT(run.out, HasSubstr("\"g-3\""));
  EXPECT_LT(run.out.find("\"g-1\""), run.out.find("\"g-2\""));
  EXPECT_LT(run.out.find("\"g-2\""), run.out.find("\"g-3\""));
  EXPECT_THAT(run.err, Not(HasSubstr("UNIMPLEMENTED")));
}

}  // namespace
}  // namespace phalanx::ctl
