#include "core/validate.h"

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/saturating.h"
#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using testing::Spec;

const LimitsConfig kLimits;

TEST(ValidateTest, AcceptsAPlainSpec) {
  EXPECT_TRUE(
      ValidateGangSpec(Spec("q").Pods(2, 8).Required("rack"), kLimits, "spec")
          .ok());
}

TEST(ValidateTest, NamesTheBadField) {
  GangSpec spec = Spec("q").Pods(1, 8).Pods(1, 65);
  absl::Status status = ValidateGangSpec(spec, kLimits, "spec");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "spec.pod_sets[1].gpus: must be in 0..64");

  spec = Spec("q").Pods(1, 8, "w").Pods(1, 8, "w");
  EXPECT_EQ(ValidateGangSpec(spec, kLimits, "spec").message(),
            "spec.pod_sets[1].name: duplicate pod set name \"w\"");

  spec = Spec("q").Pods(1, 0);
  EXPECT_EQ(ValidateGangSpec(spec, kLimits, "spec").message(),
            "spec.pod_sets[0].gpus: a pod must request GPUs, CPU or memory");

  spec = Spec("q").Pods(1, 8);
  spec.pod_sets[0].topology.mode = TopologyMode::kRequired;
  EXPECT_EQ(ValidateGangSpec(spec, kLimits, "spec").message(),
            "spec.pod_sets[0].topology.level: required for REQUIRED and "
            "PREFERRED");

  spec = Spec("").Pods(1, 8);
  EXPECT_EQ(ValidateGangSpec(spec, kLimits, "spec").message(),
            "spec.queue: must not be empty");

  spec = Spec("q").Pods(6, 8).Slices(4, "rack");
  EXPECT_EQ(ValidateGangSpec(spec, kLimits, "spec").message(),
            "spec.pod_sets[0].slice.size: must divide count (6)");
  spec = Spec("q").Pods(1, 8).Required("rack").Group("g").Pods(1, 8).Group("g");
  EXPECT_EQ(ValidateGangSpec(spec, kLimits, "spec").message(),
            "spec.pod_sets[1].topology: must equal that of pod set \"set-0\" "
            "in group \"g\"");
  spec = Spec("q").Pods(1, 8).Required("node").Group("g");
  EXPECT_EQ(ValidateGangSpec(spec, kLimits, "spec").message(),
            "spec.pod_sets[0].group: a group shares a domain above the node "
            "level, not \"node\"");
  spec = Spec("q").Pods(6, 8).Slices(2, "");
  EXPECT_EQ(ValidateGangSpec(spec, kLimits, "spec").message(),
            "spec.pod_sets[0].slice.level: required when slice.size is set");
}

TEST(ValidateTest, NodeAndConfigErrorsNameTheField) {
  NodeSpec node;
  node.id = NodeId("n1");
  node.gpu_model = "H100";
  node.gpu_count = 0;
  EXPECT_EQ(ValidateNodeSpec(node, kLimits, "nodes[2]").message(),
            "nodes[2].gpu_count: must be in 1..64");
  Config config;
  config.topology_levels = {"rack", "rack"};
  EXPECT_EQ(ValidateConfig(config, "config").message(),
            "config.topology_levels[1]: duplicate level \"rack\"");
}

std::string Bytes(size_t n, char c = 'a') { return std::string(n, c); }

TEST(QuoteForErrorTest, CutsAt64BytesAndEscapes) {
  EXPECT_EQ(QuoteForError("abc"), "\"abc\"");
  EXPECT_EQ(QuoteForError(Bytes(63)), "\"" + Bytes(63) + "\"");
  EXPECT_EQ(QuoteForError(Bytes(64)), "\"" + Bytes(64) + "\"");
  EXPECT_EQ(QuoteForError(Bytes(65)), "\"" + Bytes(64) + "\"... (65 bytes)");
  EXPECT_EQ(QuoteForError(Bytes(1 << 20)),
            "\"" + Bytes(64) + "\"... (1048576 bytes)");
  EXPECT_EQ(QuoteForError("a\"b\\c\nd\x01\x7f"),
            "\"a\\\"b\\\\c\\nd\\x01\\x7f\"");
  // "é" is two bytes: a cut inside it backs off to the character before.
  const std::string accented = Bytes(63) + "\xc3\xa9" + "z";
  EXPECT_EQ(QuoteForError(accented), "\"" + Bytes(63) + "\"... (66 bytes)");
}

