// TLS, mutual TLS, certificate rotation and SIGHUP reload of principals,
// against the real daemon on loopback with certificates made by openssl.
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/auth_client.h"
#include "tests/daemon.h"

namespace phalanx::testing {
namespace {

constexpr char kAdmin[] = "admin-token-abcdefgh";

grpc::StatusCode ListGangs(const std::shared_ptr<grpc::Channel>& channel,
                           const std::string& token) {
  auto stub = v1::Scheduler::NewStub(channel);
  auto context = WithToken(token);
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(5));
  v1::ListGangsResponse response;
  return stub->ListGangs(context.get(), v1::ListGangsRequest(), &response)
      .error_code();
}

// The next event that is not a bookmark; false when the stream ends.
bool ReadEvent(grpc::ClientReader<v1::GangEvent>& reader,
               v1::GangEvent* event) {
  while (reader.Read(event)) {
    if (event->type() != v1::EVENT_TYPE_BOOKMARK) return true;
  }
  return false;
}

grpc::StatusCode SubmitTo(const std::shared_ptr<grpc::Channel>& channel,
                          const std::string& token, const std::string& queue) {
  auto stub = v1::Scheduler::NewStub(channel);
  auto context = WithToken(token);
  v1::SubmitGangResponse response;
  return stub->SubmitGang(context.get(), SubmitRequest(queue, 1, 1), &response)
      .error_code();
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = StartDemoDaemon();
    pki_ = std::make_unique<TestPki>(
        std::filesystem::path(daemon_->data_dir()).parent_path().string());
    pki_->MakeCa("ca");
    pki_->MakeCa("other-ca");
    pki_->MakeCert("server", "localhost", "ca");
  }

  void StartWith(const std::vector<std::string>& args,
                 const std::string& auth_json) {
    daemon_->AddArgs({"--tls-cert=" + pki_->Path("server.crt"),
                      "--tls-key=" + pki_->Path("server.key"),
                      "--auth=" + daemon_->WriteFile("auth.json", auth_json)});
    daemon_->AddArgs(args);
    ASSERT_TRUE(daemon_->Start()) << daemon_->output();
  }

