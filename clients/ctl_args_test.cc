#include "clients/ctl_args.h"

#include <string>
#include <variant>
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
  EXPECT_EQ(inv.options.watch.after_revision, 12);
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

TEST(ParseCommandLineTest, HistoryExportFlagsAndItsOutputFormats) {
  Invocation history = Parse(
      {"history", "export", "--since", "7d", "--include-labels", "-o", "csv"});
  ASSERT_TRUE(history.error.ok()) << history.error;
  EXPECT_EQ(history.command->path, "history export");
  EXPECT_EQ(std::get<absl::Duration>(*history.options.history.since),
            absl::Hours(168));
  EXPECT_TRUE(history.options.history.include_labels);
  EXPECT_EQ(history.global.output, OutputFormat::kCsv);
  EXPECT_TRUE(Parse({"-o", "json", "history", "export"}).error.ok());
  EXPECT_THAT(
      std::string(Parse({"history", "export", "-o", "wide"}).error.message()),
      HasSubstr("writes csv (the default) or json"));
  EXPECT_THAT(std::string(Parse({"list", "-o", "csv"}).error.message()),
              HasSubstr("only \"history export\" writes CSV"));
  EXPECT_THAT(
      std::string(
          Parse({"history", "export", "--since", "soon"}).error.message()),
      HasSubstr("--since"));
}

TEST(ParseCommandLineTest, AuditAndTheNewFlags) {
  Invocation audit = Parse({"audit", "--all", "--page-size", "50"});
  ASSERT_TRUE(audit.error.ok()) << audit.error;
  EXPECT_EQ(audit.command->path, "audit");
  EXPECT_TRUE(audit.options.audit.all);
  EXPECT_EQ(audit.options.audit.page_size, 50);
  EXPECT_EQ(Parse({"audit", "extra"}).error.code(),
            absl::StatusCode::kInvalidArgument);

  Invocation submit = Parse({"submit", "--queue", "a", "--pods", "1", "--gpus",
                             "8", "--priority-class", "batch"});
  ASSERT_TRUE(submit.error.ok()) << submit.error;
  EXPECT_EQ(submit.options.spec.priority_class, "batch");
  Invocation dryrun = Parse({"dryrun", "--priority-class", "batch"});
  EXPECT_TRUE(dryrun.error.ok()) << dryrun.error;

  Invocation put =
      Parse({"queues", "put", "--name", "a", "--max-priority", "-5"});
  ASSERT_TRUE(put.error.ok()) << put.error;
  EXPECT_EQ(put.options.queue_put.max_priority, -5);
}

TEST(ParseCommandLineTest, SubcommandWithArgumentAndFlag) {
  Invocation inv = Parse({"nodes", "cordon", "n-1", "--reason", "maint"});
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  EXPECT_EQ(inv.command->path, "nodes cordon");
  EXPECT_THAT(inv.args, ElementsAre("n-1"));
  EXPECT_EQ(inv.options.node_state.reason, "maint");
}

TEST(ParseCommandLineTest, RepeatedFlagsAndCommaLists) {
  Invocation inv = Parse({"watch", "--queue", "a", "--queue=b,c", "--gang",
                          "g-1", "--after", "7"});
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  EXPECT_THAT(inv.options.watch.queues, ElementsAre("a", "b", "c"));
  EXPECT_THAT(inv.options.watch.gangs, ElementsAre("g-1"));
  EXPECT_EQ(inv.options.watch.after_revision, 7);
  EXPECT_FALSE(Parse({"watch"}).options.watch.after_revision.has_value());
}

TEST(ParseCommandLineTest, ShortFileFlagAndLongForm) {
  EXPECT_EQ(Parse({"submit", "-f", "a.json"}).options.spec.file, "a.json");
  EXPECT_EQ(Parse({"submit", "--file=b.json"}).options.spec.file, "b.json");
  EXPECT_EQ(Parse({"submit", "-f", "-"}).options.spec.file, "-");
}

