// The metrics' contract (server/metrics.h): what each entry point exports,
// read back from the real /metrics endpoint over loopback HTTP.
#include "server/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "storage/sync/handoff.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

// The body of GET /metrics on 127.0.0.1:`port` ("" when it cannot be read).
std::string Scrape(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  const timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  std::string response;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address),
              sizeof(address)) == 0) {
    const std::string request = "GET /metrics HTTP/1.0\r\n\r\n";
    if (write(fd, request.data(), request.size()) ==
        static_cast<ssize_t>(request.size())) {
      char buffer[65536];
      // Bounded: the body is far below 1,000 reads.
      for (int i = 0; i < 1000; ++i) {
        const ssize_t n = read(fd, buffer, sizeof(buffer));
        if (n <= 0) break;
        response.append(buffer, static_cast<size_t>(n));
      }
    }
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

// Whether `text` has the sample line `series value`.
bool HasSample(const std::string& text, const std::string& series,
               const std::string& value) {
  return absl::StrContains(text, absl::StrCat("\n", series, " ", value, "\n"));
}

core::GangPtr AdmittedGang(const std::string& queue, absl::Duration wait) {
  auto gang = std::make_shared<core::Gang>();
  gang->spec.queue = core::QueueName(queue);
  gang->submit_time = kT0;
  gang->admit_time = kT0 + wait;
  return gang;
}

TEST(MetricsTest, ServesOnAPickedPortUntilStopped) {
  Metrics metrics("127.0.0.1:0", nullptr);
  const int port = metrics.port();
  ASSERT_GT(port, 0);
  const std::string text = Scrape(port);
  EXPECT_TRUE(absl::StrContains(text, "phalanx_build_info{")) << text;
  // Without HA, this replica always leads.
  EXPECT_TRUE(HasSample(text, "phalanx_leader", "1")) << text;
  // Every event type starts at 0, so rate() sees the first one.
  EXPECT_TRUE(HasSample(text, "phalanx_events_total{type=\"ADMITTED\"}", "0"));
  metrics.StopServing();
  EXPECT_EQ(metrics.port(), 0);
  metrics.StopServing();  // idempotent
  EXPECT_EQ(Scrape(port), "");
}

TEST(MetricsTest, CountsRefusalsAndRateLimitedCalls) {
  Metrics metrics("127.0.0.1:0", nullptr);
  metrics.OnDenied(rpc::kSubmitGang, "role");
  metrics.OnDenied(rpc::kSubmitGang, "rate");
  metrics.OnDenied(rpc::kSubmitGang, "rate");
  const std::string text = Scrape(metrics.port());
  EXPECT_TRUE(HasSample(text,
                        "phalanx_auth_denied_total{method=\"/"
                        "phalanx.v1.Scheduler/SubmitGang\",reason=\"rate\"}",
                        "2"))
      << text;
  EXPECT_TRUE(HasSample(text,
                        "phalanx_auth_denied_total{method=\"/"
                        "phalanx.v1.Scheduler/SubmitGang\",reason=\"role\"}",
                        "1"));
  EXPECT_TRUE(HasSample(text, "phalanx_rate_limited_total", "2"));
}

TEST(MetricsTest, ExportsTheGaugesItIsGiven) {
  Metrics metrics("127.0.0.1:0", nullptr);
  metrics.SetCertificateExpiry(kT0);
  metrics.SetLeader(false, 0);
  metrics.SetReplication(/*applied_seq=*/41, /*lag_entries=*/3);
  std::string text = Scrape(metrics.port());
  EXPECT_TRUE(HasSample(
      text, "phalanx_tls_certificate_expiry_timestamp_seconds", "1800000000"))
      << text;
  EXPECT_TRUE(HasSample(text, "phalanx_leader", "0"));
  EXPECT_TRUE(HasSample(text, "phalanx_leader_term", "0"));
  EXPECT_TRUE(HasSample(text, "phalanx_follower_applied_seq", "41"));
  EXPECT_TRUE(HasSample(text, "phalanx_follower_lag_entries", "3"));
  metrics.SetLeader(true, 7);
  text = Scrape(metrics.port());
  EXPECT_TRUE(HasSample(text, "phalanx_leader", "1"));
  EXPECT_TRUE(HasSample(text, "phalanx_leader_term", "7"));
}

// After each durable batch: its events by type, each admission's wait by
// queue, the WAL fsyncs since the last batch, and (HA leader) the applied
// seq with lag 0.
TEST(MetricsTest, CountsWhatEachDurableBatchCarries) {
  Metrics metrics("127.0.0.1:0", nullptr);
  uint64_t syncs = 5;
  metrics.SetWalSyncs([&syncs] { return syncs; });
  metrics.SetAppliedSeq([] { return int64_t{12}; });
  core::Mutation mutation;
  mutation.events.push_back({1, core::EventType::kSubmitted, kT0, nullptr});
  mutation.events.push_back({2, core::EventType::kAdmitted, kT0,
                             AdmittedGang("a", absl::Seconds(30))});
  metrics.OnDurable(mutation, absl::Milliseconds(2), 2);
  syncs = 7;
  metrics.OnDurable(core::Mutation(), absl::ZeroDuration(), 0);
  const std::string text = Scrape(metrics.port());
  EXPECT_TRUE(HasSample(text, "phalanx_events_total{type=\"SUBMITTED\"}", "1"))
      << text;
  EXPECT_TRUE(HasSample(text, "phalanx_events_total{type=\"ADMITTED\"}", "1"));
  EXPECT_TRUE(HasSample(
      text, "phalanx_admission_wait_seconds_count{queue=\"a\"}", "1"));
  EXPECT_TRUE(
      HasSample(text, "phalanx_admission_wait_seconds_sum{queue=\"a\"}", "30"));
  EXPECT_TRUE(HasSample(text, "phalanx_storage_wal_syncs_total", "7"));
  // Only the batch that carried something is observed.
  EXPECT_TRUE(HasSample(text, "phalanx_storage_batch_commands_count", "1"));
  EXPECT_TRUE(HasSample(text, "phalanx_storage_commit_seconds_count", "1"));
  EXPECT_TRUE(HasSample(text, "phalanx_follower_applied_seq", "12"));
  EXPECT_TRUE(HasSample(text, "phalanx_follower_lag_entries", "0"));
}

// A server whose every call, whatever its method, ends UNIMPLEMENTED.
class Unimplemented : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext*) override {
    class Answer : public grpc::ServerGenericBidiReactor {
     public:
      Answer() {
        Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""));
        // CreateReactor returns this reactor to gRPC, which runs OnDone on
        // another thread (ordered inside libgrpc): storage/sync/handoff.h.
        HandoffRelease(this);
      }
      void OnDone() override {
        HandoffAcquire(this);
        delete this;
      }
    };
    return new Answer();
  }
};

