#include "clients/ctl_format.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "phalanx/v1/scheduler.pb.h"
#include "phalanx/v1/types.pb.h"

namespace phalanx::ctl {
namespace {

TEST(TableTest, AlignsColumnsWithoutTrailingSpaces) {
  Table table({"ID", "STATE", "REASON"});
  table.AddRow({"g-1", "PENDING", "no rack with 4 free nodes"});
  table.AddRow({"g-000042", "RUNNING", ""});
  EXPECT_EQ(table.Render(),
            "ID        STATE    REASON\n"
            "g-1       PENDING  no rack with 4 free nodes\n"
            "g-000042  RUNNING\n");
}

TEST(TableTest, WithoutHeadersAndWithShortRows) {
  Table table;
  EXPECT_TRUE(table.empty());
  table.AddRow({"Key:", "value"});
  table.AddRow({"Longer key:"});
  EXPECT_EQ(table.Render(),
            "Key:         value\n"
            "Longer key:\n");
}

struct EscapeCase {
  std::string name;
  std::string input;
  std::string want;
};

TEST(SafeTextTest, EscapesEverythingThatCouldControlATerminal) {
  const EscapeCase cases[] = {
      {"Plain", "plain text 42", "plain text 42"},
      {"OscTitle", "\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"},
      {"CsiClearScreen", "\x1b[2J", "\\x1b[2J"},
      {"Bel", "ding\a", "ding\\x07"},
      {"CarriageReturn", "ok\rFAKE", "ok\\rFAKE"},
      {"Newline", "a\nb", "a\\nb"},
      {"Tab", "a\tb", "a\\tb"},
      {"Nul", std::string("a\0b", 3), "a\\x00b"},
      {"Backspace", "x\b", "x\\x08"},
      {"Del", "x\x7f", "x\\x7f"},
      {"C1CsiAsUtf8",
       "\xc2\x9b"
       "31m",
       "\\u009b31m"},
      {"C1Osc",
       "\xc2\x9d"
       "0;t",
       "\\u009d0;t"},
      {"C1Nel", "\xc2\x85", "\\u0085"},
      {"RawC1Byte",
       "\x9b"
       "2J",
       "\\x9b2J"},
      {"InvalidByte",
       "a\xff"
       "b",
       "a\\xffb"},
      {"CutSequence", "\xe2\x82", "\\xe2\\x82"},
      {"CutSequenceThenAscii", "\xe2\x82x", "\\xe2\\x82x"},
      {"OverlongEsc", "\xc0\x9b", "\\xc0\\x9b"},
      {"OverlongThreeBytes", "\xe0\x80\x9b", "\\xe0\\x80\\x9b"},
      {"Surrogate", "\xed\xa0\x80", "\\xed\\xa0\\x80"},
      {"BeyondUnicode", "\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"},
      {"StrayContinuation", "\x80", "\\x80"},
      {"BidiOverride",
       "abc\xe2\x80\xae"
       "fed",
       "abc\\u202efed"},
      {"BidiIsolate", "\xe2\x81\xa6", "\\u2066"},
      {"ArabicLetterMark", "\xd8\x9c", "\\u061c"},
      {"LineSeparator", "\xe2\x80\xa8", "\\u2028"},
      {"Utf8IsKept", "caf\xc3\xa9 \xe2\x80\xa6 \xf0\x9f\x9a\x80",
       "caf\xc3\xa9 \xe2\x80\xa6 \xf0\x9f\x9a\x80"},
      {"BackslashIsKept", "C:\\dir", "C:\\dir"},
  };
  for (const EscapeCase& c : cases) {
    EXPECT_EQ(SafeText(c.input), c.want) << c.name;
    EXPECT_EQ(SafeCell(c.input, 1000), c.want) << c.name;
  }
}

TEST(SafeTextTest, NoOutputByteCanStartAnEscapeSequence) {
  // Every byte value, alone and after a lead byte: the output holds no C0
  // control, no DEL, and no UTF-8 encoding of a C1 control.
  for (int lead : {-1, 0xc2, 0xe2, 0xf0}) {
    for (int b = 0; b < 256; ++b) {
      std::string input;
      if (lead >= 0) input.push_back(static_cast<char>(lead));
      input.push_back(static_cast<char>(b));
      const std::string out = SafeText(input);
      for (size_t i = 0; i < out.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(out[i]);
        EXPECT_FALSE(c < 0x20 || c == 0x7f) << lead << " " << b;
        if (c == 0xc2 && i + 1 < out.size()) {
          const unsigned char next = static_cast<unsigned char>(out[i + 1]);
          EXPECT_FALSE(next >= 0x80 && next <= 0x9f) << lead << " " << b;
        }
      }
    }
  }
}

TEST(SafeTextTest, LongTextIsCutWithTheCountOfWhatIsLeft) {
  const std::string text(10000, 'x');
  EXPECT_EQ(SafeText(text),
            std::string(4096, 'x') + "\xe2\x80\xa6 (5904 more bytes)");
  EXPECT_EQ(SafeText(text, 10), "xxxxxxxxxx\xe2\x80\xa6 (9990 more bytes)");
  EXPECT_EQ(SafeText("0123456789", 10), "0123456789");
}

TEST(SafeTextTest, CutsAtACharacterBoundary) {
  // "é" is two bytes, one character; an escape counts its length.
  EXPECT_EQ(SafeCell("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 3),
            "\xc3\xa9\xc3\xa9\xe2\x80\xa6");
  EXPECT_EQ(SafeCell("ab\x1b"
                     "cdef",
                     6),
            "ab\xe2\x80\xa6")
      << "\\x1b does not fit beside the ellipsis, and is not split";
  EXPECT_EQ(SafeCell("ab\x1b", 6), "ab\\x1b");
  EXPECT_EQ(SafeText("\x1b\x1b", 5), "\\x1b\xe2\x80\xa6 (1 more bytes)");
}

TEST(SafeCellTest, CutsToTheWidthWithAnEllipsis) {
  EXPECT_EQ(SafeCell("abcd", 4), "abcd");
  EXPECT_EQ(SafeCell("abcde", 4), "abc\xe2\x80\xa6");
  EXPECT_EQ(SafeCell(std::string(100, 'y')),
            std::string(63, 'y') + "\xe2\x80\xa6");
  EXPECT_EQ(DisplayWidth(SafeCell(std::string(100, 'y'))), 64u);
}

TEST(SafeTextTest, CostDoesNotGrowWithTheInput) {
  const std::string huge(3 << 20, '\x1b');  // 3 MiB of ESC
  const std::string out = SafeText(huge);
  EXPECT_LE(DisplayWidth(out), kMaxFieldColumns + 32);
  EXPECT_THAT(out, ::testing::EndsWith("(3144704 more bytes)"));
  EXPECT_EQ(SafeCell(huge).size(), 15 * 4 + 3u);
}

TEST(DisplayWidthTest, CountsCharacters) {
  EXPECT_EQ(DisplayWidth(""), 0u);
  EXPECT_EQ(DisplayWidth("abc"), 3u);
  EXPECT_EQ(DisplayWidth("caf\xc3\xa9\xe2\x80\xa6"), 5u);
}

TEST(TableTest, EscapesEveryCell) {
  Table table({"ID", "LABELS"});
  table.AddRow({"g-\x1b[1m", "name=\x1b]0;pwned\x07"});
  EXPECT_EQ(table.Render(),
            "ID         LABELS\n"
            "g-\\x1b[1m  name=\\x1b]0;pwned\\x07\n");
  Table fields = Table::Fields();
  fields.AddRow({"Message:", "a\rb\xc2\x9b"});
  EXPECT_EQ(fields.Render(), "Message:  a\\rb\\u009b\n");
}

TEST(TableTest, AlignsByCharactersNotBytes) {
  Table table({"NAME", "X"});
  table.AddRow({"caf\xc3\xa9", "1"});
  table.AddRow({"tea", "2"});
  EXPECT_EQ(table.Render(),
            "NAME  X\n"
            "caf\xc3\xa9  1\n"
            "tea   2\n");
}

TEST(TableTest, CellsAreCutToTheColumnCap) {
  Table table({"LABELS", "NODE", "REASON"});
  table.AddRow({std::string(1000, 'l'), "n-1", std::string(1000, 'r')});
  table.AddRow({"short", "n-2", "ok"});
  const std::string cut_label = std::string(63, 'l') + "\xe2\x80\xa6";
  const std::string cut_reason = std::string(255, 'r') + "\xe2\x80\xa6";
  EXPECT_EQ(table.Render(), "LABELS" + std::string(60, ' ') + "NODE  REASON\n" +
                                cut_label + "  n-1   " + cut_reason + "\n" +
                                "short" + std::string(61, ' ') + "n-2   ok\n");
}

TEST(TableTest, FieldsAreCutWithANote) {
  Table fields = Table::Fields();
  fields.AddRow({"Message:", std::string(5000, 'm')});
  EXPECT_EQ(fields.Render(), "Message:  " + std::string(4096, 'm') +
                                 "\xe2\x80\xa6 (904 more bytes)\n");
}

TEST(TableTest, OutputDoesNotGrowWithTheLongestCellTimesTheRows) {
  // One huge label used to pad every row of the table to its length.
  Table table({"NODE", "LABELS", "STATE"});
  table.AddRow({"n-0", "big=" + std::string(1 << 20, 'x'), "READY"});
  for (int i = 1; i < 2000; ++i) {
    table.AddRow({absl::StrCat("n-", i), "rack=r1", "READY"});
  }
  const std::string out = table.Render();
  EXPECT_LT(out.size(), 2000u * 100);
  EXPECT_THAT(out, ::testing::HasSubstr("n-1999  rack=r1" +
                                        std::string(57, ' ') + "  READY\n"));
}

TEST(IndentTest, PrefixesNonEmptyLines) {
  EXPECT_EQ(Indent("a\n\nb\n"), "  a\n\n  b\n");
}

struct DurationCase {
  absl::Duration duration;
  std::string want;
};

TEST(HumanDurationTest, Cases) {
  const DurationCase cases[] = {
      {absl::Seconds(-5), "0s"},
      {absl::ZeroDuration(), "0s"},
      {absl::Milliseconds(59999), "59s"},
      {absl::Seconds(60), "1m"},
      {absl::Seconds(303), "5m3s"},
      {absl::Minutes(17) + absl::Seconds(20), "17m"},
      {absl::Hours(3) + absl::Minutes(4), "3h4m"},
      {absl::Hours(5), "5h"},
      {absl::Hours(53), "2d5h"},
      {absl::Hours(48), "2d"},
      {absl::Hours(24 * 12 + 7), "12d"},
  };
  for (const DurationCase& c : cases) {
    EXPECT_EQ(HumanDuration(c.duration), c.want) << c.duration;
  }
}

TEST(TimeTest, FormatsUtcToTheSecond) {
  EXPECT_EQ(
      FormatUtc(absl::FromUnixSeconds(1714564803) + absl::Milliseconds(900)),
      "2024-05-01T12:00:03Z");
}

TEST(TimeTest, TimeAndAge) {
  const absl::Time now = absl::FromUnixSeconds(1714564803);
  google::protobuf::Timestamp past = ToProto(now - absl::Minutes(5));
  google::protobuf::Timestamp future = ToProto(now + absl::Hours(2));
  EXPECT_EQ(TimeAndAge(&past, now), "2024-05-01T11:55:03Z (5m ago)");
  EXPECT_EQ(TimeAndAge(&future, now), "2024-05-01T14:00:03Z (in 2h)");
  EXPECT_EQ(TimeAndAge(nullptr, now), "-");
}

TEST(TimeTest, ProtoRoundTrips) {
  const absl::Time time = absl::FromUnixSeconds(-3) + absl::Milliseconds(250);
  const google::protobuf::Timestamp proto = ToProto(time);
  EXPECT_EQ(proto.seconds(), -3);
  EXPECT_EQ(proto.nanos(), 250000000);
  EXPECT_EQ(FromProto(proto), time);
  const absl::Duration duration = absl::Seconds(3600) + absl::Nanoseconds(7);
  EXPECT_EQ(ToProto(duration).seconds(), 3600);
  EXPECT_EQ(ToProto(duration).nanos(), 7);
  EXPECT_EQ(FromProto(ToProto(duration)), duration);
}

TEST(GpuRangesTest, CollapsesRuns) {
  google::protobuf::RepeatedField<int32_t> gpus;
  EXPECT_EQ(GpuRanges(gpus), "-");
  for (int gpu : {0, 1, 2, 3, 6, 8, 9}) gpus.Add(gpu);
  EXPECT_EQ(GpuRanges(gpus), "0-3,6,8-9");
}

TEST(JoinMapTest, SortsByKey) {
  v1::Queue queue;
  EXPECT_EQ(JoinMap(queue.nominal_gpus()), "-");
  (*queue.mutable_nominal_gpus())["H200"] = 32;
  (*queue.mutable_nominal_gpus())["H100"] = 64;
  EXPECT_EQ(JoinMap(queue.nominal_gpus()), "H100=64,H200=32");
}

TEST(ShortEnumNameTest, StripsPrefix) {
  EXPECT_EQ(ShortEnumName("GANG_STATE_PENDING", "GANG_STATE_"), "PENDING");
  EXPECT_EQ(ShortEnumName("OTHER", "GANG_STATE_"), "OTHER");
}

TEST(ToJsonTest, ProtoNamesAndPrimitiveFields) {
  v1::GetGangResponse response;
  response.mutable_gang()->set_id("g-1");
  response.mutable_gang()->set_state(v1::GANG_STATE_PENDING);
  response.set_revision(7);
  absl::StatusOr<std::string> line = ToJson(response, /*pretty=*/false);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->back(), '\n');
  EXPECT_EQ(line->find('\n'), line->size() - 1) << "one line";
  EXPECT_THAT(*line, ::testing::HasSubstr("\"id\":\"g-1\""));
  EXPECT_THAT(*line, ::testing::HasSubstr("\"state\":\"GANG_STATE_PENDING\""));
  EXPECT_THAT(*line, ::testing::HasSubstr("\"revision\":\"7\""));
  EXPECT_THAT(*line, ::testing::HasSubstr("\"attempts\":0"));
}

TEST(RpcErrorTest, LineAndExitCode) {
  const grpc::Status not_found(grpc::StatusCode::NOT_FOUND,
                               "gang_id: no gang \"g-9\"");
  EXPECT_EQ(RpcErrorLine(not_found),
            "phalanxctl: NOT_FOUND: gang_id: no gang \"g-9\"");
  EXPECT_EQ(ExitCodeFor(not_found), 1);
  EXPECT_EQ(ExitCodeFor(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down")),
            3);
  EXPECT_EQ(ExitCodeFor(grpc::Status::OK), 0);
  EXPECT_EQ(RpcErrorLine(grpc::Status(grpc::StatusCode::ABORTED, "")),
            "phalanxctl: ABORTED");
}

TEST(ToJsonTest, EscapesTerminalControls) {
  v1::GetGangResponse response;
  (*response.mutable_gang()->mutable_spec()->mutable_labels())["name"] =
      "\x1b]0;pwned\x07 \xc2\x9b \xe2\x80\xae \x7f";
  absl::StatusOr<std::string> json = ToJson(response, /*pretty=*/true);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, ::testing::HasSubstr(
                         "\\u001b]0;pwned\\u0007 \\u009b \\u202e \\u007f"));
  for (char c : *json) {
    EXPECT_FALSE((c >= 0 && c < 0x20 && c != '\n') || c == 0x7f);
  }
}

TEST(RpcErrorTest, EscapesAndCutsTheMessage) {
  const grpc::Status status(grpc::StatusCode::NOT_FOUND,
                            "no gang \"\x1b[2J\"" + std::string(9000, 'z'));
  const std::string line = RpcErrorLine(status);
  EXPECT_THAT(line, ::testing::StartsWith(
                        "phalanxctl: NOT_FOUND: no gang \"\\x1b[2J\"zzz"));
  EXPECT_THAT(line, ::testing::EndsWith("more bytes)"));
  EXPECT_LT(line.size(), 4200u);
}

TEST(RpcErrorTest, AReplyOverTheLimitNamesTheFlag) {
  const grpc::Status status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            "Received message larger than max (5000 vs. 1024)");
  EXPECT_EQ(RpcErrorLine(status),
            "phalanxctl: RESOURCE_EXHAUSTED: Received message larger than max "
            "(5000 vs. 1024) (raise --max-message-bytes)");
}

TEST(RpcErrorTest, EveryCodeHasItsName) {
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::DEADLINE_EXCEEDED),
            "DEADLINE_EXCEEDED");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::FAILED_PRECONDITION),
            "FAILED_PRECONDITION");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::UNAUTHENTICATED),
            "UNAUTHENTICATED");
  EXPECT_EQ(StatusCodeName(42), "CODE_42");
}

}  // namespace
}  // namespace phalanx::ctl