  std::shared_ptr<grpc::Channel> Channel(const std::string& ca,
                                         const std::string& cert = "") {
    return TlsChannel(daemon_->address(), pki_->Read(ca + ".crt"),
                      cert.empty() ? "" : pki_->Read(cert + ".crt"),
                      cert.empty() ? "" : pki_->Read(cert + ".key"));
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<TestPki> pki_;
};

TEST_F(TlsTest, ServesTlsWithTokens) {
  StartWith({}, AuthJson({PrincipalJson("ops", kAdmin, {"ROLE_ADMIN"})}));
  EXPECT_EQ(ListGangs(Channel("ca"), kAdmin), grpc::StatusCode::OK);
  EXPECT_EQ(ListGangs(Channel("ca"), ""), grpc::StatusCode::UNAUTHENTICATED);
  // A server certificate from a CA the client does not trust, and plain
  // text against the TLS port, never reach a handler.
  EXPECT_EQ(ListGangs(Channel("other-ca"), kAdmin),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ListGangs(daemon_->channel(), kAdmin),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, MutualTlsAuthenticatesByCertificateSubject) {
  pki_->MakeCert("tenant", "tenant-cert", "ca");
  pki_->MakeCert("stranger", "nobody", "ca");
  pki_->MakeCert("foreign", "tenant-cert", "other-ca");
  pki_->MakeCert("expired", "tenant-cert", "ca", -1);
  StartWith({"--tls-client-ca=" + pki_->Path("ca.crt")},
            R"({"principals":[{"name":"team-a","tlsSubject":"tenant-cert",)"
            R"("roles":["ROLE_TENANT"],"queues":["a"]}]})");
  EXPECT_EQ(ListGangs(Channel("ca", "tenant"), ""), grpc::StatusCode::OK);
  EXPECT_EQ(SubmitTo(Channel("ca", "tenant"), "", "a"), grpc::StatusCode::OK);
  EXPECT_EQ(SubmitTo(Channel("ca", "tenant"), "", "b"),
            grpc::StatusCode::PERMISSION_DENIED);
  // A valid certificate of no principal is authenticated TLS but no caller.
  EXPECT_EQ(ListGangs(Channel("ca", "stranger"), ""),
            grpc::StatusCode::UNAUTHENTICATED);
  // No certificate, one from another CA, or an expired one: the handshake
  // fails.
  EXPECT_EQ(ListGangs(Channel("ca"), ""), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ListGangs(Channel("ca", "foreign"), ""),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ListGangs(Channel("ca", "expired"), ""),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, RotatedCertificatesAreServedWithoutDroppingStreams) {
  StartWith({"--tls-reload-interval=1s"},
            AuthJson({PrincipalJson("ops", kAdmin, {"ROLE_ADMIN"})}));
  std::shared_ptr<grpc::Channel> old_channel = Channel("ca");
  auto stub = v1::Scheduler::NewStub(old_channel);
  auto context = WithToken(kAdmin);
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(60));
  auto reader = stub->WatchGangs(context.get(), v1::WatchGangsRequest());
  // A new pair from another CA, moved into place whole.
  pki_->MakeCert("rotated", "localhost", "other-ca");
  std::filesystem::rename(pki_->Path("rotated.key"), pki_->Path("server.key"));
  std::filesystem::rename(pki_->Path("rotated.crt"), pki_->Path("server.crt"));
  bool rotated = false;
  for (int i = 0; i < 100 && !rotated; ++i) {
    rotated = ListGangs(Channel("other-ca"), kAdmin) == grpc::StatusCode::OK;
    if (!rotated) absl::SleepFor(absl::Milliseconds(200));
  }
  ASSERT_TRUE(rotated) << "the rotated certificate was never served";
  EXPECT_EQ(ListGangs(Channel("ca"), kAdmin), grpc::StatusCode::UNAVAILABLE);
  // The stream opened before the rotation still delivers.
  ASSERT_EQ(SubmitTo(Channel("other-ca"), kAdmin, "a"), grpc::StatusCode::OK);
  v1::GangEvent event;
  ASSERT_TRUE(ReadEvent(*reader, &event));
  EXPECT_EQ(event.type(), v1::EVENT_TYPE_SUBMITTED);
  context->TryCancel();
  reader->Finish();
}

TEST(AuthReloadTest, SighupSwapsTokensAndKeepsStreams) {
  auto daemon = StartDemoDaemon();
  const std::string path = daemon->WriteFile(
      "auth.json",
      AuthJson({PrincipalJson("ops", "first-token", {"ROLE_ADMIN"})}));
  daemon->AddArgs({"--auth=" + path});
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  auto stub = daemon->Scheduler();
  auto context = WithToken("first-token");
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(60));
  auto reader = stub->WatchGangs(context.get(), v1::WatchGangsRequest());
  ASSERT_EQ(ListGangs(daemon->channel(), "first-token"), grpc::StatusCode::OK);

  // A file that does not parse keeps the old principals.
  daemon->WriteFile("auth.json", "{not json");
  daemon->Signal(SIGHUP);
  for (int i = 0; i < 50 && !absl::StrContains(daemon->output(),
                                               "keeping the old principals");
       ++i) {
    daemon->ReadOutput();
  }
  EXPECT_TRUE(
      absl::StrContains(daemon->output(), "keeping the old principals"));
  EXPECT_EQ(ListGangs(daemon->channel(), "first-token"), grpc::StatusCode::OK);

  daemon->WriteFile(
      "auth.json",
      AuthJson({PrincipalJson("ops", "second-token", {"ROLE_ADMIN"})}));
  daemon->Signal(SIGHUP);
  bool swapped = false;
  for (int i = 0; i < 50 && !swapped; ++i) {
    swapped =
        ListGangs(daemon->channel(), "second-token") == grpc::StatusCode::OK;
    if (!swapped) absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(swapped);
  EXPECT_EQ(ListGangs(daemon->channel(), "first-token"),
            grpc::StatusCode::UNAUTHENTICATED);
  // The stream authenticated before the reload goes on.
  auto submit = WithToken("second-token");
  v1::SubmitGangResponse response;
  ASSERT_TRUE(
      stub->SubmitGang(submit.get(), SubmitRequest("a", 1, 1), &response).ok());
  v1::GangEvent event;
  ASSERT_TRUE(ReadEvent(*reader, &event));
  EXPECT_EQ(event.gang().id(), response.gang().id());
  context->TryCancel();
  reader->Finish();
}

TEST(ListenRulesTest, BeyondLoopbackNeedsTlsAndAuthOrInsecure) {
  auto plain = StartDemoDaemon({"--listen=0.0.0.0:0"});
  EXPECT_FALSE(plain->Start());
  EXPECT_TRUE(absl::StrContains(plain->output(), "is not loopback"))
      << plain->output();
  auto metrics = StartDemoDaemon({"--metrics-listen=0.0.0.0:0"});
  EXPECT_FALSE(metrics->Start());
  EXPECT_TRUE(absl::StrContains(metrics->output(), "/metrics has no TLS"))
      << metrics->output();
}

TEST(ListenRulesTest, NoAuthIsAnnouncedLoudly) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start());
  EXPECT_TRUE(absl::StrContains(daemon->output(), "WARNING: no --auth"));
}

}  // namespace
}  // namespace phalanx::testing
