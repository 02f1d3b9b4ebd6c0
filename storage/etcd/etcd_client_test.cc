// EtcdClient against a real 3-member etcd cluster on loopback
// (tests/etcd_cluster.h). Skipped only when /usr/bin/etcd is absent.
#include "storage/etcd/etcd_client.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/etcd_cluster.h"
#include "tests/etcd_fixture.h"

namespace phalanx::storage::etcd {
namespace {

using ::phalanx::testing::EtcdCluster;

class EtcdClientTest : public ::phalanx::testing::EtcdClusterTest {
 protected:
  std::unique_ptr<EtcdClient> Client(EtcdClientOptions options = {}) {
    if (options.endpoints.empty()) options.endpoints = cluster_->endpoints();
    auto client = EtcdClient::Connect(std::move(options));
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }
};

epb::PutRequest PutOf(const std::string& key, const std::string& value,
                      int64_t lease = 0) {
  epb::PutRequest put;
  put.set_key(key);
  put.set_value(value);
  put.set_lease(lease);
  return put;
}

epb::RangeRequest RangeOf(const std::string& key,
                          const std::string& range_end = "") {
  epb::RangeRequest range;
  range.set_key(key);
  range.set_range_end(range_end);
  return range;
}

TEST(EtcdClientOptionsTest, RejectsMalformedEndpoints) {
  EXPECT_EQ(EtcdClient::Connect({}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EtcdClientOptions options;
  options.endpoints = {"http://no-port"};
  EXPECT_EQ(EtcdClient::Connect(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EtcdClientOptionsTest, PrefixEndCoversThePrefix) {
  EXPECT_EQ(PrefixEnd("/p/log/"), "/p/log0");
  EXPECT_EQ(PrefixEnd(std::string("a\xff", 2)), "b");
}

TEST_F(EtcdClientTest, PutRangeDelete) {
  auto client = Client();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Put(PutOf("/t/a", "1")).ok());
  ASSERT_TRUE(client->Put(PutOf("/t/b", "2")).ok());
  ASSERT_TRUE(client->Put(PutOf("/u/c", "3")).ok());
  auto range = client->Range(RangeOf("/t/", PrefixEnd("/t/")));
  ASSERT_TRUE(range.ok()) << range.status();
  ASSERT_EQ(range->kvs_size(), 2);
  EXPECT_EQ(range->kvs(0).key(), "/t/a");
  EXPECT_EQ(range->kvs(1).value(), "2");

  epb::DeleteRangeRequest del;
  del.set_key("/t/");
  del.set_range_end(PrefixEnd("/t/"));
  auto deleted = client->DeleteRange(del);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(deleted->deleted(), 2);
  EXPECT_EQ(client->Range(RangeOf("/u/c"))->kvs_size(), 1);
}

TEST_F(EtcdClientTest, TxnTakesTheBranchItsCompareSelects) {
  auto client = Client();
  ASSERT_NE(client, nullptr);
  // "Create if absent" twice: the first succeeds, the second does not.
  epb::TxnRequest txn;
  epb::Compare* absent = txn.add_compare();
  absent->set_key("/t/once");
  absent->set_target(epb::Compare::CREATE);
  absent->set_result(epb::Compare::EQUAL);
  absent->set_create_revision(0);
  *txn.add_success()->mutable_request_put() = PutOf("/t/once", "first");
  *txn.add_failure()->mutable_request_range() = RangeOf("/t/once");
  auto first = client->Txn(txn);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->succeeded());
  *txn.mutable_success(0)->mutable_request_put() = PutOf("/t/once", "second");
  auto second = client->Txn(txn);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->succeeded());
  ASSERT_EQ(second->responses(0).response_range().kvs_size(), 1);
  EXPECT_EQ(second->responses(0).response_range().kvs(0).value(), "first");
}

TEST_F(EtcdClientTest, LeaseKeepsItsKeysUntilRevoked) {
  auto client = Client();
  ASSERT_NE(client, nullptr);
  auto lease = client->LeaseGrant(absl::Seconds(5));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(client->Put(PutOf("/t/leased", "x", *lease)).ok());
  auto ttl = client->LeaseKeepAlive(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status();
  EXPECT_EQ(*ttl, absl::Seconds(5));
  EXPECT_EQ(client->Range(RangeOf("/t/leased"))->kvs_size(), 1);

  ASSERT_TRUE(client->LeaseRevoke(*lease).ok());
  EXPECT_EQ(client->Range(RangeOf("/t/leased"))->kvs_size(), 0);
  EXPECT_EQ(client->LeaseKeepAlive(*lease).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(EtcdClientTest, WatchSeesPutsFromItsStartRevision) {
  auto client = Client();
  ASSERT_NE(client, nullptr);
  auto first = client->Put(PutOf("/w/1", "a"));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(client->Put(PutOf("/w/2", "b")).ok());
  // From the first put's revision: both earlier puts, then a live one.
  auto watch = client->Watch("/w/", PrefixEnd("/w/"),
                             first->header().revision(), absl::Seconds(30));
  ASSERT_TRUE(watch.ok()) << watch.status();
  ASSERT_TRUE(client->Put(PutOf("/w/3", "c")).ok());
  std::vector<std::string> keys;
  for (int reads = 0; reads < 3 && keys.size() < 3; ++reads) {
    auto response = (*watch)->Read();
    ASSERT_TRUE(response.ok()) << response.status();
    for (const auto& event : response->events()) {
      keys.push_back(event.kv().key());
    }
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"/w/1", "/w/2", "/w/3"}));
}

TEST_F(EtcdClientTest, MovesToTheNextEndpointWhenOneDies) {
  auto client = Client();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Put(PutOf("/t/k", "v")).ok());
  const std::string before = client->current_endpoint();
  ASSERT_EQ(before, cluster_->endpoint(0).substr(7));
  cluster_->Kill(0);
  // Member 0 may have been etcd's raft leader: until the others elect one
  // they refuse at once ("no leader"), so the call is retried, bounded.
  absl::StatusOr<epb::RangeResponse> range = client->Range(RangeOf("/t/k"));
  for (int i = 0; i < 150 && !range.ok(); ++i) {  // at most about 15 s
    absl::SleepFor(absl::Milliseconds(100));
    range = client->Range(RangeOf("/t/k"));
  }
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->kvs_size(), 1);
  EXPECT_NE(client->current_endpoint(), before);
  EXPECT_TRUE(client->Put(PutOf("/t/k", "w")).ok());
}

TEST_F(EtcdClientTest, CallsFailWithinTheirDeadlineWithoutQuorum) {
  EtcdClientOptions options;
  options.endpoints = {cluster_->endpoint(2)};
  options.call_timeout = absl::Milliseconds(500);
  auto client = Client(options);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Put(PutOf("/t/k", "v")).ok());
  cluster_->Kill(0);
  cluster_->Kill(1);
  const absl::Status put = client->Put(PutOf("/t/k", "w")).status();
  EXPECT_TRUE(put.code() == absl::StatusCode::kDeadlineExceeded ||
              put.code() == absl::StatusCode::kUnavailable)
      << put;
  // Quorum back: the same client works again.
  ASSERT_TRUE(cluster_->Restart(0)) << cluster_->logs();
  EXPECT_TRUE(client->Put(PutOf("/t/k", "x")).ok());
}

// A member that holds calls without answering (SIGSTOP: its sockets stay
// open, as when a partition drops its packets) costs one attempt's
// deadline; the call is then answered by the next member.
TEST_F(EtcdClientTest, AHungMemberCostsOneAttemptThenTheNextAnswers) {
  const int hung = cluster_->QuietMember();
  ASSERT_GE(hung, 0) << cluster_->logs();
  EtcdClientOptions options;
  options.endpoints = {cluster_->endpoint(hung)};
  for (int m = 0; m < cluster_->size(); ++m) {
    if (m != hung) options.endpoints.push_back(cluster_->endpoint(m));
  }
  options.call_timeout = absl::Milliseconds(500);
  auto client = Client(options);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Put(PutOf("/t/k", "v")).ok());
  cluster_->Pause(hung);
  const absl::Time start = absl::Now();
  const absl::Status put = client->Put(PutOf("/t/k", "w")).status();
  const absl::Duration took = absl::Now() - start;
  cluster_->Resume(hung);
  ASSERT_TRUE(put.ok()) << put;
  EXPECT_NE(client->current_endpoint(), options.endpoints[0].substr(7));
  std::printf("a hung member cost the call %.2f s (attempt deadline 0.5 s)\n",
              absl::ToDoubleSeconds(took));
  // A call's own deadline bounds all its attempts.
  cluster_->Pause(hung);
  EtcdClientOptions one;
  one.endpoints = {cluster_->endpoint(hung)};
  one.call_timeout = absl::Seconds(30);
  auto bounded = Client(one);
  ASSERT_NE(bounded, nullptr);
  const absl::StatusOr<epb::RangeResponse> range =
      bounded->Range(RangeOf("/t/k"), absl::Now() + absl::Milliseconds(300));
  cluster_->Resume(hung);
  EXPECT_EQ(range.status().code(), absl::StatusCode::kDeadlineExceeded)
      << range.status();
}