namespace phalanx::ctl {
namespace {

TEST(ToYamlTest, BlockStyleWithQuotedStrings) {
  v1::Gang gang;
  gang.set_id("g-1");
  gang.set_reason("a \"quoted\"\n\x1b[31m reason");
  gang.mutable_spec()->set_queue("a");
  (*gang.mutable_spec()->mutable_labels())["team/x y"] = "v";
  gang.add_placement()->set_node("n-1");
  gang.mutable_placement(0)->add_gpu_indices(3);
  absl::StatusOr<std::string> yaml = ToYaml(gang);
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  EXPECT_THAT(*yaml, ::testing::HasSubstr("id: \"g-1\"\n"));
  EXPECT_THAT(*yaml, ::testing::HasSubstr("spec:\n  queue: \"a\"\n"));
  EXPECT_THAT(*yaml, ::testing::HasSubstr("    \"team/x y\": \"v\"\n"));
  EXPECT_THAT(*yaml,
              ::testing::HasSubstr("placement:\n  -\n    pod_set: \"\""));
  EXPECT_THAT(*yaml, ::testing::HasSubstr("gpu_indices:\n      - 3\n"));
  EXPECT_THAT(*yaml, ::testing::HasSubstr(
                         "reason: \"a \\\"quoted\\\"\\n\\u001b[31m reason\""));
  EXPECT_EQ(yaml->find('\x1b'), std::string::npos);
}

TEST(FixedDecimalTest, NeverAnExponent) {
  EXPECT_EQ(FixedDecimal(0.5625), "0.5625");
  EXPECT_EQ(FixedDecimal(2), "2");
  EXPECT_EQ(FixedDecimal(1e-05), "0.00001");
  EXPECT_EQ(FixedDecimal(1e-09), "0");
  EXPECT_EQ(FixedDecimal(-0.0), "0");
  EXPECT_EQ(FixedDecimal(1234567.25), "1234567.25");
}

}  // namespace
}  // namespace phalanx::ctl
