#include "proto/startup_files.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace phalanx::convert {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'700'000'000);

std::unique_ptr<core::Scheduler> Fresh() {
  return *core::Scheduler::Restore(core::LoadedState(), kNow);
}

StartupFiles Files(const char* config, const char* fleet, const char* queues) {
  StartupFiles files;
  if (config) files.config = *ConfigFromJson(config);
  if (fleet) files.fleet = *FleetFromJson(fleet);
  if (queues) files.queues = *QueuesFromJson(queues);
  return files;
}

constexpr char kConfig[] = R"({"topologyLevels": ["rack"]})";
constexpr char kFleet[] = R"({"nodes": [{"id": "n1", "gpuModel": "H100",
  "gpuCount": 8, "labels": {"rack": "r1"}}]})";

TEST(StartupFilesTest, NotJsonOfTheMessageIsInvalidArgument) {
  EXPECT_EQ(ConfigFromJson("{").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FleetFromJson(R"({"nodes": 3})").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(QueuesFromJson(R"({"queue": []})").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StartupFilesTest, AppliesConfigThenFleetThenQueuesParentsFirst) {
  auto s = Fresh();
  ASSERT_TRUE(ApplyStartupFiles(*s, Files(kConfig, kFleet, R"({"queues": [
                                  {"name": "child", "parent": "root"},
                                  {"name": "root"}]})"),
                                kNow)
                  .ok());
  EXPECT_EQ(s->config().topology_levels, std::vector<std::string>{"rack"});
  EXPECT_EQ(s->fleet().slots().size(), 1u);
  EXPECT_EQ(s->queues().size(), 2u);
  // The same files apply again (a restart with the same flags).
  ASSERT_TRUE(
      ApplyStartupFiles(*s, Files(kConfig, kFleet, nullptr), kNow).ok());
  EXPECT_EQ(s->fleet().slots().size(), 1u);
}

TEST(StartupFilesTest, ErrorsNameTheFlagAndTheField) {
  auto s = Fresh();
  absl::Status status = ApplyStartupFiles(
      *s,
      Files(kConfig,
            R"({"nodes": [{"id": "n1", "gpuModel": "H100", "gpuCount": -1,
                "labels": {"rack": "r1"}}]})",
            nullptr),
      kNow);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(status.message(), "--fleet: nodes[0]"))
      << status;
  status = ApplyStartupFiles(
      *s,
      Files(nullptr, nullptr, R"({"queues": [{"name": "a", "parent": "b"}]})"),
      kNow);
  EXPECT_TRUE(absl::StartsWith(status.message(), "--queues: ")) << status;
}

}  // namespace
}  // namespace phalanx::convert