// Calls `method` and returns its status code (DEADLINE_EXCEEDED when no
// answer came within 30 s).
grpc::StatusCode Call(grpc::GenericStub& stub, const std::string& method) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1), response;
  Notification done;
  std::atomic<int> code{static_cast<int>(grpc::StatusCode::DEADLINE_EXCEEDED)};
  // gRPC runs the callback on its own thread after UnaryCall started the
  // call (ordered inside libgrpc): storage/sync/handoff.h.
  HandoffRelease(&done);
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                 [&](grpc::Status status) {
                   HandoffAcquire(&done);
                   code = static_cast<int>(status.error_code());
                   done.Notify();
                 });
  done.WaitForNotificationWithTimeout(absl::Seconds(60));
  return static_cast<grpc::StatusCode>(code.load());
}

TEST(MetricsTest, TheInterceptorTimesEveryCallLabellingUnknownMethods) {
  Metrics metrics("127.0.0.1:0", nullptr);
  Unimplemented service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterCallbackGenericService(&service);
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(metrics.InterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  grpc::GenericStub stub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  EXPECT_EQ(Call(stub, "/phalanx.v1.Scheduler/GetGang"),
            grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(Call(stub, "/phalanx.v1.Scheduler/GetGang"),
            grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(Call(stub, "/attacker.Chosen/Name"),
            grpc::StatusCode::UNIMPLEMENTED);
  server->Shutdown();
  const std::string text = Scrape(metrics.port());
  EXPECT_TRUE(HasSample(text,
                        "phalanx_rpc_seconds_count{code=\"UNIMPLEMENTED\","
                        "method=\"/phalanx.v1.Scheduler/GetGang\"}",
                        "2"))
      << text;
  EXPECT_TRUE(HasSample(
      text,
      "phalanx_rpc_seconds_count{code=\"UNIMPLEMENTED\",method=\"unknown\"}",
      "1"));
  EXPECT_FALSE(absl::StrContains(text, "attacker"));
}

}  // namespace
}  // namespace phalanx::server