// One case of a limit: the input and the error it gets ("" = accepted).
struct LimitCase {
  std::string name;
  GangSpec spec;
  std::string error;
};

GangSpec WithLabels(std::map<std::string, std::string> labels) {
  GangSpec spec = Spec("q").Pods(1, 8);
  spec.labels = std::move(labels);
  return spec;
}

std::map<std::string, std::string> NLabels(int n) {
  std::map<std::string, std::string> labels;
  // emplace, not labels[key] = "v": GCC 12 at -O3 reports a false
  // -Wrestrict inside that std::string assignment.
  for (int i = 0; i < n; ++i) labels.emplace(absl::StrCat("k", i), "v");
  return labels;
}

TEST(ValidateLimitsTest, GangSpecLimitsBelowAtAndAbove) {
  GangSpec runtime = Spec("q").Pods(1, 8);
  runtime.max_runtime = -absl::Nanoseconds(1);
  const std::vector<LimitCase> cases = {
      {"31 labels", WithLabels(NLabels(31)), ""},
      {"32 labels", WithLabels(NLabels(32)), ""},
      {"33 labels", WithLabels(NLabels(33)),
       "spec.labels: at most 32 labels, not 33"},
      {"key of 62 bytes", WithLabels({{Bytes(62), "v"}}), ""},
      {"key of 63 bytes", WithLabels({{Bytes(63), "v"}}), ""},
      {"key of 64 bytes", WithLabels({{Bytes(64), "v"}}),
       "spec.labels[\"" + Bytes(64) + "\"]: key longer than 63 bytes"},
      {"key of 1 MiB", WithLabels({{Bytes(1 << 20), "v"}}),
       "spec.labels[\"" + Bytes(64) +
           "\"... (1048576 bytes)]: key longer than 63 bytes"},
      {"empty key", WithLabels({{"", "v"}}),
       "spec.labels[\"\"]: key must not be empty"},
      {"key with a slash", WithLabels({{"example.com/team", "v"}}), ""},
      {"key with a space", WithLabels({{"a b", "v"}}),
       "spec.labels[\"a b\"]: key may hold only letters, digits, '.', '_', "
       "'/' and '-'"},
      {"value of 255 bytes", WithLabels({{"k", Bytes(255)}}), ""},
      {"value of 256 bytes", WithLabels({{"k", Bytes(256)}}), ""},
      {"value of 257 bytes", WithLabels({{"k", Bytes(257)}}),
       "spec.labels[\"k\"]: value longer than 256 bytes"},
      {"value of 3 MiB", WithLabels({{"k", Bytes(3 << 20)}}),
       "spec.labels[\"k\"]: value longer than 256 bytes"},
      {"request id of 127 bytes", Spec("q").Pods(1, 8).RequestId(Bytes(127)),
       ""},
      {"request id of 128 bytes", Spec("q").Pods(1, 8).RequestId(Bytes(128)),
       ""},
      {"request id of 129 bytes", Spec("q").Pods(1, 8).RequestId(Bytes(129)),
       "spec.request_id: longer than 128 bytes (129)"},
      {"request id with a space", Spec("q").Pods(1, 8).RequestId("a b"),
       "spec.request_id: \"a b\" may hold only printable ASCII without "
       "spaces"},
      {"request id with a newline", Spec("q").Pods(1, 8).RequestId("a\nb"),
       "spec.request_id: \"a\\nb\" may hold only printable ASCII without "
       "spaces"},
      {"upper-case queue", Spec("ABC").Pods(1, 8),
       "spec.queue: \"ABC\" may hold only lower-case letters, digits, '.', "
       "'_' and '-'"},
      {"queue of 63 bytes", Spec(Bytes(63)).Pods(1, 8), ""},
      {"queue of 64 bytes", Spec(Bytes(64)).Pods(1, 8),
       "spec.queue: must be at most 63 bytes"},
      {"negative max_runtime", runtime, "spec.max_runtime: must be >= 0"},
  };
  for (const LimitCase& c : cases) {
    absl::Status status = ValidateGangSpec(c.spec, kLimits, "spec");
    if (c.error.empty()) {
      EXPECT_TRUE(status.ok()) << c.name << ": " << status;
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.name;
      EXPECT_EQ(status.message(), c.error) << c.name;
    }
  }
}