// With its peers gone, a member has no raft leader: it answers UNAVAILABLE
// at once ("no leader"), long before the attempt's deadline, so a client
// moves on rather than waiting.
TEST_F(EtcdClientTest, AMemberWithoutALeaderRefusesAtOnce) {
  EtcdClientOptions options;
  options.endpoints = {cluster_->endpoint(0)};
  options.call_timeout = absl::Seconds(20);
  auto client = Client(options);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Put(PutOf("/t/k", "v")).ok());
  cluster_->Pause(1);
  cluster_->Pause(2);
  // A read in flight when the leader goes waits out etcd's own request
  // timeout (about 7 s); the member drops its leader within a few
  // election timeouts (1 s each), and from then on refuses at once.
  absl::Status last;
  for (int i = 0; i < 8; ++i) {
    last = client->Range(RangeOf("/t/k")).status();
    if (absl::StrContains(last.message(), "no leader")) break;
    absl::SleepFor(absl::Milliseconds(500));
  }
  cluster_->Resume(1);
  cluster_->Resume(2);
  EXPECT_EQ(last.code(), absl::StatusCode::kUnavailable) << last;
  EXPECT_TRUE(absl::StrContains(last.message(), "no leader")) << last;
  // Peers back: the member elects a leader and answers again.
  bool answered = false;
  for (int i = 0; i < 100 && !answered; ++i) {
    answered = client->Put(PutOf("/t/k", "w")).ok();
    if (!answered) absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_TRUE(answered) << cluster_->logs();
}

