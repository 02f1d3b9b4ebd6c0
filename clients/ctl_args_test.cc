#include "clients/ctl_args.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "clients/ctl_commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::ctl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Invocation Parse(std::vector<std::string> argv, std::string env = "") {
  return ParseCommandLine(argv, {env, ""});
}

TEST(ParseCommandLineTest, GlobalFlagsGoAnywhere) {
  Invocation inv = Parse(
      {"--server", "h:1", "get", "g-1", "-o", "json", "--timeout", "2.5"});
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  ASSERT_NE(inv.command, nullptr);
  EXPECT_EQ(inv.command->path, "get");
  EXPECT_THAT(inv.args, ElementsAre("g-1"));
  EXPECT_EQ(inv.global.connection.server, "h:1");
  EXPECT_EQ(inv.global.output, OutputFormat::kJson);
  EXPECT_EQ(inv.global.timeout, absl::Milliseconds(2500));
}

TEST(ParseCommandLineTest, Defaults) {
  Invocation inv = Parse({"topology"});
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  EXPECT_EQ(inv.global.connection.server, "127.0.0.1:50051");
  EXPECT_EQ(inv.global.output, OutputFormat::kTable);
  EXPECT_EQ(inv.global.timeout, absl::Seconds(10));
  EXPECT_FALSE(inv.help);
}

TEST(ParseCommandLineTest, EnvServerIsTheDefaultAndTheFlagWins) {
  EXPECT_EQ(Parse({"topology"}, "env:7").global.connection.server, "env:7");
  EXPECT_EQ(
      Parse({"topology", "--server=flag:8"}, "env:7").global.connection.server,
      "flag:8");
}

TEST(ParseCommandLineTest, OutputFlagSpellings) {
  for (const char* spelling : {"-ojson", "-o=json", "--output=json"}) {
    Invocation inv = Parse({"queues", "list", spelling});
    ASSERT_TRUE(inv.error.ok()) << spelling << ": " << inv.error;
    EXPECT_EQ(inv.global.output, OutputFormat::kJson) << spelling;
  }
}

TEST(ParseCommandLineTest, OutputFormats) {
  EXPECT_EQ(Parse({"list", "-o", "yaml"}).global.output, OutputFormat::kYaml);
  EXPECT_EQ(Parse({"list", "-o", "WIDE"}).global.output, OutputFormat::kWide);
  EXPECT_EQ(Parse({"list", "-otable"}).global.output, OutputFormat::kTable);
}

TEST(ParseCommandLineTest, AliasesAndChoicesInHelp) {
  Invocation inv = Parse({"watch", "--after-revision", "12"});
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  EXPECT_EQ(inv.flags.Get("after"), "12");
  EXPECT_THAT(CommandHelp(*FindCommand("watch")),
              HasSubstr("(also --after-revision)"));
  EXPECT_THAT(GlobalHelp(), HasSubstr("table|json|yaml|wide"));
  EXPECT_THAT(CommandHelp(*FindCommand("submit")),
              HasSubstr("required|preferred|unconstrained"));
}

TEST(ParseCommandLineTest, TimeoutAcceptsADuration) {
  EXPECT_EQ(Parse({"topology", "--timeout", "1m"}).global.timeout,
            absl::Minutes(1));
}

TEST(ParseCommandLineTest, AuditAndTheNewFlags) {
  Invocation audit = Parse({"audit", "--all", "--page-size", "50"});
  ASSERT_TRUE(audit.error.ok()) << audit.error;
  EXPECT_EQ(audit.command->path, "audit");
  EXPECT_EQ(audit.flags.Get("all"), "true");
  EXPECT_EQ(audit.flags.Get("page-size"), "50");
  EXPECT_EQ(Parse({"audit", "extra"}).error.code(),
            absl::StatusCode::kInvalidArgument);

  Invocation submit = Parse({"submit", "--queue", "a", "--pods", "1", "--gpus",
                             "8", "--priority-class", "batch"});
  ASSERT_TRUE(submit.error.ok()) << submit.error;
  EXPECT_EQ(submit.flags.Get("priority-class"), "batch");
  Invocation dryrun = Parse({"dryrun", "--priority-class", "batch"});
  EXPECT_TRUE(dryrun.error.ok()) << dryrun.error;

  Invocation put =
      Parse({"queues", "put", "--name", "a", "--max-priority", "-5"});
  ASSERT_TRUE(put.error.ok()) << put.error;
  EXPECT_EQ(put.flags.Get("max-priority"), "-5");
}

