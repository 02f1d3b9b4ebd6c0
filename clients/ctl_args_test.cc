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
  return ParseCommandLine(argv, env);
}

TEST(ParseCommandLineTest, GlobalFlagsGoAnywhere) {
  Invocation inv = Parse(
      {"--server", "h:1", "get", "g-1", "-o", "json", "--timeout", "2.5"});
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  ASSERT_NE(inv.command, nullptr);
  EXPECT_EQ(inv.command->path, "get");
  EXPECT_THAT(inv.args, ElementsAre("g-1"));
  EXPECT_EQ(inv.global.server, "h:1");
  EXPECT_EQ(inv.global.output, OutputFormat::kJson);
  EXPECT_EQ(inv.global.timeout, absl::Milliseconds(2500));
}

TEST(ParseCommandLineTest, Defaults) {
  Invocation inv = Parse({"topology"});
  ASSERT_TRUE(inv.error.ok()) << inv.error;
  EXPECT_EQ(inv.global.server, "127.0.0.1:50051");
  EXPECT_EQ(inv.global.output, OutputFormat::kTable);
  EXPECT_EQ(inv.global.timeout, absl::Seconds(10));
  EXPECT_FALSE(inv.help);
}

TEST(ParseCommandLineTest, EnvServerIsTheDefaultAndTheFlagWins) {
  EXPECT_EQ(Parse({"topology"}, "env:7").global.server, "env:7");
  EXPECT_EQ(Parse({"topology", "--server=flag:8"}, "env:7").global.server,
            "flag:8");
}

TEST(ParseCommandLineTest, OutputFlagSpellings) {
  for (const char* spelling : {"-ojson", "-o=json", "--output=json"}) {
    Invocation inv = Parse({"queues", "list", spelling});
    ASSERT_TRUE(inv.error.ok()) << spelling << ": " << inv.error;
    EXPECT_EQ(inv.global.output, OutputFormat::kJson) << spelling;
  }
}

TEST(ParseCommandLineTest, TimeoutAcceptsADuration) {
  EXPECT_EQ(Parse({"topology", "--timeout", "1m"}).global.timeout,
            absl::Minutes(1));
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
                  {"topology", "-o", "yaml"},
                  "table or json",
                  "topology"},
        ErrorCase{"BadTimeout",
                  {"topology", "--timeout", "0"},
                  "--timeout",
                  "topology"},
        ErrorCase{"BadSwitchValue",
                  {"report", "g", "--ack-preemption=maybe"},
                  "--ack-preemption",
                  "report"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) {
      return info.param.name;
    });

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
