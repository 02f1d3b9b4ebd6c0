#include "proto/auth_config.h"

#include <string>

#include "gtest/gtest.h"

namespace phalanx::auth {
namespace {

const std::string kHash(64, 'a');

std::string OnePrincipal(const std::string& fields) {
  return "{\"principals\": [{" + fields + "}]}";
}

TEST(AuthConfigTest, ParsesEveryField) {
  auto policy = ParseAuthConfigJson(
      "{\"principals\": ["
      "{\"name\": \"ops\", \"tokenSha256\": \"" +
      kHash +
      "\","
      " \"roles\": [\"ROLE_ADMIN\"]},"
      "{\"name\": \"team-a\", \"tlsSubject\": \"team-a.example\","
      " \"roles\": [\"ROLE_TENANT\", \"ROLE_VIEWER\"], \"queues\": [\"b\", "
      "\"a\"],"
      " \"expiresAt\": \"2030-01-01T00:00:00Z\", \"requestsPerSecond\": 5,"
      " \"requestBurst\": 10, \"watchStreams\": 2}]}");
  ASSERT_TRUE(policy.ok()) << policy.status();
  ASSERT_EQ(policy->principals.size(), 2u);
  const Principal& ops = policy->principals[0];
  EXPECT_EQ(ops.name, "ops");
  ASSERT_TRUE(ops.token_sha256.has_value());
  EXPECT_EQ((*ops.token_sha256)[0], 0xaa);
  EXPECT_TRUE(ops.Has(kAdmin));
  EXPECT_FALSE(ops.Has(kTenant));
  const Principal& team = policy->principals[1];
  EXPECT_EQ(team.tls_subject, "team-a.example");
  EXPECT_EQ(team.roles, kTenant | kViewer);
  EXPECT_EQ(team.queues, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(team.expires_at, absl::FromUnixSeconds(1893456000));
  EXPECT_EQ(team.requests_per_second, 5.0);
  EXPECT_EQ(team.request_burst, 10);
  EXPECT_EQ(team.watch_streams, 2);
}

struct BadCase {
  const char* name;
  std::string json;
  std::string error;
};

TEST(AuthConfigTest, RefusesBadPrincipalsNamingTheField) {
  const std::string admin = "\"roles\": [\"ROLE_ADMIN\"]";
  const std::string token = "\"tokenSha256\": \"" + kHash + "\"";
  const BadCase cases[] = {
      {"not json", "{", "not an AuthConfig"},
      {"unknown field", OnePrincipal("\"nme\": \"x\""), "not an AuthConfig"},
      {"no name", OnePrincipal(token + ", " + admin),
       "principals[0].name: must not be empty"},
      {"control char in name",
       OnePrincipal("\"name\": \"a\\u001b\", " + token + ", " + admin),
       "principals[0].name: \"a\\x1b\" must be printable ASCII"},
      {"long name",
       OnePrincipal("\"name\": \"" + std::string(129, 'n') + "\", " + token +
                    ", " + admin),
       "principals[0].name: must be at most 128 bytes"},
      {"upper-case hash",
       OnePrincipal("\"name\": \"x\", \"tokenSha256\": \"" +
                    std::string(64, 'A') + "\", " + admin),
       "principals[0].token_sha256: must be 64 lower-case hex digits"},
      {"short hash",
       OnePrincipal("\"name\": \"x\", \"tokenSha256\": \"abc\", " + admin),
       "principals[0].token_sha256: must be 64"},
      {"no credential", OnePrincipal("\"name\": \"x\", " + admin),
       "principals[0]: needs token_sha256 or tls_subject"},
      {"no role", OnePrincipal("\"name\": \"x\", " + token),
       "principals[0].roles: must name at least one role"},
      {"unspecified role",
       OnePrincipal("\"name\": \"x\", " + token +
                    ", \"roles\": [\"ROLE_UNSPECIFIED\"]"),
       "principals[0].roles[0]: unknown role 0"},
      {"tenant without queues",
       OnePrincipal("\"name\": \"x\", " + token +
                    ", \"roles\": [\"ROLE_TENANT\"]"),
       "principals[0].queues: ROLE_TENANT needs at least one queue"},
      {"bad queue name",
       OnePrincipal("\"name\": \"x\", " + token +
                    ", \"roles\": [\"ROLE_TENANT\"], \"queues\": [\"a b\"]"),
       "principals[0].queues[0]"},
      {"zero rate",
       OnePrincipal("\"name\": \"x\", " + token + ", " + admin +
                    ", \"requestsPerSecond\": 0"),
       "principals[0].requests_per_second: must be in (0, 1e9]"},
      {"duplicate name",
       "{\"principals\": [{\"name\": \"x\", " + token + ", " + admin +
           "}, {\"name\": \"x\", \"tlsSubject\": \"s\", " + admin + "}]}",
       "principals[1].name: duplicate principal name"},
      {"duplicate token",
       "{\"principals\": [{\"name\": \"x\", " + token + ", " + admin +
           "}, {\"name\": \"y\", " + token + ", " + admin + "}]}",
       "principals[1].token_sha256: another principal has this token"},
  };
  for (const BadCase& c : cases) {
    auto policy = ParseAuthConfigJson(c.json);
    ASSERT_FALSE(policy.ok()) << c.name;
    EXPECT_EQ(policy.status().code(), absl::StatusCode::kInvalidArgument)
        << c.name;
    EXPECT_NE(policy.status().message().find(c.error), std::string::npos)
        << c.name << ": " << policy.status();
  }
}

TEST(AuthConfigTest, AnEmptyFileHasNoPrincipals) {
  auto policy = ParseAuthConfigJson("{}");
  ASSERT_TRUE(policy.ok());
  EXPECT_TRUE(policy->principals.empty());
}

}  // namespace
}  // namespace phalanx::auth