TEST(ParseCommandLineTest, Switches) {
  EXPECT_TRUE(
      Parse({"report", "g", "--ack-preemption"}).options.report.ack_preemption);
  EXPECT_FALSE(Parse({"report", "g", "--ack-preemption=no"})
                   .options.report.ack_preemption);
}

TEST(ParseCommandLineTest, DoubleDashEndsFlags) {
  Invocation inv = Parse({"get", "--", "-odd-id"});
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  EXPECT_THAT(inv.args, ElementsAre("-odd-id"));
}

TEST(ParseCommandLineTest, ValueMayLookLikeANegativeNumber) {
  Invocation inv = Parse({"submit", "--queue", "q", "--priority", "-5"});
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  EXPECT_EQ(inv.options.spec.priority, -5);
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

TEST(TypedOptionsTest, SubmitFillsSpecOptions) {
  Invocation inv = Parse(
      {"submit", "--queue", "llm", "--pods", "32", "--gpus", "8", "--level",
       "rack", "--mode", "Preferred", "--models", "H100, H200", "--slice",
       "8@rack", "--estimated-runtime", "1h30m", "--max-runtime", "7200"});
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  const SpecOptions& spec = inv.options.spec;
  EXPECT_EQ(spec.queue, "llm");
  EXPECT_EQ(spec.pods, 32);
  EXPECT_EQ(spec.gpus, 8);
  EXPECT_EQ(spec.level, "rack");
  EXPECT_EQ(spec.mode, v1::TOPOLOGY_MODE_PREFERRED);
  ASSERT_TRUE(spec.models.has_value());
  EXPECT_THAT(*spec.models, ElementsAre("H100", "H200"));
  ASSERT_TRUE(spec.slice.has_value());
  EXPECT_EQ(spec.slice->size, 8);
  EXPECT_EQ(spec.slice->level, "rack");
  EXPECT_EQ(spec.estimated_runtime, absl::Minutes(90));
  EXPECT_EQ(spec.max_runtime, absl::Hours(2));
  EXPECT_FALSE(spec.file.has_value());
  EXPECT_FALSE(spec.priority.has_value());
}

TEST(TypedOptionsTest, RunQueuesReportAndDrain) {
  Invocation run =
      Parse({"run", "--queue", "a", "--pods", "1", "--gpus", "0", "--lease",
             "60s", "--requeue", "--hostfile", "h", "--", "./train.sh"});
  ASSERT_TRUE(run.error.ok()) << run.error;
  EXPECT_EQ(run.options.run.spec.queue, "a");
  EXPECT_EQ(run.options.run.lease, absl::Seconds(60));
  EXPECT_TRUE(run.options.run.requeue);
  EXPECT_EQ(run.options.run.hostfile, "h");
  EXPECT_EQ(run.options.run.exec, kDefaultExec);
  EXPECT_EQ(run.options.run.master_port, kDefaultMasterPort);
  EXPECT_FALSE(run.options.run.elastic_rendezvous);
  EXPECT_FALSE(run.options.run.spec.min_pods.has_value());
  Invocation elastic =
      Parse({"run", "--queue", "a", "--pods", "8", "--min-pods", "2", "--gpus",
             "8", "--elastic-rendezvous", "--", "./train.sh"});
  ASSERT_TRUE(elastic.error.ok()) << elastic.error;
  EXPECT_EQ(elastic.options.run.spec.min_pods, 2);
  EXPECT_TRUE(elastic.options.run.elastic_rendezvous);

  Invocation put =
      Parse({"queues", "put", "--name", "q", "--weight", "2.5", "--nominal",
             "H100=64", "--held", "yes", "--borrowing-limit", "-1"});
  ASSERT_TRUE(put.error.ok()) << put.error;
  const QueuePutOptions& queue = put.options.queue_put;
  EXPECT_EQ(queue.weight, 2.5);
  ASSERT_TRUE(queue.nominal.has_value());
  EXPECT_EQ(queue.nominal->at("H100"), 64);
  EXPECT_EQ(queue.held, true);
  EXPECT_EQ(queue.borrowing_limit, -1);
  EXPECT_FALSE(queue.lending_limit.has_value());

  Invocation report = Parse({"report", "g", "--state", "FAILED", "--checkpoint",
                             "2024-05-01T12:00:03Z"});
  ASSERT_TRUE(report.error.ok()) << report.error;
  EXPECT_EQ(report.options.report.state, v1::GANG_STATE_FAILED);
  ASSERT_TRUE(report.options.report.checkpoint.has_value());
  EXPECT_EQ(std::get<absl::Time>(*report.options.report.checkpoint),
            absl::FromUnixSeconds(1714564803));
  Invocation now = Parse({"report", "g", "--checkpoint", "now"});
  ASSERT_TRUE(now.options.report.checkpoint.has_value());
  EXPECT_TRUE(std::holds_alternative<ReportOptions::Now>(
      *now.options.report.checkpoint));

  Invocation drain = Parse({"nodes", "drain", "n", "--deadline", "90m"});
  ASSERT_TRUE(drain.error.ok()) << drain.error;
  ASSERT_TRUE(drain.options.node_state.deadline.has_value());
  EXPECT_EQ(std::get<absl::Duration>(*drain.options.node_state.deadline),
            absl::Minutes(90));
}

TEST(TypedOptionsTest, ListStatesAndNodeState) {
  Invocation list = Parse({"list", "--state", "pending,ADMITTED"});
  ASSERT_TRUE(list.error.ok()) << list.error;
  EXPECT_THAT(list.options.list.states,
              ElementsAre(v1::GANG_STATE_PENDING, v1::GANG_STATE_ADMITTED));
  Invocation nodes = Parse({"nodes", "list", "--state", "draining"});
  ASSERT_TRUE(nodes.error.ok()) << nodes.error;
  EXPECT_EQ(nodes.options.nodes_list.state, v1::NODE_STATE_DRAINING);
}

TEST(TypedOptionsTest, AGlobalFlagRepeatedTakesTheLastValue) {
  Invocation inv = Parse({"--server", "a:1", "-o", "json", "topology",
                          "--server", "b:2", "-o", "yaml"});
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  EXPECT_EQ(inv.global.connection.server, "b:2");
  EXPECT_EQ(inv.global.output, OutputFormat::kYaml);
  // Every value is still checked.
  EXPECT_THAT(
      std::string(
          Parse({"topology", "-o", "xml", "-o", "json"}).error.message()),
      HasSubstr("--output: want table, json, yaml, wide or csv"));
}

TEST(TypedOptionsTest, OnlyDashSpellingsAreFlags) {
  // As before the options were typed: "--page_size" is not "--page-size".
  EXPECT_THAT(std::string(Parse({"audit", "--page_size", "5"}).error.message()),
              HasSubstr("unknown flag --page_size for \"audit\""));
}

TEST(HelpTest, ComesFromCli11WithEachCommandsFlags) {
  const std::string submit = CommandHelp(*FindCommand("submit"));
  EXPECT_THAT(submit, HasSubstr("usage: phalanxctl submit (-f SPEC.json"));
  EXPECT_THAT(submit, HasSubstr("-f,--file FILE"));
  EXPECT_THAT(submit, HasSubstr("--pods N"));
  EXPECT_THAT(submit, HasSubstr("Global flags:"));
  EXPECT_THAT(submit, HasSubstr("-o,--output FORMAT:table|json|yaml|wide"));
  EXPECT_THAT(submit, ::testing::Not(HasSubstr("--page-size")));
  const std::string upsert = CommandHelp(*FindCommand("nodes upsert"));
  EXPECT_THAT(upsert, HasSubstr("-f,--file FILE REQUIRED"));
  const std::string global = GlobalHelp();
  EXPECT_THAT(global, HasSubstr("usage: phalanxctl [global flags] COMMAND"));
  EXPECT_THAT(global, HasSubstr("  nodes cordon "));
  EXPECT_THAT(global, ::testing::Not(HasSubstr("--pods")));
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
                  "--output: want table, json, yaml, wide or csv, got \"xml\"",
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