TEST(ValidateLimitsTest, ConfiguredLimitsApply) {
  LimitsConfig limits;
  limits.max_labels = 2;
  limits.max_label_key_bytes = 3;
  limits.max_label_value_bytes = 4;
  limits.max_id_bytes = 40;
  EXPECT_TRUE(
      ValidateGangSpec(WithLabels({{"abc", "wxyz"}, {"b", ""}}), limits, "spec")
          .ok());
  EXPECT_EQ(ValidateGangSpec(WithLabels(NLabels(3)), limits, "spec").message(),
            "spec.labels: at most 2 labels, not 3");
  EXPECT_EQ(
      ValidateGangSpec(WithLabels({{"abcd", "v"}}), limits, "spec").message(),
      "spec.labels[\"abcd\"]: key longer than 3 bytes");
  EXPECT_EQ(
      ValidateGangSpec(WithLabels({{"k", "vwxyz"}}), limits, "spec").message(),
      "spec.labels[\"k\"]: value longer than 4 bytes");
  EXPECT_TRUE(ValidateId(Bytes(40), limits, "gang_id").ok());
  EXPECT_EQ(ValidateId(Bytes(41), limits, "gang_id").message(),
            "gang_id: longer than 40 bytes (41)");
}

TEST(ValidateLimitsTest, IdsAndMessages) {
  EXPECT_EQ(ValidateId("", kLimits, "gang_id").message(),
            "gang_id: must not be empty");
  EXPECT_TRUE(ValidateId(Bytes(127), kLimits, "gang_id").ok());
  EXPECT_TRUE(ValidateId(Bytes(128), kLimits, "gang_id").ok());
  EXPECT_EQ(ValidateId(Bytes(129), kLimits, "gang_id").message(),
            "gang_id: longer than 128 bytes (129)");
  EXPECT_EQ(ValidateId(Bytes(1 << 20), kLimits, "node_ids[3]").message(),
            "node_ids[3]: longer than 128 bytes (1048576)");
  EXPECT_EQ(ValidateId("g-1\x01", kLimits, "gang_id").message(),
            "gang_id: \"g-1\\x01\" may hold only printable ASCII without "
            "spaces");
  EXPECT_TRUE(ValidateId("g-000001", kLimits, "gang_id").ok());
  EXPECT_TRUE(ValidateMessage("", kLimits, "reason").ok());
  EXPECT_TRUE(ValidateMessage(Bytes(1023), kLimits, "reason").ok());
  EXPECT_TRUE(ValidateMessage(Bytes(1024), kLimits, "reason").ok());
  EXPECT_EQ(ValidateMessage(Bytes(1025), kLimits, "message").message(),
            "message: longer than 1024 bytes (1025)");
}

NodeSpec NodeWithLabels(std::map<std::string, std::string> labels) {
  NodeSpec node;
  node.id = NodeId("n1");
  node.gpu_model = "H100";
  node.gpu_count = 8;
  node.labels = std::move(labels);
  return node;
}

TEST(ValidateLimitsTest, NodeLimitsBelowAtAndAbove) {
  EXPECT_TRUE(
      ValidateNodeSpec(NodeWithLabels(NLabels(32)), kLimits, "nodes[0]").ok());
  EXPECT_EQ(ValidateNodeSpec(NodeWithLabels(NLabels(33)), kLimits, "nodes[0]")
                .message(),
            "nodes[0].labels: at most 32 labels, not 33");
  EXPECT_TRUE(
      ValidateNodeSpec(NodeWithLabels({{"rack", Bytes(256)}}), kLimits, "n")
          .ok());
  EXPECT_EQ(
      ValidateNodeSpec(NodeWithLabels({{"rack", Bytes(257)}}), kLimits, "n")
          .message(),
      "n.labels[\"rack\"]: value longer than 256 bytes");
  EXPECT_EQ(ValidateNodeSpec(NodeWithLabels({{"rack", "a/b"}}), kLimits, "n")
                .message(),
            "n.labels[\"rack\"]: must be non-empty and hold no '/'");
  NodeSpec node = NodeWithLabels({});
  node.id = NodeId(Bytes(63));
  EXPECT_TRUE(ValidateNodeSpec(node, kLimits, "n").ok());
  node.id = NodeId(Bytes(64));
  EXPECT_EQ(ValidateNodeSpec(node, kLimits, "n").message(),
            "n.id: must be at most 63 bytes");
  node.id = NodeId(Bytes(3 << 20));
  EXPECT_EQ(ValidateNodeSpec(node, kLimits, "n").message(),
            "n.id: longer than 128 bytes (3145728)");
}

