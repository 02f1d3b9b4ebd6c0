#include "proto/field_mask.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "phalanx/v1/types.pb.h"

namespace phalanx::convert {
namespace {

using ::testing::HasSubstr;

google::protobuf::FieldMask Mask(std::initializer_list<const char*> paths) {
  google::protobuf::FieldMask mask;
  for (const char* path : paths) mask.add_paths(path);
  return mask;
}

TEST(FieldMaskTest, CheckNamesTheBadPath) {
  const auto& config = *v1::Config::descriptor();
  EXPECT_TRUE(CheckFieldMask(Mask({"preemption.enabled", "limits",
                                   "topology_levels", "priority_classes"}),
                             config, {"version"}, "update_mask")
                  .ok());
  struct Case {
    const char* path;
    const char* error;
  };
  for (const Case& c : {Case{"preemption.nope",
                             "update_mask.paths[1]: "
                             "\"preemption.nope\" is not a "
                             "field of phalanx.v1.Config"},
                        Case{"version",
                             "update_mask.paths[1]: \"version\" "
                             "cannot be set (output only)"},
                        Case{"priority_classes.x", "is not a field"},
                        Case{"", "update_mask.paths[1]: empty path"}}) {
    absl::Status status = CheckFieldMask(Mask({"limits", c.path}), config,
                                         {"version"}, "update_mask");
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.path;
    EXPECT_THAT(status.message(), HasSubstr(c.error)) << c.path;
  }
  EXPECT_FALSE(CheckFieldMask(Mask({"status.pending_gangs"}),
                              *v1::Queue::descriptor(), {"name", "status"},
                              "update_mask")
                   .ok());
}

TEST(FieldMaskTest, ApplyCopiesOnlyTheNamedFieldsAndClearsUnsetOnes) {
  v1::Queue current;
  current.set_name("q");
  current.set_weight(3);
  current.set_held(true);
  current.set_max_priority(10);
  (*current.mutable_nominal_gpus())["H100"] = 8;
  v1::Queue patch;
  patch.set_held(false);
  patch.set_weight(9);
  (*patch.mutable_nominal_gpus())["H200"] = 4;
  ApplyFieldMask(Mask({"held", "max_priority", "nominal_gpus"}), patch,
                 &current);
  EXPECT_FALSE(current.held());
  EXPECT_FALSE(current.has_max_priority());   // named but unset: cleared
  EXPECT_EQ(current.weight(), 3);             // not named
  ASSERT_EQ(current.nominal_gpus_size(), 1);  // a map is replaced
  EXPECT_EQ(current.nominal_gpus().at("H200"), 4);
  EXPECT_EQ(current.name(), "q");
}

TEST(FieldMaskTest, ANamedMessageIsReplacedWhole) {
  v1::Config current;
  current.mutable_preemption()->set_enabled(true);
  current.mutable_preemption()->mutable_grace_period()->set_seconds(60);
  current.mutable_cycle_interval()->set_seconds(2);
  v1::Config patch;
  patch.mutable_preemption()->mutable_horizon()->set_seconds(5);
  ApplyFieldMask(Mask({"preemption"}), patch, &current);
  EXPECT_FALSE(current.preemption().enabled());
  EXPECT_FALSE(current.preemption().has_grace_period());
  EXPECT_EQ(current.preemption().horizon().seconds(), 5);
  EXPECT_EQ(current.cycle_interval().seconds(), 2);
}

}  // namespace
}  // namespace phalanx::convert
