#include "clients/ctl_contexts.h"

#include <string>
#include <vector>

#include "clients/ctl_args.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::ctl {
namespace {

using ::testing::HasSubstr;

constexpr char kConfig[] = R"({
  "currentContext": "dev",
  "contexts": {
    "dev": {"server": "127.0.0.1:7000"},
    "prod": {"server": "a.internal:50051,b.internal:50051",
             "tokenFile": "~/.phalanx/prod.token",
             "tlsCa": "certs/ca.pem", "tlsCert": "/etc/me.pem",
             "tlsKey": "../me.key", "tlsServerName": "phalanx.internal"}
  }
})";

TEST(ClientConfigPathTest, EnvironmentThenXdgThenHome) {
  EXPECT_EQ(ClientConfigPath("/x/c", "/xdg", "/home/u"), "/x/c");
  EXPECT_EQ(ClientConfigPath("", "/xdg", "/home/u"), "/xdg/phalanx/config");
  EXPECT_EQ(ClientConfigPath("", "", "/home/u"),
            "/home/u/.config/phalanx/config");
  EXPECT_EQ(ClientConfigPath("", "", ""), "");
}

TEST(ParseClientConfigTest, PathsResolveAgainstTheFileAndHome) {
  absl::StatusOr<ClientConfig> config =
      ParseClientConfig(kConfig, "/home/u/.config/phalanx/config", "/home/u");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->current_context, "dev");
  const ClientContext& prod = config->contexts.at("prod");
  EXPECT_EQ(prod.server, "a.internal:50051,b.internal:50051");
  EXPECT_EQ(prod.token_file, "/home/u/.phalanx/prod.token");
  EXPECT_EQ(prod.tls_ca_file, "/home/u/.config/phalanx/certs/ca.pem");
  EXPECT_EQ(prod.tls_cert_file, "/etc/me.pem");
  EXPECT_EQ(prod.tls_key_file, "/home/u/.config/me.key");
  EXPECT_EQ(prod.tls_server_name, "phalanx.internal");
}

TEST(ParseClientConfigTest, ErrorsNameTheFileAndTheField) {
  struct Case {
    const char* name;
    const char* text;
    const char* want;
  };
  const std::vector<Case> cases = {
      {"not json", "{", "/c: not a JSON object"},
      {"an array", "[]", "/c: not a JSON object"},
      {"unknown top key", R"({"context": "a"})", "context: unknown key"},
      {"unknown context key", R"({"contexts": {"a": {"sever": "x"}}})",
       "contexts.a.sever: unknown key"},
      {"not a string", R"({"contexts": {"a": {"tlsCa": 1}}})",
       "contexts.a.tlsCa: want a string"},
      {"a context not an object", R"({"contexts": {"a": "x"}})",
       "contexts.a: want an object"},
      {"a stored token", R"({"contexts": {"a": {"token": "s3cret"}}})",
       "contexts.a.token: a token is never stored in the config"},
      {"a current context that is not there",
       R"({"currentContext": "b", "contexts": {"a": {}}})",
       "currentContext: no context \"b\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<ClientConfig> config = ParseClientConfig(c.text, "/c", "/h");
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(c.want));
    EXPECT_THAT(std::string(config.status().message()),
                ::testing::Not(HasSubstr("s3cret")));
  }
}

TEST(SelectContextTest, NamedCurrentOrNone) {
  absl::StatusOr<ClientConfig> config = ParseClientConfig(kConfig, "/c", "/h");
  ASSERT_TRUE(config.ok());
  absl::StatusOr<const ClientContext*> dev = SelectContext(*config, "");
  ASSERT_TRUE(dev.ok());
  EXPECT_EQ((*dev)->server, "127.0.0.1:7000");
  absl::StatusOr<const ClientContext*> prod = SelectContext(*config, "prod");
  ASSERT_TRUE(prod.ok());
  EXPECT_EQ((*prod)->tls_server_name, "phalanx.internal");
  absl::StatusOr<const ClientContext*> missing =
      SelectContext(*config, "stage");
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("no context \"stage\" in the client config (it has: "
                        "dev, prod)"));
  ClientConfig no_current = *config;
  no_current.current_context.clear();
  absl::StatusOr<const ClientContext*> none = SelectContext(no_current, "");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
}

