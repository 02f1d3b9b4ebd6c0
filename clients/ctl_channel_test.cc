// The connection of phalanxctl as a server sees it: a real gRPC server on a
// loopback port, in this process, records the metadata and the TLS peer of
// each call that RunCommand makes (tests/ctl_test.cc runs it against a
// daemon with --auth).
#include "clients/ctl_channel.h"

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clients/ctl_args.h"
#include "clients/ctl_commands.h"
#include "clients/ctl_format.h"
#include "clients/ctl_test_support.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "phalanx/v1/fleet.grpc.pb.h"

namespace phalanx::ctl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Pair;

constexpr char kToken[] = "tok-3f9a.Secret_value";

// What the server saw of one call.
struct SeenCall {
  std::vector<std::string> authorization;  // every "authorization" value
  std::string peer_common_name;            // of the client certificate
};

// Answers ListNodes with `reply` (or `status`) and records each call.
class RecordingFleet final : public v1::Fleet::Service {
 public:
  grpc::Status ListNodes(grpc::ServerContext* context,
                         const v1::ListNodesRequest* /*request*/,
                         v1::ListNodesResponse* response) override {
    SeenCall seen;
    auto [begin, end] = context->client_metadata().equal_range("authorization");
    for (auto it = begin; it != end; ++it) {
      seen.authorization.emplace_back(it->second.data(), it->second.size());
    }
    for (const grpc::string_ref& name :
         context->auth_context()->FindPropertyValues("x509_common_name")) {
      seen.peer_common_name.assign(name.data(), name.size());
    }
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(std::move(seen));
    *response = reply_;
    return status_;
  }

  void SetReply(v1::ListNodesResponse reply) {
    std::lock_guard<std::mutex> lock(mu_);
    reply_ = std::move(reply);
  }
  void SetStatus(grpc::Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = std::move(status);
  }
  std::vector<SeenCall> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  v1::ListNodesResponse reply_;
  grpc::Status status_;
  std::vector<SeenCall> calls_;
};

// A server for the channel's tests: plain text unless given credentials.
class TestServer : public LoopbackServer<RecordingFleet> {
 public:
  explicit TestServer(std::shared_ptr<grpc::ServerCredentials> credentials =
                          grpc::InsecureServerCredentials())
      : LoopbackServer(std::move(credentials)) {}
  RecordingFleet& fleet() { return service(); }
};

// A temporary directory, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "/ctl_channel_XXXXXX";
    path_ = mkdtemp(pattern.data()) == nullptr ? "" : pattern;
  }
  ~TempDir() {
    std::error_code error;
    std::filesystem::remove_all(path_, error);
  }
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string file = absl::StrCat(path_, "/", name);
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }

 private:
  std::string path_;
};

std::string ReadAll(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(CallMetadataTest, BearerTokenOrNothing) {
  EXPECT_THAT(CallMetadata("abc"),
              ElementsAre(Pair("authorization", "Bearer abc")));
  EXPECT_THAT(CallMetadata(""), IsEmpty());
}

TEST(ReadTokenFileTest, DropsOneTrailingNewline) {
  TempDir dir;
  EXPECT_EQ(*ReadTokenFile(dir.Write("a", "tok\n")), "tok");
  EXPECT_EQ(*ReadTokenFile(dir.Write("b", "tok\r\n")), "tok");
  EXPECT_EQ(*ReadTokenFile(dir.Write("c", "tok")), "tok");
}

TEST(ReadTokenFileTest, FailsWithoutQuotingTheFile) {
  TempDir dir;
  for (const std::string& text :
       {std::string(""), std::string("\n"), absl::StrCat(kToken, "\n\n"),
        absl::StrCat(kToken, " x"), absl::StrCat("\x1b[2J", kToken)}) {
    absl::StatusOr<std::string> token = ReadTokenFile(dir.Write("t", text));
    ASSERT_FALSE(token.ok()) << text;
    EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(token.status().message()),
                HasSubstr("--token-file"));
    EXPECT_THAT(std::string(token.status().message()), Not(HasSubstr(kToken)));
  }
  EXPECT_THAT(
      std::string(ReadTokenFile(dir.path() + "/missing").status().message()),
      HasSubstr("cannot read"));
  EXPECT_THAT(std::string(ReadTokenFile("/dev/zero").status().message()),
              HasSubstr("larger than 65536 bytes"));
}