TEST(ValidateLimitsTest, QueueNamesAndQuotas) {
  Queue queue;
  queue.name = QueueName("team-a.b_c9");
  EXPECT_TRUE(ValidateQueue(queue, kLimits, "queue").ok());
  queue.name = QueueName("ABC");
  EXPECT_EQ(ValidateQueue(queue, kLimits, "queue").message(),
            "queue.name: \"ABC\" may hold only lower-case letters, digits, "
            "'.', '_' and '-'");
  queue.name = QueueName("abc");
  queue.parent = QueueName("Cohort");
  EXPECT_EQ(ValidateQueue(queue, kLimits, "queue").message(),
            "queue.parent: \"Cohort\" may hold only lower-case letters, "
            "digits, '.', '_' and '-'");
  queue.parent = QueueName();
  const int64_t max = int64_t{1} << 40;
  for (int64_t gpus : {max - 1, max}) {
    queue.nominal_gpus = {{"H100", gpus}};
    EXPECT_TRUE(ValidateQueue(queue, kLimits, "queue").ok()) << gpus;
  }
  for (int64_t gpus :
       {max + 1, std::numeric_limits<int64_t>::max(), int64_t{-1}}) {
    queue.nominal_gpus = {{"H100", gpus}};
    EXPECT_EQ(ValidateQueue(queue, kLimits, "queue").message(),
              "queue.nominal_gpus[\"H100\"]: must be in 0..1099511627776")
        << gpus;
  }
  queue.nominal_gpus = {{"H 100", 1}};
  EXPECT_EQ(ValidateQueue(queue, kLimits, "queue").message(),
            "queue.nominal_gpus[\"H 100\"]: \"H 100\" may hold only letters, "
            "digits, '.', '_' and '-'");
  queue.nominal_gpus = {};
  for (int64_t limit : {int64_t{-1}, int64_t{0}, max}) {
    queue.borrowing_limit_gpus = limit;
    queue.lending_limit_gpus = limit;
    EXPECT_TRUE(ValidateQueue(queue, kLimits, "queue").ok()) << limit;
  }
  queue.lending_limit_gpus = max + 1;
  EXPECT_EQ(ValidateQueue(queue, kLimits, "queue").message(),
            "queue.lending_limit_gpus: must be -1 (unlimited) or in "
            "0..1099511627776");
  queue.lending_limit_gpus = -1;
  queue.borrowing_limit_gpus = -2;
  EXPECT_EQ(ValidateQueue(queue, kLimits, "queue").message(),
            "queue.borrowing_limit_gpus: must be -1 (unlimited) or in "
            "0..1099511627776");
  LimitsConfig small;
  small.max_quota_gpus = 100;
  queue.borrowing_limit_gpus = -1;
  queue.nominal_gpus = {{"H100", 101}};
  EXPECT_EQ(ValidateQueue(queue, small, "queue").message(),
            "queue.nominal_gpus[\"H100\"]: must be in 0..100");
}

