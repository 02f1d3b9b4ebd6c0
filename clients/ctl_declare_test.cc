#include "clients/ctl_declare.h"

#include <string>

#include "clients/ctl_requests.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::ctl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Declared DeclaredFrom(std::initializer_list<const char*> files) {
  Declared declared;
  int i = 0;
  for (const char* text : files) {
    const std::string path = "f" + std::to_string(i++) + ".json";
    absl::Status status = AddDeclaredFile(text, path, declared);
    EXPECT_TRUE(status.ok()) << status;
  }
  return declared;
}

template <typename T>
T Parse(const char* json) {
  absl::StatusOr<T> message = ParseJson<T>(json, "in force");
  EXPECT_TRUE(message.ok()) << message.status();
  return *message;
}

TEST(DeclaredFileTest, KindComesFromTheTopLevelKeys) {
  Declared declared = DeclaredFrom(
      {R"({"nodes":[{"id":"n1","gpuCount":8}]})",
       R"({"queues":[{"name":"a","weight":2,"held":false}]})",
       R"({"cycle_interval":"1s","preemption":{"enabled":true}})"});
  ASSERT_EQ(declared.nodes.size(), 1u);
  EXPECT_THAT(declared.nodes[0].fields, ElementsAre("id", "gpu_count"));
  ASSERT_EQ(declared.queues.size(), 1u);
  EXPECT_THAT(declared.queues[0].fields, ElementsAre("name", "weight", "held"));
  ASSERT_TRUE(declared.config.has_value());
  // A message given as an object names the fields inside it.
  EXPECT_THAT(declared.config->fields,
              ElementsAre("cycle_interval", "preemption.enabled"));
}

TEST(DeclaredFileTest, BadFilesAreRefusedNamingFileAndItem) {
  struct Case {
    const char* name;
    const char* text;
    const char* error;
  };
  const Case cases[] = {
      {"not an object", "[1]", "q.json: not a JSON object"},
      {"not the message", R"({"queues":[{"nope":1}]})", "q.json: not a valid"},
      {"no name", R"({"queues":[{"weight":1}]})", "q.json: queues[0]: has no"},
      {"twice", R"({"queues":[{"name":"a"},{"name":"a"}]})",
       "q.json: queues[1]: \"a\" is declared twice"},
      {"output only", R"({"nodes":[{"id":"n","gangIds":["g-1"]}]})",
       "q.json: nodes[0]: gang_ids: is set by the server"},
  };
  for (const Case& c : cases) {
    Declared declared;
    absl::Status status = AddDeclaredFile(c.text, "q.json", declared);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.error)) << c.name;
  }
  Declared two = DeclaredFrom({R"({"cycleInterval":"1s"})"});
  EXPECT_THAT(std::string(AddDeclaredFile("{}", "c2.json", two).message()),
              HasSubstr("c2.json: a second config file"));
}

TEST(PlanChangesTest, ConfigChangesOnlyNamedFieldsThatDifferAtItsVersion) {
  const auto config = Parse<v1::Config>(
      R"({"version":"4","cycleInterval":"0.2s","topologyLevels":["rack"]})");
  const Declared declared = DeclaredFrom(
      {R"({"cycleInterval":"0.25s","topologyLevels":["rack"],"version":"9"})"});
  const Plan plan = PlanChanges(declared, config, {}, {});
  ASSERT_TRUE(plan.config.has_value());
  EXPECT_THAT(plan.config->update_mask().paths(),
              ElementsAre("cycle_interval"));
  EXPECT_EQ(plan.config->expected_version(), 4);
  EXPECT_EQ(PlanText(plan),
            "~ config (version 4)\n"
            "    cycle_interval: \"0.200s\" -> \"0.250s\"\n");
}

TEST(PlanChangesTest, ANestedFieldIsMaskedAloneAndItsSiblingsKept) {
  const auto config = Parse<v1::Config>(
      R"({"version":"2","preemption":{"enabled":true,"gracePeriod":"30s"}})");
  const Declared declared =
      DeclaredFrom({R"({"preemption":{"enabled":false}})"});
  const Plan plan = PlanChanges(declared, config, {}, {});
  ASSERT_TRUE(plan.config.has_value());
  EXPECT_THAT(plan.config->update_mask().paths(),
              ElementsAre("preemption.enabled"));
  EXPECT_EQ(PlanText(plan),
            "~ config (version 2)\n"
            "    preemption.enabled: true -> false\n");
}

TEST(PlanChangesTest, NodesGoFirstWhenTheConfigAddsALevel) {
  const auto config =
      Parse<v1::Config>(R"({"version":"1","topologyLevels":["rack"]})");
  EXPECT_TRUE(
      PlanChanges(DeclaredFrom({R"({"topologyLevels":["block","rack"]})"}),
                  config, {}, {})
          .nodes_first);
  EXPECT_FALSE(
      PlanChanges(DeclaredFrom({R"({"topologyLevels":[]})"}), config, {}, {})
          .nodes_first);
}