// ParseCommandLine with the client config kConfig at /c.
Invocation ParseWithConfig(const std::vector<std::string>& argv,
                           const Environment& env = {}) {
  return ParseCommandLine(argv, env, ConfigFile{"/c", kConfig, "/h"});
}

TEST(ContextFlagTest, TheContextFillsWhatNoFlagOrVariableSet) {
  const Invocation current = ParseWithConfig({"list"});
  ASSERT_TRUE(current.error.ok()) << current.error;
  EXPECT_EQ(current.global.connection.server, "127.0.0.1:7000");

  const Invocation prod = ParseWithConfig({"--context", "prod", "list"});
  ASSERT_TRUE(prod.error.ok()) << prod.error;
  const ConnectionOptions& c = prod.global.connection;
  EXPECT_EQ(c.server, "a.internal:50051,b.internal:50051");
  EXPECT_EQ(c.token_file, "/h/.phalanx/prod.token");
  EXPECT_EQ(c.tls_ca_file, "/certs/ca.pem");
  EXPECT_EQ(c.tls_server_name, "phalanx.internal");

  const Invocation flags =
      ParseWithConfig({"--context", "prod", "--server", "127.0.0.1:1",
                       "--tls-ca", "/mine.pem", "--token", "t0k", "list"});
  ASSERT_TRUE(flags.error.ok()) << flags.error;
  EXPECT_EQ(flags.global.connection.server, "127.0.0.1:1");
  EXPECT_EQ(flags.global.connection.tls_ca_file, "/mine.pem");
  EXPECT_EQ(flags.global.connection.token, "t0k");
  EXPECT_EQ(flags.global.connection.token_file, "")
      << "--token wins over the context's token file";
  EXPECT_EQ(flags.global.connection.tls_cert_file, "")
      << "the context's client certificate is for its own server only";

  const Invocation elsewhere =
      ParseWithConfig({"--context", "prod", "--server", "127.0.0.1:1", "list"});
  ASSERT_TRUE(elsewhere.error.ok()) << elsewhere.error;
  EXPECT_EQ(elsewhere.global.connection.token_file, "")
      << "the context's token never goes to a server it does not name";
  const Invocation same =
      ParseWithConfig({"--context", "prod", "--server",
                       "a.internal:50051,b.internal:50051", "list"});
  ASSERT_TRUE(same.error.ok()) << same.error;
  EXPECT_EQ(same.global.connection.token_file, "/h/.phalanx/prod.token");

  Environment env;
  env.server = "127.0.0.1:2";
  env.token = "envtoken";
  const Invocation from_env =
      ParseWithConfig({"--context", "prod", "list"}, env);
  ASSERT_TRUE(from_env.error.ok()) << from_env.error;
  EXPECT_EQ(from_env.global.connection.server, "127.0.0.1:2");
  EXPECT_EQ(from_env.global.connection.token, "envtoken");
  EXPECT_EQ(from_env.global.connection.token_file, "");
}

TEST(ContextFlagTest, AnUnknownContextOrNoFileIsAUsageError) {
  const Invocation unknown = ParseWithConfig({"--context", "stage", "list"});
  EXPECT_THAT(std::string(unknown.error.message()),
              HasSubstr("no context \"stage\""));
  const ConfigFile no_file{"/home/u/.config/phalanx/config", std::nullopt,
                           "/home/u"};
  const Invocation missing =
      ParseCommandLine({"--context", "prod", "list"}, {}, no_file);
  EXPECT_THAT(std::string(missing.error.message()),
              HasSubstr("--context prod: no client config file "
                        "(/home/u/.config/phalanx/config)"));
  const Invocation none = ParseCommandLine({"list"}, {}, no_file);
  EXPECT_TRUE(none.error.ok()) << "no file, no --context: the defaults";
  const ConfigFile bad{"/c", "{\"contexts\": 3}", "/h"};
  EXPECT_THAT(std::string(ParseCommandLine({"list"}, {}, bad).error.message()),
              HasSubstr("client config /c: contexts: want an object"));
}

}  // namespace
}  // namespace phalanx::ctl
