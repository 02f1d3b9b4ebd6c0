// The server's own limits over real gRPC: per-principal request rate and
// watch streams, byte-bounded watch buffers under stalled streams (RSS of
// the real daemon), and metrics whose labels never come from callers.
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/auth_client.h"
#include "tests/daemon.h"
#include "tests/health_probe.h"

namespace phalanx::testing {
namespace {

constexpr char kAdmin[] = "admin-token-limits";
constexpr char kSlow[] = "slow-token-limits";

// The daemon's resident set in KiB (0 when it cannot be read).
int64_t RssKib(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "VmRSS:")) {
      int64_t kib = 0;
      std::string digits;
      for (char c : line) {
        if (c >= '0' && c <= '9') digits.push_back(c);
      }
      if (absl::SimpleAtoi(digits, &kib)) return kib;
    }
  }
  return 0;
}

std::unique_ptr<DaemonProcess> StartWithAuth(const std::string& extra_config,
                                             const std::string& auth_json) {
  auto daemon = StartDemoDaemon();
  std::string config = DemoConfigJson();
  if (!extra_config.empty())
    config.insert(config.size() - 1, "," + extra_config);
  daemon->AddArgs({"--config=" + daemon->WriteFile("limits.json", config),
                   "--auth=" + daemon->WriteFile("auth.json", auth_json)});
  return daemon;
}

grpc::StatusCode GetConfig(DaemonProcess& daemon, const std::string& token) {
  auto stub = daemon.Admin();
  auto context = WithToken(token);
  v1::Config config;
  return stub->GetConfig(context.get(), v1::GetConfigRequest(), &config)
      .error_code();
}

TEST(ServerLimitsTest, APrincipalOverItsRateIsRefused) {
  auto daemon = StartWithAuth(
      "", AuthJson(
              {PrincipalJson("ops", kAdmin, {"ROLE_ADMIN"}),
               PrincipalJson("slow", kSlow, {"ROLE_VIEWER"}, {},
                             R"("requestsPerSecond":0.01,"requestBurst":3)")}));
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(GetConfig(*daemon, kSlow), grpc::StatusCode::OK) << i;
  }
  EXPECT_EQ(GetConfig(*daemon, kSlow), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Another principal is not slowed down by it.
  EXPECT_EQ(GetConfig(*daemon, kAdmin), grpc::StatusCode::OK);
  const std::string metrics = HttpGet(daemon->metrics_port(), "/metrics");
  EXPECT_TRUE(absl::StrContains(metrics, "phalanx_rate_limited_total 1"))
      << metrics.substr(0, 4000);
  EXPECT_TRUE(absl::StrContains(
      metrics,
      R"(phalanx_auth_denied_total{method="/phalanx.v1.Admin/GetConfig",reason="rate"} 1)"));
}