// Turns on etcd's authentication with user root / `password`.
void EnableAuth(const std::string& endpoint, const std::string& password) {
  auto channel = grpc::CreateChannel(endpoint.substr(7),
                                     grpc::InsecureChannelCredentials());
  auto auth = epb::Auth::NewStub(channel);
  auto call = [](auto method) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    return method(&context);
  };
  epb::AuthUserAddRequest user;
  user.set_name("root");
  user.set_password(password);
  epb::AuthUserAddResponse user_response;
  ASSERT_TRUE(call([&](auto* c) {
                return auth->UserAdd(c, user, &user_response);
              }).ok());
  epb::AuthRoleAddRequest role;
  role.set_name("root");
  epb::AuthRoleAddResponse role_response;
  ASSERT_TRUE(call([&](auto* c) {
                return auth->RoleAdd(c, role, &role_response);
              }).ok());
  epb::AuthUserGrantRoleRequest grant;
  grant.set_user("root");
  grant.set_role("root");
  epb::AuthUserGrantRoleResponse grant_response;
  ASSERT_TRUE(call([&](auto* c) {
                return auth->UserGrantRole(c, grant, &grant_response);
              }).ok());
  epb::AuthEnableRequest enable;
  epb::AuthEnableResponse enable_response;
  ASSERT_TRUE(call([&](auto* c) {
                return auth->AuthEnable(c, enable, &enable_response);
              }).ok());
}

TEST_F(EtcdClientTest, AuthenticatesWithUserAndPassword) {
  EnableAuth(cluster_->endpoint(0), "s3cret");
  auto anonymous = Client();
  ASSERT_NE(anonymous, nullptr);
  EXPECT_FALSE(anonymous->Put(PutOf("/t/k", "v")).ok());

  EtcdClientOptions options;
  options.user = "root";
  options.password = "wrong";
  auto wrong = Client(options);
  ASSERT_NE(wrong, nullptr);
  EXPECT_EQ(wrong->Put(PutOf("/t/k", "v")).status().code(),
            absl::StatusCode::kInvalidArgument);

  options.password = "s3cret";
  auto root = Client(options);
  ASSERT_NE(root, nullptr);
  ASSERT_TRUE(root->Put(PutOf("/t/k", "v")).ok());
  EXPECT_EQ(root->Range(RangeOf("/t/k"))->kvs_size(), 1);
}

// A self-signed certificate for 127.0.0.1 (its own CA), made with openssl
// in `dir`; returns false when openssl fails.
bool MakeCertificate(const std::string& dir) {
  const std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=etcd "
      "-addext subjectAltName=IP:127.0.0.1 -keyout " +
      dir + "/etcd.key -out " + dir + "/etcd.crt >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

TEST(EtcdClientTlsTest, SpeaksTlsToAnHttpsCluster) {
  if (!EtcdCluster::Available()) {
    GTEST_SKIP() << EtcdCluster::kEtcdPath << " is absent";
  }
  char pattern[] = "/tmp/phalanx-etcd-tls-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  ASSERT_TRUE(MakeCertificate(dir));
  const std::string cert = dir + "/etcd.crt";
  EtcdCluster cluster(3, {cert, cert, dir + "/etcd.key"});
  ASSERT_TRUE(cluster.Start()) << cluster.logs();
  ASSERT_EQ(cluster.endpoint(0).substr(0, 8), "https://");

  EtcdClientOptions options;
  options.endpoints = cluster.endpoints();
  options.tls_files.ca_file = cert;  // https:// turns TLS on
  auto client = EtcdClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Put(PutOf("/t/k", "v")).ok());
  EXPECT_EQ((*client)->Range(RangeOf("/t/k"))->kvs_size(), 1);

  // Without the CA the server's certificate is not trusted.
  options.tls_files.ca_file.clear();
  options.call_timeout = absl::Seconds(2);
  auto untrusting = EtcdClient::Connect(options);
  ASSERT_TRUE(untrusting.ok()) << untrusting.status();
  EXPECT_FALSE((*untrusting)->Put(PutOf("/t/k", "w")).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace phalanx::storage::etcd