// Each limit at its lowest and highest allowed value, and one beyond each.
TEST(ValidateLimitsTest, ConfigLimitRanges) {
  struct Range {
    std::string field;
    std::function<void(LimitsConfig&, int64_t)> set;
    int64_t low;
    int64_t high;
  };
  const std::vector<Range> ranges = {
      {"max_labels", [](LimitsConfig& l, int64_t v) { l.max_labels = v; }, 1,
       1024},
      {"max_label_key_bytes",
       [](LimitsConfig& l, int64_t v) { l.max_label_key_bytes = v; }, 1, 1024},
      {"max_label_value_bytes",
       [](LimitsConfig& l, int64_t v) { l.max_label_value_bytes = v; }, 1,
       65536},
      {"max_id_bytes", [](LimitsConfig& l, int64_t v) { l.max_id_bytes = v; },
       32, 4096},
      {"max_message_bytes",
       [](LimitsConfig& l, int64_t v) { l.max_message_bytes = v; }, 64, 65536},
      {"max_quota_gpus",
       [](LimitsConfig& l, int64_t v) { l.max_quota_gpus = v; }, 1,
       int64_t{1} << 40},
      {"max_pending_gangs_per_queue",
       [](LimitsConfig& l, int64_t v) { l.max_pending_gangs_per_queue = v; }, 1,
       10'000'000},
      {"request_burst", [](LimitsConfig& l, int64_t v) { l.request_burst = v; },
       1, 1'000'000'000},
      {"watch_streams_per_principal",
       [](LimitsConfig& l, int64_t v) { l.watch_streams_per_principal = v; }, 1,
       65536},
      {"watch_stream_buffer_bytes",
       [](LimitsConfig& l, int64_t v) { l.watch_stream_buffer_bytes = v; },
       64 << 10, 256 << 20},  // high: the default total bounds it
      {"watch_total_buffer_bytes",
       [](LimitsConfig& l, int64_t v) { l.watch_total_buffer_bytes = v; },
       4 << 20, int64_t{64} << 30},
  };
  for (const Range& r : ranges) {
    for (int64_t v : {r.low, r.high}) {
      Config config;
      r.set(config.limits, v);
      EXPECT_TRUE(ValidateConfig(config, "config").ok())
          << r.field << " = " << v;
    }
    for (int64_t v : {r.low - 1, r.high + 1}) {
      if (r.field == "watch_stream_buffer_bytes" && v == r.high + 1) continue;
      Config config;
      r.set(config.limits, v);
      absl::Status status = ValidateConfig(config, "config");
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument)
          << r.field << " = " << v;
      EXPECT_THAT(
          std::string(status.message()),
          ::testing::StartsWith("config.limits." + r.field + ": must be in "))
          << r.field << " = " << v;
    }
  }
  Config config;
  config.limits.watch_stream_buffer_bytes = (256 << 20) + 1;
  EXPECT_EQ(ValidateConfig(config, "config").message(),
            "config.limits.watch_total_buffer_bytes: must be in "
            "268435457..68719476736");
  for (double rps : {0.0, -1.0, 1e9 + 1, std::nan("")}) {
    config = Config();
    config.limits.requests_per_second = rps;
    EXPECT_EQ(ValidateConfig(config, "config").message(),
              "config.limits.requests_per_second: must be in (0, 1e9]")
        << rps;
  }
  config.limits.requests_per_second = 1e9;
  EXPECT_TRUE(ValidateConfig(config, "config").ok());
}

TEST(ValidateTest, PlanningRangesNameTheField) {
  EXPECT_TRUE(ValidateConfig(Config(), "config").ok());
  struct Case {
    const char* name;
    void (*set)(PlanningConfig&);
    const char* error;  // "" = accepted
  };
  const Case cases[] = {
      {"depth 0 turns the plan off", [](PlanningConfig& p) { p.max_gangs = 0; },
       ""},
      {"depth at its bound", [](PlanningConfig& p) { p.max_gangs = 10000; },
       ""},
      {"depth above", [](PlanningConfig& p) { p.max_gangs = 10001; },
       "config.planning.max_gangs: must be in 0..10000"},
      {"depth negative", [](PlanningConfig& p) { p.max_gangs = -1; },
       "config.planning.max_gangs: must be in 0..10000"},
      {"window zero",
       [](PlanningConfig& p) { p.window = absl::ZeroDuration(); },
       "config.planning.window: must be > 0"},
      {"interval zero",
       [](PlanningConfig& p) { p.interval = absl::ZeroDuration(); },
       "config.planning.interval: must be > 0 and at most 1h"},
      {"interval at 1h", [](PlanningConfig& p) { p.interval = absl::Hours(1); },
       ""},
      {"interval above 1h",
       [](PlanningConfig& p) {
         p.interval = absl::Hours(1) + absl::Nanoseconds(1);
       },
       "config.planning.interval: must be > 0 and at most 1h"},
      {"default runtime negative",
       [](PlanningConfig& p) { p.default_runtime = -absl::Seconds(1); },
       "config.planning.default_runtime: must be > 0"},
  };
  for (const Case& c : cases) {
    Config config;
    c.set(config.planning);
    EXPECT_EQ(ValidateConfig(config, "config").message(), c.error) << c.name;
  }
}

TEST(SaturatingTest, SumsClampInsteadOfWrapping) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(SaturatingAdd(kMax - 1, 1), kMax);
  EXPECT_EQ(SaturatingAdd(kMax, 1), kMax);
  EXPECT_EQ(SaturatingAdd(kMax, kMax), kMax);
  EXPECT_EQ(SaturatingAdd(kMin, -1), kMin);
  EXPECT_EQ(SaturatingSub(kMin + 1, 1), kMin);
  EXPECT_EQ(SaturatingSub(kMin, 1), kMin);
  EXPECT_EQ(SaturatingSub(0, kMin), kMax);
  EXPECT_EQ(SaturatingSub(5, 7), -2);
}

}  // namespace
}  // namespace phalanx::core
