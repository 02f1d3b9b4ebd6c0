#include "clients/node_agent/agent_flags.h"

#include "gtest/gtest.h"

namespace phalanx::node_agent {
namespace {

const AgentDefaults kNoGpus{"host-7", "/nonexistent"};

TEST(AgentFlagsTest, DefaultsWithoutNvidiaSmiAreHeartbeatsOnly) {
  absl::StatusOr<AgentCommandLine> line = ParseAgentFlags({}, kNoGpus);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->options.node_id, "host-7");
  EXPECT_EQ(line->options.health_command, "");
  EXPECT_EQ(line->options.heartbeat_interval, absl::Seconds(10));
  EXPECT_EQ(line->options.passes_to_recover, 3);
}

TEST(AgentFlagsTest, EveryFlagLandsInItsField) {
  absl::StatusOr<AgentCommandLine> line = ParseAgentFlags(
      {"--server", "127.0.0.1:7000", "--node-id", "n1", "--token-file", "t",
       "--health-command", "check.sh", "--health-interval", "2s",
       "--health-timeout", "500ms", "--heartbeat-interval", "1s",
       "--passes-to-recover", "2", "--call-timeout", "3s"},
      kNoGpus);
  ASSERT_TRUE(line.ok()) << line.status();
  const AgentOptions& o = line->options;
  EXPECT_EQ(o.connection.server, "127.0.0.1:7000");
  EXPECT_EQ(o.connection.token_file, "t");
  EXPECT_EQ(o.node_id, "n1");
  EXPECT_EQ(o.health_command, "check.sh");
  EXPECT_EQ(o.health_interval, absl::Seconds(2));
  EXPECT_EQ(o.health_timeout, absl::Milliseconds(500));
  EXPECT_EQ(o.heartbeat_interval, absl::Seconds(1));
  EXPECT_EQ(o.passes_to_recover, 2);
  EXPECT_EQ(o.call_timeout, absl::Seconds(3));
}

TEST(AgentFlagsTest, NoneTurnsTheHealthCheckOff) {
  absl::StatusOr<AgentCommandLine> line =
      ParseAgentFlags({"--health-command", "none"}, kNoGpus);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->options.health_command, "");
}

TEST(AgentFlagsTest, BadValuesNameTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string want;
  };
  for (const Case& c : std::vector<Case>{
           {{"--health-interval", "soon"}, "--health-interval: "},
           {{"--passes-to-recover", "0"}, "--passes-to-recover"},
           {{"--tls-cert", "c"}, "--tls-cert and --tls-key go together"},
           {{"--server", "10.0.0.1:50051", "--token-file", "t"},
            "not loopback"},
           {{"--unknown"}, "--unknown"}}) {
    absl::StatusOr<AgentCommandLine> line = ParseAgentFlags(c.args, kNoGpus);
    ASSERT_FALSE(line.ok()) << c.want;
    EXPECT_EQ(line.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(line.status().message().find(c.want), std::string::npos)
        << line.status().message();
  }
}

TEST(AgentFlagsTest, HelpIsNotAnError) {
  absl::StatusOr<AgentCommandLine> line = ParseAgentFlags({"--help"}, kNoGpus);
  ASSERT_TRUE(line.ok());
  EXPECT_NE(line->help.find("--health-command"), std::string::npos);
}

}  // namespace
}  // namespace phalanx::node_agent