TEST(ParseCommandLineTest, SubcommandWithArgumentAndFlag) {
  Invocation inv = Parse({"nodes", "cordon", "n-1", "--reason", "maint"});
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  EXPECT_EQ(inv.command->path, "nodes cordon");
  EXPECT_THAT(inv.args, ElementsAre("n-1"));
  EXPECT_EQ(inv.flags.Get("reason"), "maint");
}

TEST(ParseCommandLineTest, RepeatedFlagsAndCommaLists) {
  Invocation inv = Parse({"watch", "--queue", "a", "--queue=b,c", "--gang",
                          "g-1", "--after", "7"});
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  EXPECT_THAT(inv.flags.GetList("queue"), ElementsAre("a", "b", "c"));
  EXPECT_THAT(inv.flags.GetList("gang"), ElementsAre("g-1"));
  EXPECT_EQ(inv.flags.Get("after"), "7");
  EXPECT_FALSE(inv.flags.Has("missing"));
  EXPECT_EQ(inv.flags.Get("missing", "fallback"), "fallback");
}

TEST(ParseCommandLineTest, ShortFileFlagAndLongForm) {
  EXPECT_EQ(Parse({"submit", "-f", "a.json"}).flags.Get("file"), "a.json");
  EXPECT_EQ(Parse({"submit", "--file=b.json"}).flags.Get("file"), "b.json");
  EXPECT_EQ(Parse({"submit", "-f", "-"}).flags.Get("file"), "-");
}

TEST(ParseCommandLineTest, Switches) {
  EXPECT_EQ(
      Parse({"report", "g", "--ack-preemption"}).flags.Get("ack-preemption"),
      "true");
  EXPECT_EQ(
      Parse({"report", "g", "--ack-preemption=no"}).flags.Get("ack-preemption"),
      "false");
}

TEST(ParseCommandLineTest, DoubleDashEndsFlags) {
  Invocation inv = Parse({"get", "--", "-odd-id"});
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  EXPECT_THAT(inv.args, ElementsAre("-odd-id"));
}

TEST(ParseCommandLineTest, ValueMayLookLikeANegativeNumber) {
  Invocation inv = Parse({"submit", "--queue", "q", "--priority", "-5"});
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  EXPECT_EQ(inv.flags.Get("priority"), "-5");
}

TEST(ParseCommandLineTest, Help) {
  Invocation global = Parse({"-h"});
  EXPECT_TRUE(global.help);
  EXPECT_EQ(global.command, nullptr);
  EXPECT_TRUE(global.error.ok());

  Invocation command = Parse({"nodes", "upsert", "--help"});
  EXPECT_TRUE(command.help);
  ASSERT_NE(command.command, nullptr);
  EXPECT_EQ(command.command->path, "nodes upsert");
  EXPECT_TRUE(command.error.ok()) << "a missing -f does not matter for help";
}

struct ErrorCase {
  std::string name;
  std::vector<std::string> argv;
  std::string message;       // substring of the error
  std::string command_path;  // "" = not recognised
};

class ParseErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ParseErrorTest, ReportsUsageError) {
  const ErrorCase& c = GetParam();
  Invocation inv = Parse(c.argv);
  EXPECT_EQ(inv.error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(inv.error.message()), HasSubstr(c.message));
  EXPECT_EQ(inv.command == nullptr ? "" : std::string(inv.command->path),
            c.command_path);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ParseErrorTest,
    ::testing::Values(
        ErrorCase{"NoCommand", {}, "missing command", ""},
        ErrorCase{"UnknownCommand", {"frobnicate"}, "unknown command", ""},
        ErrorCase{"UnknownSubcommand",
                  {"nodes", "explode"},
                  "unknown command \"nodes explode\"",
                  ""},
        ErrorCase{
            "GroupAlone", {"nodes"}, "needs a subcommand: list, upsert", ""},
        ErrorCase{"UnknownFlag",
                  {"get", "g-1", "--queue", "q"},
                  "unknown flag --queue for \"get\"",
                  "get"},
        ErrorCase{"FlagBeforeCommand",
                  {"--queue", "q", "list"},
                  "command flags go after the command",
                  ""},
        ErrorCase{"MissingValue",
                  {"list", "--limit"},
                  "--limit needs a value",
                  "list"},
        ErrorCase{"GivenTwice",
                  {"list", "--queue", "a", "--queue", "b"},
                  "--queue given more than once",
                  "list"},
        ErrorCase{
            "MissingArgument", {"get"}, "takes 1 argument(s), got 0", "get"},
        ErrorCase{"ExtraArgument",
                  {"topology", "x"},
                  "takes no arguments",
                  "topology"},
        ErrorCase{"RequiredFlag",
                  {"config", "set"},
                  "--file is required",
                  "config set"},
        ErrorCase{"BadOutput",
                  {"topology", "-o", "xml"},
                  "--output: want table, json, yaml or wide, got \"xml\"",
                  "topology"},
        ErrorCase{"BadTimeout",
                  {"topology", "--timeout", "0"},
                  "--timeout",
                  "topology"},
        ErrorCase{"BadSwitchValue",
                  {"report", "g", "--ack-preemption=maybe"},
                  "--ack-preemption",
                  "report"},
        ErrorCase{"TokenAndTokenFile",
                  {"topology", "--token", "t", "--token-file", "f"},
                  "--token or --token-file, not both",
                  "topology"},
        ErrorCase{"EmptyToken",
                  {"topology", "--token="},
                  "--token: empty token",
                  "topology"},
        ErrorCase{"CertWithoutKey",
                  {"topology", "--tls-ca", "ca", "--tls-cert", "c"},
                  "--tls-cert and --tls-key go together",
                  "topology"},
        ErrorCase{"KeyWithoutCert",
                  {"topology", "--tls-ca", "ca", "--tls-key", "k"},
                  "--tls-cert and --tls-key go together",
                  "topology"},
        ErrorCase{"CertWithoutCa",
                  {"topology", "--tls-cert", "c", "--tls-key", "k"},
                  "--tls-cert needs --tls-ca",
                  "topology"},
        ErrorCase{"ServerNameWithoutCa",
                  {"topology", "--tls-server-name", "n"},
                  "--tls-server-name needs --tls-ca",
                  "topology"},
        ErrorCase{"InsecureWithTls",
                  {"topology", "--tls-ca", "ca", "--insecure"},
                  "--insecure contradicts --tls-ca",
                  "topology"},
        ErrorCase{"EmptyCa",
                  {"topology", "--tls-ca="},
                  "--tls-ca is empty",
                  "topology"},
        ErrorCase{"BadMaxMessageBytes",
                  {"topology", "--max-message-bytes", "0"},
                  "--max-message-bytes: want a positive number",
                  "topology"},
        ErrorCase{"HugeMaxMessageBytes",
                  {"topology", "--max-message-bytes", "4294967296"},
                  "--max-message-bytes",
                  "topology"},
        ErrorCase{"TokenInPlainTextOffLoopback",
                  {"topology", "--server", "10.1.2.3:50051", "--token", "t"},
                  "--server 10.1.2.3:50051 is not loopback",
                  "topology"},
        ErrorCase{"TokenFileInPlainTextOffLoopback",
                  {"topology", "--server", "phalanx.example:443",
                   "--token-file", "f"},
                  "give --tls-ca FILE for TLS, or --insecure",
                  "topology"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) {
      return info.param.name;
    });

constexpr char kSecret[] = "s3cret-Token.value";

Invocation ParseWithToken(std::vector<std::string> argv,
                          std::string env_token) {
  return ParseCommandLine(argv, {"", std::move(env_token)});
}

TEST(TokenTest, NoneByDefault) {
  Invocation inv = Parse({"topology"});
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  EXPECT_EQ(inv.global.connection.token, "");
  EXPECT_EQ(inv.global.connection.token_file, "");
  EXPECT_FALSE(inv.global.connection.insecure);
  EXPECT_EQ(inv.global.connection.max_message_bytes, 4 << 20);
  EXPECT_EQ(inv.global.connection.tls_ca_file, "");
}

TEST(TokenTest, FromTheEnvironment) {
  Invocation inv = ParseWithToken({"topology"}, kSecret);
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  EXPECT_EQ(inv.global.connection.token, kSecret);
}

TEST(TokenTest, TheFlagWinsOverTheEnvironment) {
  Invocation inv = ParseWithToken({"--token", "from-flag", "topology"}, "env");
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  EXPECT_EQ(inv.global.connection.token, "from-flag");
}

TEST(TokenTest, TheFileFlagWinsOverTheEnvironment) {
  Invocation inv =
      ParseWithToken({"topology", "--token-file", "/run/tok"}, "env");
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  EXPECT_EQ(inv.global.connection.token, "") << "read later from the file";
  EXPECT_EQ(inv.global.connection.token_file, "/run/tok");
}

TEST(TokenTest, AnInvalidEnvironmentTokenIsIgnoredWhenAFlagWins) {
  EXPECT_TRUE(
      ParseWithToken({"topology", "--token", "ok"}, "bad token").error.ok());
  Invocation inv = ParseWithToken({"topology"}, "bad token");
  EXPECT_THAT(std::string(inv.error.message()),
              HasSubstr("$PHALANX_TOKEN: the token may hold only visible"));
}

TEST(TokenTest, ErrorsNeverQuoteTheToken) {
  const std::vector<Invocation> invocations = {
      ParseWithToken({"topology", "--token", "a b\x1b[31m"}, ""),
      ParseWithToken({"topology"}, "x\ny"),
      ParseWithToken({"topology", "--server", "10.0.0.1:1", "--token", kSecret},
                     ""),
      ParseWithToken({"topology", "--server", "10.0.0.1:1"}, kSecret),
      ParseWithToken({"topology", "--token", kSecret, "--token-file", "f"}, ""),
      ParseWithToken({"topology", "--token", kSecret, "--bogus"}, ""),
  };
  for (const Invocation& inv : invocations) {
    EXPECT_FALSE(inv.error.ok());
    const std::string text = UsageErrorText(inv.error, inv.command);
    EXPECT_THAT(text, ::testing::Not(HasSubstr(kSecret))) << text;
    EXPECT_THAT(text, ::testing::Not(HasSubstr("a b"))) << text;
    EXPECT_THAT(text, ::testing::Not(HasSubstr("x\ny"))) << text;
  }
}

TEST(TokenTest, HelpNeverShowsTheToken) {
  Invocation inv = ParseWithToken({"--help"}, kSecret);
  ASSERT_TRUE(inv.help);
  EXPECT_THAT(GlobalHelp(), ::testing::Not(HasSubstr(kSecret)));
  EXPECT_THAT(GlobalHelp(), HasSubstr("$PHALANX_TOKEN"));
  EXPECT_THAT(GlobalHelp(), HasSubstr("--token-file FILE"));
  EXPECT_THAT(GlobalHelp(), HasSubstr("--tls-server-name NAME"));
  EXPECT_THAT(CommandHelp(*FindCommand("get")), HasSubstr("--tls-ca FILE"));
}

TEST(TokenTest, PlainTextIsAllowedOnLoopbackAndWithInsecure) {
  for (const char* server :
       {"127.0.0.1:50051", "localhost:1", "[::1]:7", "unix:/run/phalanx.sock",
        "dns:///localhost:5", "ipv4:127.0.0.1:1,127.0.0.2:2"}) {
    EXPECT_TRUE(
        ParseWithToken({"topology", "--server", server}, kSecret).error.ok())
        << server;
  }
  EXPECT_TRUE(ParseWithToken(
                  {"topology", "--server", "10.0.0.1:1", "--insecure"}, kSecret)
                  .error.ok());
  EXPECT_TRUE(
      ParseWithToken(
          {"topology", "--server", "10.0.0.1:1", "--tls-ca", "ca.pem"}, kSecret)
          .error.ok());
  EXPECT_TRUE(Parse({"topology", "--server", "10.0.0.1:1"}).error.ok())
      << "no token, nothing to leak";
}

TEST(TokenTest, CheckTokenAcceptsVisibleAscii) {
  EXPECT_TRUE(CheckToken("abc-._~+/=XYZ019", "--token").ok());
  EXPECT_FALSE(CheckToken("", "--token").ok());
  EXPECT_FALSE(CheckToken("a b", "--token").ok());
  EXPECT_FALSE(CheckToken("a\tb", "--token").ok());
  EXPECT_FALSE(CheckToken("a\x7f", "--token").ok());
  EXPECT_FALSE(CheckToken("caf\xc3\xa9", "--token").ok());
}

TEST(ConnectionFlagsTest, TlsAndLimits) {
  Invocation inv =
      Parse({"--tls-ca", "ca.pem", "--tls-cert", "c.pem", "--tls-key", "k.pem",
             "--tls-server-name", "phalanx.test", "--max-message-bytes", "1024",
             "topology"});
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  const ConnectionOptions& c = inv.global.connection;
  EXPECT_EQ(c.tls_ca_file, "ca.pem");
  EXPECT_EQ(c.tls_cert_file, "c.pem");
  EXPECT_EQ(c.tls_key_file, "k.pem");
  EXPECT_EQ(c.tls_server_name, "phalanx.test");
  EXPECT_EQ(c.max_message_bytes, 1024);
}

struct LoopbackCase {
  std::string server;
  bool loopback;
};

TEST(IsLoopbackTargetTest, Cases) {
  const LoopbackCase cases[] = {
      {"127.0.0.1:50051", true},
      {"127.9.8.7:1", true},
      {"localhost:50051", true},
      {"LOCALHOST:1", true},
      {"localhost", true},
      {"[::1]:50051", true},
      {"::1", true},
      {"[::ffff:127.0.0.1]:1", true},
      {"unix:/run/phalanx.sock", true},
      {"unix-abstract:phalanx", true},
      {"dns:///localhost:1", true},
      {"dns:127.0.0.1:1", true},
      {"ipv4:127.0.0.1:1,127.0.0.2:1", true},
      {"ipv6:[::1]:1", true},
      {"127.0.0.1:1,localhost:2,[::1]:3", true},  // HA replicas
      {"127.0.0.1:1,10.0.0.1:2", false},
      {"10.0.0.1:50051", false},
      {"128.0.0.1:1", false},
      {"localhost.evil.example:1", false},
      {"127.0.0.1.nip.io:1", false},
      {"[::2]:1", false},
      {"ipv4:127.0.0.1:1,10.0.0.1:1", false},
      {"ipv4:", false},
      {"dns://8.8.8.8/localhost:1", false},
      {"phalanx.example:443", false},
      {"", false},
  };
  for (const LoopbackCase& c : cases) {
    EXPECT_EQ(IsLoopbackTarget(c.server), c.loopback) << c.server;
  }
}

TEST(SplitEndpointsTest, CommasSeparateReplicasUnlessAGrpcSchemeIsGiven) {
  EXPECT_EQ(SplitEndpoints("a:1,b:2,c:3"),
            (std::vector<std::string>{"a:1", "b:2", "c:3"}));
  EXPECT_EQ(SplitEndpoints("a:1"), (std::vector<std::string>{"a:1"}));
  EXPECT_EQ(SplitEndpoints("a:1,,b:2,"),
            (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_EQ(SplitEndpoints("ipv4:a:1,b:2"),
            (std::vector<std::string>{"ipv4:a:1,b:2"}));
  EXPECT_EQ(SplitEndpoints("dns:///h:1"),
            (std::vector<std::string>{"dns:///h:1"}));
  EXPECT_EQ(SplitEndpoints("unix:/run/p.sock"),
            (std::vector<std::string>{"unix:/run/p.sock"}));
}

TEST(UsageErrorTextTest, EscapesControlCharacters) {
  Invocation inv = Parse({"\x1b]0;pwned\x07"});
  const std::string text = UsageErrorText(inv.error, inv.command);
  EXPECT_THAT(text, HasSubstr("unknown command \"\\x1b]0;pwned\\x07\""));
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
}

TEST(CommandTableTest, EveryCommandHasAHandlerAndHelp) {
  const std::string help = GlobalHelp();
  for (const CommandDef& command : CommandTable()) {
    EXPECT_TRUE(HasHandler(command.path)) << command.path;
    EXPECT_THAT(help, HasSubstr(std::string(command.path)));
    EXPECT_THAT(CommandHelp(command), HasSubstr(std::string(command.synopsis)));
  }
}

TEST(CommandTableTest, HelpDocumentsExitCodes) {
  const std::string help = GlobalHelp();
  EXPECT_THAT(help, HasSubstr("Exit codes:"));
  EXPECT_THAT(help, HasSubstr("3  the server could not be reached"));
}

TEST(UsageErrorTextTest, NamesTheCommand) {
  EXPECT_EQ(
      UsageErrorText(absl::InvalidArgumentError("boom"), FindCommand("get")),
      "phalanxctl: boom\n"
      "usage: phalanxctl get ID\n"
      "Run \"phalanxctl get --help\" for more.\n");
}

}  // namespace
}  // namespace phalanx::ctl
