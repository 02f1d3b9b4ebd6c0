#include "clients/ctl_flag_checks.h"

#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "clients/ctl_args.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::ctl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

void ExpectInvalid(const absl::Status& status, const std::string& text) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(text));
}

// Runs `validator` on `text`; returns its message ("" = accepted) and leaves
// the rewritten text in `text`.
std::string Check(const CLI::Validator& validator, std::string& text) {
  return validator(text);
}

TEST(ParseDurationTest, Forms) {
  EXPECT_EQ(*ParseDuration("3600s"), absl::Hours(1));
  EXPECT_EQ(*ParseDuration("90m"), absl::Minutes(90));
  EXPECT_EQ(*ParseDuration("1h30m"), absl::Minutes(90));
  EXPECT_EQ(*ParseDuration("7200"), absl::Hours(2));
  for (const char* bad : {"inf", "0", "-5s", "soon", ""}) {
    ExpectInvalid(ParseDuration(bad).status(), "want a positive duration");
  }
}

TEST(ParseTimeoutTest, SecondsOrADuration) {
  EXPECT_EQ(*ParseTimeout("2.5"), absl::Milliseconds(2500));
  EXPECT_EQ(*ParseTimeout("1m"), absl::Minutes(1));
  ExpectInvalid(ParseTimeout("0").status(),
                "want a positive number of seconds, got \"0\"");
}

TEST(ParseSwitchTest, Words) {
  for (const char* on : {"true", "YES", "1"}) EXPECT_TRUE(*ParseSwitch(on));
  for (const char* off : {"false", "No", "0"}) EXPECT_FALSE(*ParseSwitch(off));
  ExpectInvalid(ParseSwitch("maybe").status(),
                "want true or false, got \"maybe\"");
}

TEST(ParseGangStatesTest, NamesInAnyForm) {
  absl::StatusOr<std::vector<v1::GangState>> states =
      ParseGangStates({"pending", "ADMITTED", "gang_state_running"});
  ASSERT_TRUE(states.ok()) << states.status();
  EXPECT_THAT(*states,
              ElementsAre(v1::GANG_STATE_PENDING, v1::GANG_STATE_ADMITTED,
                          v1::GANG_STATE_RUNNING));
  ExpectInvalid(ParseGangStates({"bogus"}).status(), "unknown state \"bogus\"");
  ExpectInvalid(ParseGangStates({"unspecified"}).status(), "unknown state");
}

TEST(ParseNodeStateTest, Names) {
  EXPECT_EQ(*ParseNodeState("cordoned"), v1::NODE_STATE_CORDONED);
  EXPECT_EQ(*ParseNodeState("NODE_STATE_READY"), v1::NODE_STATE_READY);
  ExpectInvalid(ParseNodeState("cordon").status(), "unknown state");
}

TEST(ParseSliceTest, SizeAtLevel) {
  absl::StatusOr<SpecOptions::Slice> slice = ParseSlice("18@nvl");
  ASSERT_TRUE(slice.ok()) << slice.status();
  EXPECT_EQ(slice->size, 18);
  EXPECT_EQ(slice->level, "nvl");
  for (const char* bad : {"8", "0@rack", "x@rack", "8@", "1@a@b"}) {
    ExpectInvalid(ParseSlice(bad).status(), "want SIZE@LEVEL");
  }
}

TEST(ParseNominalTest, ModelEqualsGpus) {
  absl::StatusOr<std::map<std::string, int64_t>> nominal =
      ParseNominal("H100=64, H200=32,");
  ASSERT_TRUE(nominal.ok()) << nominal.status();
  EXPECT_EQ(nominal->at("H100"), 64);
  EXPECT_EQ(nominal->at("H200"), 32);
  for (const char* bad : {"H100", "H100=x", "=3", "H100=-1"}) {
    ExpectInvalid(ParseNominal(bad).status(), "want MODEL=GPUS");
  }
}

TEST(SplitListTest, TrimsAndDropsEmptyPieces) {
  EXPECT_THAT(SplitList(" a, b,,c ,"), ElementsAre("a", "b", "c"));
  EXPECT_TRUE(SplitList("").empty());
}

TEST(ValidatorTest, IntegerInNamesTheRange) {
  const CLI::Validator pods = IntegerIn(1, 10);
  std::string text = "10";
  EXPECT_EQ(Check(pods, text), "");
  for (std::string bad : {"0", "11", "1.5", "x", ""}) {
    EXPECT_THAT(Check(pods, bad), HasSubstr("want an integer in [1, 10]"))
        << bad;
  }
  std::string port = "0";
  EXPECT_EQ(Check(IntegerIn(1, 65535, "1..65535"), port),
            "want 1..65535, got \"0\"");
}

TEST(ValidatorTest, OneOfRewritesToTheValueInAnyCase) {
  const CLI::Validator mode = OneOf({{"required", 1}, {"preferred", 2}});
  std::string text = "PREFERRED";
  EXPECT_EQ(Check(mode, text), "");
  EXPECT_EQ(text, "2");
  std::string number = "1";  // the mapped values are not names
  EXPECT_EQ(Check(mode, number), "want required or preferred, got \"1\"");
  EXPECT_EQ(mode.get_description(), "required|preferred");
}