TEST(ServerLimitsTest, WatchStreamsPerPrincipalAreCapped) {
  auto daemon =
      StartWithAuth("", AuthJson({PrincipalJson("ops", kAdmin, {"ROLE_ADMIN"},
                                                {}, R"("watchStreams":2)")}));
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  auto stub = daemon->Scheduler();
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::GangEvent>>> readers;
  // Opens a stream: OK, or the code it ended with (then it is dropped).
  auto open = [&] {
    contexts.push_back(WithToken(kAdmin));
    v1::WatchGangsRequest request;
    request.set_after_revision(0);
    readers.push_back(stub->WatchGangs(contexts.back().get(), request));
    v1::GangEvent event;
    if (readers.back()->Read(&event)) return grpc::StatusCode::OK;
    const grpc::StatusCode code = readers.back()->Finish().error_code();
    readers.pop_back();
    contexts.pop_back();
    return code;
  };
  EXPECT_EQ(open(), grpc::StatusCode::OK);
  EXPECT_EQ(open(), grpc::StatusCode::OK);
  EXPECT_EQ(open(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Closing one makes room again (once the server has seen it go).
  contexts[0]->TryCancel();
  readers[0]->Finish();
  readers.erase(readers.begin());
  contexts.erase(contexts.begin());
  grpc::StatusCode reopened = grpc::StatusCode::UNKNOWN;
  for (int i = 0; i < 20 && reopened != grpc::StatusCode::OK; ++i) {
    reopened = open();
    if (reopened != grpc::StatusCode::OK) {
      absl::SleepFor(absl::Milliseconds(100));
    }
  }
  EXPECT_EQ(reopened, grpc::StatusCode::OK);
  for (auto& context : contexts) context->TryCancel();
  for (auto& reader : readers) reader->Finish();
}

TEST(ServerLimitsTest, StalledWatchStreamsOverALargeHistoryStayBounded) {
  // 40 gangs of 32 labels of 60 KiB: ~2 MiB per event, ~160 MiB of history.
  auto daemon = StartWithAuth(
      R"("limits":{"maxLabelValueBytes":65536,)"
      R"("watchStreamBufferBytes":"65536","watchTotalBufferBytes":"16777216"})",
      AuthJson({PrincipalJson("ops", kAdmin, {"ROLE_ADMIN"}, {},
                              R"("watchStreams":200)")}));
  daemon->AddArgs({"--max-message-bytes=8388608"});
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  auto stub = daemon->Scheduler();
  for (int i = 0; i < 40; ++i) {
    v1::SubmitGangRequest request = SubmitRequest("a", 1, 1);
    for (int l = 0; l < 32; ++l) {
      (*request.mutable_spec()->mutable_labels())[absl::StrCat("k", l)] =
          std::string(60 << 10, static_cast<char>('a' + l % 26));
    }
    auto context = WithToken(kAdmin);
    v1::SubmitGangResponse response;
    ASSERT_TRUE(stub->SubmitGang(context.get(), request, &response).ok());
  }
  absl::SleepFor(absl::Seconds(1));
  const int64_t before = RssKib(daemon->pid());
  // 100 streams from revision 0 whose client never reads.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(8 << 20);
  auto channel = grpc::CreateCustomChannel(
      daemon->address(), grpc::InsecureChannelCredentials(), args);
  auto stalled = v1::Scheduler::NewStub(channel);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::GangEvent>>> readers;
  for (int i = 0; i < 100; ++i) {
    contexts.push_back(WithToken(kAdmin));
    v1::WatchGangsRequest request;
    request.set_after_revision(0);
    readers.push_back(stalled->WatchGangs(contexts.back().get(), request));
  }
  int64_t peak = before;
  for (int i = 0; i < 30; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    peak = std::max(peak, RssKib(daemon->pid()));
  }
  // The budget is 16 MiB of queued events plus one event a stream in
  // flight; replaying each stream's history into memory would take GiBs.
  EXPECT_LT(peak - before, 400 << 10)
      << "RSS grew from " << before << " KiB to " << peak << " KiB";
  EXPECT_EQ(GetConfig(*daemon, kAdmin), grpc::StatusCode::OK);
  for (auto& context : contexts) context->TryCancel();
  for (auto& reader : readers) reader->Finish();
}

TEST(ServerLimitsTest, UnknownMethodsDoNotGrowTheMetrics) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  for (int i = 0; i < 300; ++i) {
    const UnaryReply reply = UnaryBytesCall(
        daemon->channel(), absl::StrCat("/phalanx.v1.Admin/Made", i), "x",
        absl::Seconds(30));
    EXPECT_EQ(reply.status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  }
  const std::string metrics = HttpGet(daemon->metrics_port(), "/metrics");
  EXPECT_FALSE(absl::StrContains(metrics, "Made"));
  EXPECT_TRUE(absl::StrContains(metrics, R"(method="unknown")"));
  EXPECT_LT(metrics.size(), 200u << 10);
  EXPECT_TRUE(absl::StrContains(metrics, "phalanx_build_info{"));
}

}  // namespace
}  // namespace phalanx::testing
