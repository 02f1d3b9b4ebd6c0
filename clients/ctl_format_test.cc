#include "clients/ctl_format.h"

#include <string>

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

TEST(RpcErrorTest, EveryCodeHasItsName) {
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::DEADLINE_EXCEEDED),
            "DEADLINE_EXCEEDED");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::FAILED_PRECONDITION),
            "FAILED_PRECONDITION");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::UNAUTHENTICATED),
            "UNAUTHENTICATED");
  EXPECT_EQ(StatusCodeName(static_cast<grpc::StatusCode>(42)), "CODE_42");
}

}  // namespace
}  // namespace phalanx::ctl