TEST(ConnectionTest, UnreadableFilesAreUsageErrors) {
  ConnectionOptions options;
  options.tls_ca_file = "/nonexistent/ca.pem";
  absl::StatusOr<Connection> connection = Connection::Open(options);
  ASSERT_FALSE(connection.ok());
  EXPECT_THAT(std::string(connection.status().message()),
              HasSubstr("--tls-ca: cannot read /nonexistent/ca.pem"));

  CtlRun run = RunCtl({"nodes", "list", "--token-file", "/nonexistent/t"});
  EXPECT_EQ(run.exit_code, kExitUsage);
  EXPECT_THAT(run.err, HasSubstr("--token-file: cannot read /nonexistent/t"));
}

TEST(ConnectionTest, TheTokenFromTheFlagIsSentAsBearer) {
  TestServer server;
  CtlRun run = RunCtl(
      {"--server", server.address(), "--token", kToken, "nodes", "list"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  ASSERT_EQ(server.fleet().calls().size(), 1u);
  EXPECT_THAT(server.fleet().calls()[0].authorization,
              ElementsAre(absl::StrCat("Bearer ", kToken)));
}

TEST(ConnectionTest, TheTokenFromTheEnvironmentIsSent) {
  TestServer server;
  CtlRun run =
      RunCtl({"--server", server.address(), "nodes", "list"}, {"", "from-env"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  ASSERT_EQ(server.fleet().calls().size(), 1u);
  EXPECT_THAT(server.fleet().calls()[0].authorization,
              ElementsAre("Bearer from-env"));
}

TEST(ConnectionTest, TheFlagWinsOverTheEnvironment) {
  TestServer server;
  CtlRun run = RunCtl(
      {"--server", server.address(), "--token", "from-flag", "nodes", "list"},
      {"", "from-env"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  ASSERT_EQ(server.fleet().calls().size(), 1u);
  EXPECT_THAT(server.fleet().calls()[0].authorization,
              ElementsAre("Bearer from-flag"));
}

TEST(ConnectionTest, TheTokenFileIsReadAndItsNewlineDropped) {
  TestServer server;
  TempDir dir;
  const std::string file = dir.Write("token", absl::StrCat(kToken, "\n"));
  CtlRun run = RunCtl(
      {"--server", server.address(), "--token-file", file, "nodes", "list"},
      {"", "from-env"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  ASSERT_EQ(server.fleet().calls().size(), 1u);
  EXPECT_THAT(server.fleet().calls()[0].authorization,
              ElementsAre(absl::StrCat("Bearer ", kToken)));
}

TEST(ConnectionTest, NoTokenNoAuthorization) {
  TestServer server;
  CtlRun run = RunCtl({"--server", server.address(), "nodes", "list"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  ASSERT_EQ(server.fleet().calls().size(), 1u);
  EXPECT_THAT(server.fleet().calls()[0].authorization, IsEmpty());
}

TEST(ConnectionTest, TheTokenIsNeverPrinted) {
  TestServer server;
  server.fleet().SetStatus(
      grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "bad token"));
  CtlRun refused = RunCtl({"--server", server.address(), "--token", kToken,
                           "-o", "json", "nodes", "list"});
  EXPECT_EQ(refused.exit_code, kExitRpcError);
  EXPECT_THAT(refused.err, HasSubstr("UNAUTHENTICATED: bad token"));
  server.fleet().SetStatus(grpc::Status::OK);
  CtlRun ok = RunCtl(
      {"--server", server.address(), "--token", kToken, "nodes", "list"});
  CtlRun down = RunCtl({"--server", "127.0.0.1:1", "--token", kToken,
                        "--timeout", "2", "nodes", "list"});
  EXPECT_EQ(down.exit_code, kExitUnavailable);
  for (const CtlRun& run : {refused, ok, down}) {
    EXPECT_THAT(run.out + run.err, Not(HasSubstr(kToken)));
  }
}

TEST(ConnectionTest, RepliesOverTheLimitAreRefused) {
  TestServer server;
  v1::ListNodesResponse reply;
  v1::Node* node = reply.add_nodes();
  node->set_id("n-1");
  (*node->mutable_labels())["big"] = std::string(5000, 'x');
  server.fleet().SetReply(reply);
  CtlRun small = RunCtl({"--server", server.address(), "--max-message-bytes",
                         "1024", "nodes", "list"});
  EXPECT_EQ(small.exit_code, kExitRpcError);
  EXPECT_THAT(small.err, HasSubstr("RESOURCE_EXHAUSTED"));
  EXPECT_THAT(small.err, HasSubstr("(raise --max-message-bytes)"));

  CtlRun fits = RunCtl({"--server", server.address(), "nodes", "list"});
  EXPECT_EQ(fits.exit_code, 0) << fits.err;

  (*node->mutable_labels())["big"] = std::string(kDefaultMaxMessageBytes, 'x');
  server.fleet().SetReply(reply);
  CtlRun over = RunCtl({"--server", server.address(), "nodes", "list"});
  EXPECT_EQ(over.exit_code, kExitRpcError) << "the default is 4 MiB";
  EXPECT_THAT(over.err, HasSubstr("RESOURCE_EXHAUSTED"));
}

// Test certificates made with openssl: a CA, a server certificate for
// "phalanx.test" and a client certificate for "operator-1".
class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const std::string d = dir_->path();
    dir_->Write("server.ext",
                "subjectAltName=DNS:phalanx.test\n"
                "extendedKeyUsage=serverAuth\n");
    dir_->Write("client.ext", "extendedKeyUsage=clientAuth\n");
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1";
    const std::string script = absl::StrCat(
        "cd ", d, " && openssl req -x509 ", key,
        " -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=phalanx-test-ca"
        " && openssl req ",
        key,
        " -nodes -keyout server.key -out server.csr -subj /CN=phalanx.test"
        " && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key"
        " -CAcreateserial -out server.pem -days 2 -extfile server.ext"
        " && openssl req ",
        key,
        " -nodes -keyout client.key -out client.csr -subj /CN=operator-1"
        " && openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key"
        " -CAcreateserial -out client.pem -days 2 -extfile client.ext"
        " && openssl req -x509 ",
        key,
        " -nodes -keyout other.key -out other.pem -days 2 -subj /CN=other-ca"
        " > openssl.log 2>&1");
    made_ = std::system(script.c_str()) == 0;
  }
  static void TearDownTestSuite() { delete dir_; }

  void SetUp() override {
    ASSERT_TRUE(made_) << "openssl failed; see " << dir_->path()
                       << "/openssl.log";
  }

  static std::string File(const std::string& name) {
    return absl::StrCat(dir_->path(), "/", name);
  }

  // Server credentials; `require_client` asks for and verifies a client
  // certificate signed by the CA.
  static std::shared_ptr<grpc::ServerCredentials> ServerCredentials(
      bool require_client) {
    grpc::SslServerCredentialsOptions options(
        require_client
            ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
            : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    options.pem_root_certs = ReadAll(File("ca.pem"));
    options.pem_key_cert_pairs.push_back(
        {ReadAll(File("server.key")), ReadAll(File("server.pem"))});
    return grpc::SslServerCredentials(options);
  }

  static TempDir* dir_;
  static bool made_;
};

TempDir* TlsTest::dir_ = nullptr;
bool TlsTest::made_ = false;

TEST_F(TlsTest, VerifiesTheServerAndSendsTheToken) {
  TestServer server(ServerCredentials(/*require_client=*/false));
  CtlRun run = RunCtl({"--server", server.address(), "--tls-ca", File("ca.pem"),
                       "--tls-server-name", "phalanx.test", "--token", kToken,
                       "nodes", "list"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  ASSERT_EQ(server.fleet().calls().size(), 1u);
  EXPECT_THAT(server.fleet().calls()[0].authorization,
              ElementsAre(absl::StrCat("Bearer ", kToken)));
}

TEST_F(TlsTest, MutualTlsPresentsTheClientCertificate) {
  TestServer server(ServerCredentials(/*require_client=*/true));
  CtlRun run = RunCtl({"--server", server.address(), "--tls-ca", File("ca.pem"),
                       "--tls-server-name", "phalanx.test", "--tls-cert",
                       File("client.pem"), "--tls-key", File("client.key"),
                       "nodes", "list"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  ASSERT_EQ(server.fleet().calls().size(), 1u);
  EXPECT_EQ(server.fleet().calls()[0].peer_common_name, "operator-1");

  CtlRun no_cert = RunCtl({"--server", server.address(), "--tls-ca",
                           File("ca.pem"), "--tls-server-name", "phalanx.test",
                           "--timeout", "2", "nodes", "list"});
  EXPECT_EQ(no_cert.exit_code, kExitUnavailable) << no_cert.err;
  EXPECT_EQ(server.fleet().calls().size(), 1u);
}

TEST_F(TlsTest, RefusesAServerItCannotVerify) {
  TestServer server(ServerCredentials(/*require_client=*/false));
  // Other roots, the wrong name, or plain text to a TLS port: no call
  // reaches the service, so the token is never sent.
  const std::vector<std::vector<std::string>> lines = {
      {"--tls-ca", File("other.pem"), "--tls-server-name", "phalanx.test"},
      {"--tls-ca", File("ca.pem"), "--tls-server-name", "wrong.test"},
      {"--tls-ca", File("ca.pem")},  // checks "127.0.0.1"
      {},
  };
  for (std::vector<std::string> argv : lines) {
    argv.insert(argv.end(), {"--server", server.address(), "--token", kToken,
                             "--timeout", "2", "nodes", "list"});
    CtlRun run = RunCtl(argv);
    EXPECT_EQ(run.exit_code, kExitUnavailable) << run.err;
    EXPECT_THAT(run.out + run.err, Not(HasSubstr(kToken)));
  }
  EXPECT_THAT(server.fleet().calls(), IsEmpty());
}

// An HA follower as phalanxctl sees it: refuses ListNodes with UNAVAILABLE
// and `phalanx-leader: ADDRESS`.
class RedirectingFleet final : public v1::Fleet::Service {
 public:
  grpc::Status ListNodes(grpc::ServerContext* context,
                         const v1::ListNodesRequest* /*request*/,
                         v1::ListNodesResponse* /*response*/) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
    context->AddTrailingMetadata("phalanx-leader", leader_);
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "this replica follows");
  }
  void SetLeader(std::string leader) {
    std::lock_guard<std::mutex> lock(mu_);
    leader_ = std::move(leader);
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::string leader_;
  int calls_ = 0;
};

// A follower on a plain-text loopback port.
class FollowerServer : public LoopbackServer<RedirectingFleet> {
 public:
  FollowerServer() : LoopbackServer(grpc::InsecureServerCredentials()) {}
};

grpc::Status ListNodesVia(const Connection& connection,
                          v1::ListNodesResponse* response) {
  return CallFollowingLeader<v1::Fleet::Stub>(
      connection,
      [](grpc::ClientContext* context) {
        context->set_deadline(std::chrono::system_clock::now() +
                              std::chrono::seconds(10));
      },
      &v1::Fleet::Stub::ListNodes, v1::ListNodesRequest(), response);
}

TEST(LeaderHintTest, AFollowersHintIsFollowedAndKept) {
  TestServer leader;
  v1::ListNodesResponse reply;
  reply.add_nodes()->set_id("n-1");
  leader.fleet().SetReply(reply);
  FollowerServer follower;
  follower.service().SetLeader(leader.address());
  ConnectionOptions options;
  options.server = follower.address();
  absl::StatusOr<Connection> connection = Connection::Open(options);
  ASSERT_TRUE(connection.ok()) << connection.status();
  v1::ListNodesResponse response;
  ASSERT_TRUE(ListNodesVia(*connection, &response).ok());
  EXPECT_EQ(response.nodes(0).id(), "n-1");
  EXPECT_EQ(follower.service().calls(), 1);
  EXPECT_EQ(leader.fleet().calls().size(), 1u);
  // The leader is used from now on, and was added to the endpoints.
  ASSERT_TRUE(ListNodesVia(*connection, &response).ok());
  EXPECT_EQ(follower.service().calls(), 1);
  EXPECT_EQ(connection->endpoints(), 2u);
}

TEST(LeaderHintTest, HopsAreBoundedAndAHintToItselfIsNotFollowed) {
  FollowerServer a, b;
  a.service().SetLeader(b.address());
  b.service().SetLeader(a.address());  // stale hints pointing at each other
  ConnectionOptions options;
  options.server = a.address();
  absl::StatusOr<Connection> connection = Connection::Open(options);
  ASSERT_TRUE(connection.ok());
  v1::ListNodesResponse response;
  EXPECT_EQ(ListNodesVia(*connection, &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(a.service().calls() + b.service().calls(), kMaxHops + 1);

  FollowerServer self;
  self.service().SetLeader(self.address());
  options.server = self.address();
  connection = Connection::Open(options);
  ASSERT_TRUE(connection.ok());
  EXPECT_EQ(ListNodesVia(*connection, &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(self.service().calls(), 1);
}

TEST(LeaderHintTest, AnUnreachableEndpointIsSkippedForCallsSafeToResend) {
  TestServer alive;
  std::string dead_address;
  {
    TestServer dead;
    dead_address = dead.address();
  }
  ConnectionOptions options;
  options.server = absl::StrCat(dead_address, ",", alive.address());
  absl::StatusOr<Connection> connection = Connection::Open(options);
  ASSERT_TRUE(connection.ok());
  v1::ListNodesResponse response;
  EXPECT_TRUE(ListNodesVia(*connection, &response).ok());  // a read
  EXPECT_EQ(alive.fleet().calls().size(), 1u);
  // A submit without a request id is not resent after a plain UNAVAILABLE.
  v1::SubmitGangRequest submit;
  EXPECT_FALSE(SafeToResend(submit));
  submit.mutable_spec()->set_request_id("r-1");
  EXPECT_TRUE(SafeToResend(submit));
  v1::ReportGangRequest ack;
  ack.set_preemption_acknowledged(true);
  EXPECT_FALSE(SafeToResend(ack));
}

}  // namespace
}  // namespace phalanx::ctl