TEST(ValidatorTest, SwitchWordAndNumbers) {
  std::string yes = "Yes";
  EXPECT_EQ(Check(SwitchWord(), yes), "");
  EXPECT_EQ(yes, "true");
  std::string negative = "-0.5";
  EXPECT_THAT(Check(NumberAtLeastZero(), negative),
              HasSubstr("want a number >= 0"));
  std::string infinite = "inf";
  EXPECT_THAT(Check(NumberAtLeastZero(), infinite),
              HasSubstr("want a number >= 0"));
}

TEST(ValidatorTest, EchoedValuesAreCutAndEscaped) {
  std::string hostile = "\x1b[31m" + std::string(200, 'x');
  const std::string message = Check(IntegerIn(0, 1), hostile);
  EXPECT_EQ(message.find('\x1b'), std::string::npos) << message;
  EXPECT_LT(message.size(), 120u) << message;
}

// Every flag with a checked value, through the real parser: the message
// names the flag.
struct RejectCase {
  std::vector<std::string> argv;
  std::string message;
};

TEST(FlagValidatorsTest, RejectOutOfRangeValuesNamingTheFlag) {
  const RejectCase cases[] = {
      {{"submit", "--pods", "0"}, "--pods: want an integer in [1, 2147483647]"},
      {{"submit", "--gpus", "-1"}, "--gpus: want an integer in [0, "},
      {{"run", "--min-pods", "0", "--", "x"},
       "--min-pods: want an integer in [1, 2147483647]"},
      {{"submit", "--priority", "2147483648"}, "--priority: want an integer"},
      {{"submit", "--mode", "strict"},
       "--mode: want required, preferred or unconstrained, got \"strict\""},
      {{"submit", "--slice", "0@rack"}, "--slice: want SIZE@LEVEL"},
      {{"submit", "--max-runtime", "inf"}, "--max-runtime: want a positive"},
      {{"run", "--master-port", "65536", "--", "x"},
       "--master-port: want 1..65535, got \"65536\""},
      {{"run", "--lease", "0s", "--", "x"}, "--lease: want a positive"},
      {{"list", "--limit", "0"}, "--limit: want an integer in [1, "},
      {{"list", "--state", "pending,bogus"},
       "--state: unknown state \"bogus\""},
      {{"watch", "--after-revision", "-1"}, "--after: want an integer in [0, "},
      {{"report", "g", "--checkpoint", "yesterday"},
       "--checkpoint: want now or an RFC3339 time"},
      {{"report", "g", "--state", "pending"},
       "--state: want running, succeeded or failed"},
      {{"nodes", "list", "--state", "melted"}, "--state: unknown state"},
      {{"nodes", "drain", "n", "--deadline", "soon"},
       "--deadline: want a duration such as 90m or an RFC3339 time"},
      {{"queues", "put", "--weight", "-1"}, "--weight: want a number >= 0"},
      {{"queues", "put", "--held", "maybe"}, "--held: want true or false"},
      {{"queues", "put", "--lending-limit", "-2"},
       "--lending-limit: want an integer in [-1, "},
      {{"queues", "set", "q", "--weight", "x"}, "--weight: want a number"},
      {{"config", "set", "-f", "c", "--expected-version", "-1"},
       "--expected-version: want an integer in [0, "},
      {{"audit", "--page-size", "1001"},
       "--page-size: want an integer in [1, 1000]"},
      {{"audit", "--all=perhaps"}, "--all: want true or false"},
      {{"list", "-l", "=a"},
       "--label: want KEY=VALUE, KEY!=VALUE, KEY or !KEY, got \"=a\""},
      {{"cancel", "-l", ","}, "--label: empty label selector"},
      {{"topology", "-o", "xml"},
       "--output: want table, json, yaml, wide or csv"},
      {{"topology", "--timeout", "-1"}, "--timeout: want a positive number"},
      {{"topology", "--max-message-bytes", "x"},
       "--max-message-bytes: want a positive number of bytes"},
  };
  for (const RejectCase& c : cases) {
    ExpectInvalid(ParseCommandLine(c.argv, {}).error, c.message);
  }
}

TEST(ParseLabelSelectorTest, EveryOperator) {
  absl::StatusOr<LabelSelector> selector =
      ParseLabelSelector(" team = a,tier!=batch,gpu==h100,ready,!draft");
  ASSERT_TRUE(selector.ok()) << selector.status();
  ASSERT_EQ(selector->size(), 5u);
  using Op = LabelRequirement::Op;
  const std::vector<std::tuple<std::string, Op, std::string>> want = {
      {"team", Op::kEquals, "a"},
      {"tier", Op::kNotEquals, "batch"},
      {"gpu", Op::kEquals, "h100"},
      {"ready", Op::kExists, ""},
      {"draft", Op::kNotExists, ""}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ((*selector)[i].key, std::get<0>(want[i])) << i;
    EXPECT_EQ((*selector)[i].op, std::get<1>(want[i])) << i;
    EXPECT_EQ((*selector)[i].value, std::get<2>(want[i])) << i;
  }
  EXPECT_FALSE(ParseLabelSelector("").ok());
  EXPECT_FALSE(ParseLabelSelector("!=x").ok());
}

}  // namespace
}  // namespace phalanx::ctl