TEST(PlanChangesTest, QueuesAreMaskedAndNewParentsComeFirst) {
  const auto queues = Parse<v1::ListQueuesResponse>(
      R"({"queues":[{"name":"llm","weight":3,"held":true}]})");
  const Declared declared =
      DeclaredFrom({R"({"queues":[{"name":"child","parent":"team"},)"
                    R"({"name":"llm","weight":7},{"name":"team"}]})"});
  const Plan plan = PlanChanges(declared, {}, queues, {});
  ASSERT_EQ(plan.queues.size(), 3u);
  // The change of llm leaves `held`, which the file does not name, alone.
  EXPECT_EQ(plan.queues[0].queue().name(), "llm");
  EXPECT_THAT(plan.queues[0].update_mask().paths(), ElementsAre("weight"));
  EXPECT_EQ(plan.queues[1].queue().name(), "team");
  EXPECT_EQ(plan.queues[2].queue().name(), "child");
  EXPECT_FALSE(plan.queues[2].has_update_mask());
  EXPECT_EQ(PlanText(plan),
            "+ queue child\n"
            "    parent: \"team\"\n"
            "~ queue llm\n"
            "    weight: 3 -> 7\n"
            "+ queue team\n");
}

TEST(PlanChangesTest, NodesMergeOntoTheNodeInForceAndKeepItsState) {
  const auto nodes = Parse<v1::ListNodesResponse>(
      R"({"nodes":[{"id":"n1","gpuModel":"H100","gpuCount":8,)"
      R"("labels":{"rack":"r1"},"address":"10.0.0.1",)"
      R"("state":"NODE_STATE_CORDONED","gangIds":["g-1"]}]})");
  const Declared declared = DeclaredFrom(
      {R"({"nodes":[{"id":"n1","gpuCount":4,"state":"NODE_STATE_READY"},)"
       R"({"id":"n2","gpuModel":"H200","gpuCount":8}]})"});
  const Plan plan = PlanChanges(declared, {}, {}, nodes);
  ASSERT_TRUE(plan.nodes.has_value());
  ASSERT_EQ(plan.nodes->nodes_size(), 2u);
  const v1::Node& merged = plan.nodes->nodes(0);
  EXPECT_EQ(merged.gpu_count(), 4);
  EXPECT_EQ(merged.gpu_model(), "H100");
  EXPECT_EQ(merged.labels().at("rack"), "r1");
  EXPECT_EQ(merged.address(), "10.0.0.1");
  EXPECT_EQ(merged.state(), v1::NODE_STATE_UNSPECIFIED);  // kept as it is
  EXPECT_EQ(merged.gang_ids_size(), 0);
  EXPECT_EQ(plan.nodes->nodes(1).id(), "n2");
  ASSERT_EQ(plan.changes.size(), 2u);
  EXPECT_THAT(plan.changes[0].fields,
              ElementsAre(FieldChange{"gpu_count", "8", "4"}));
}

TEST(PlanChangesTest, NothingDifferentIsNoChanges) {
  const auto queues =
      Parse<v1::ListQueuesResponse>(R"({"queues":[{"name":"a","weight":1}]})");
  const Plan plan =
      PlanChanges(DeclaredFrom({R"({"queues":[{"name":"a","weight":1}]})"}), {},
                  queues, {});
  EXPECT_TRUE(plan.changes.empty());
  EXPECT_TRUE(plan.queues.empty());
  EXPECT_EQ(PlanText(plan), "no changes\n");
}

TEST(ConfigSetRequestTest, UpdateMaskOrMergeNamesTheFieldsToChange) {
  ConfigSetOptions options;
  options.file = "c.json";
  const char* text = R"({"cycleInterval":"1s","preemption":{},"version":"3"})";
  options.merge = true;
  absl::StatusOr<v1::UpdateConfigRequest> merged =
      BuildUpdateConfigRequest(options, text);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_THAT(merged->update_mask().paths(),
              ElementsAre("cycle_interval", "preemption"));
  absl::StatusOr<v1::UpdateConfigRequest> nested = BuildUpdateConfigRequest(
      options, R"({"preemption":{"enabled":false,"gracePeriod":"10s"}})");
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_THAT(nested->update_mask().paths(),
              ElementsAre("preemption.enabled", "preemption.grace_period"));

  options.merge = false;
  options.update_mask = std::vector<std::string>{"preemption.enabled"};
  absl::StatusOr<v1::UpdateConfigRequest> masked =
      BuildUpdateConfigRequest(options, text);
  ASSERT_TRUE(masked.ok()) << masked.status();
  EXPECT_THAT(masked->update_mask().paths(), ElementsAre("preemption.enabled"));

  options.merge = true;
  EXPECT_THAT(
      std::string(BuildUpdateConfigRequest(options, text).status().message()),
      HasSubstr("--merge"));
  options.update_mask.reset();
  EXPECT_FALSE(BuildUpdateConfigRequest(options, R"({"version":"3"})").ok());
  // Without either, the request replaces the whole config, as before.
  options.merge = false;
  EXPECT_FALSE(BuildUpdateConfigRequest(options, text)->has_update_mask());
}

}  // namespace
}  // namespace phalanx::ctl
