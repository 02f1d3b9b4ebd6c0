#include "bench/sim/sim_fleet.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/validate.h"
#include "nlohmann/json.hpp"

namespace phalanx::bench {
namespace {

absl::Status Bad(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

using Json = nlohmann::json;

// The member `camel` or, failing that, `snake` of `object`; nullptr when
// neither is there.
const Json* Member(const Json& object, const char* camel, const char* snake) {
  for (const char* key : {camel, snake}) {
    auto it = object.find(key);
    if (it != object.end()) return &*it;
  }
  return nullptr;
}

// A JSON number or a string holding one (proto3 JSON writes int64 as a
// string); nullopt otherwise.
std::optional<int64_t> AsInt(const Json& value) {
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (d != std::floor(d) || std::fabs(d) > 9e15) return std::nullopt;
    return static_cast<int64_t>(d);
  }
  int64_t n = 0;
  if (value.is_string() &&
      absl::SimpleAtoi(value.get_ref<const std::string&>(), &n)) {
    return n;
  }
  return std::nullopt;
}

absl::StatusOr<core::NodeState> ParseState(const Json* value,
                                           const std::string& field) {
  if (value == nullptr || value->is_null()) return core::NodeState::kReady;
  static const std::pair<const char*, core::NodeState> kNames[] = {
      {"NODE_STATE_UNSPECIFIED", core::NodeState::kReady},
      {"NODE_STATE_READY", core::NodeState::kReady},
      {"NODE_STATE_CORDONED", core::NodeState::kCordoned},
      {"NODE_STATE_DRAINING", core::NodeState::kDraining},
      {"NODE_STATE_UNHEALTHY", core::NodeState::kUnhealthy}};
  const std::string text =
      value->is_string() ? value->get<std::string>() : value->dump();
  const std::optional<int64_t> number =
      value->is_number() ? AsInt(*value) : std::nullopt;
  for (size_t i = 0; i < std::size(kNames); ++i) {
    if (text == kNames[i].first ||
        (number && *number == static_cast<int64_t>(i))) {
      return kNames[i].second;
    }
  }
  return Bad(field,
             absl::StrCat("unknown node state \"", text.substr(0, 64), "\""));
}

absl::StatusOr<core::Node> ParseNode(const Json& json,
                                     const std::string& field) {
  if (!json.is_object()) return Bad(field, "not an object");
  core::Node node;
  const Json* id = Member(json, "id", "id");
  if (id == nullptr || !id->is_string()) {
    return Bad(field + ".id", "must be a string");
  }
  node.spec.id = core::NodeId(id->get<std::string>());
  if (const Json* model = Member(json, "gpuModel", "gpu_model")) {
    if (!model->is_string()) {
      return Bad(field + ".gpuModel", "must be a string");
    }
    node.spec.gpu_model = model->get<std::string>();
  }
  auto integer = [&](const char* camel, const char* snake,
                     int64_t& out) -> absl::Status {
    const Json* value = Member(json, camel, snake);
    if (value == nullptr) return absl::OkStatus();
    std::optional<int64_t> n = AsInt(*value);
    if (!n) return Bad(absl::StrCat(field, ".", camel), "must be an integer");
    out = *n;
    return absl::OkStatus();
  };
  int64_t gpus = 0;
  if (absl::Status s = integer("gpuCount", "gpu_count", gpus); !s.ok())
    return s;
  node.spec.gpu_count =
      static_cast<int>(std::clamp<int64_t>(gpus, -1, 1 << 20));
  if (absl::Status s = integer("cpuMillis", "cpu_millis", node.spec.cpu_millis);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          integer("memoryBytes", "memory_bytes", node.spec.memory_bytes);
      !s.ok()) {
    return s;
  }
  if (const Json* labels = Member(json, "labels", "labels")) {
    if (!labels->is_object()) return Bad(field + ".labels", "not an object");
    for (const auto& [key, value] : labels->items()) {
      if (!value.is_string()) {
        return Bad(absl::StrCat(field, ".labels.", key.substr(0, 64)),
                   "must be a string");
      }
      node.spec.labels[key] = value.get<std::string>();
    }
  }
  absl::StatusOr<core::NodeState> state =
      ParseState(Member(json, "state", "state"), field + ".state");
  if (!state.ok()) return state.status();
  node.state = *state;
  if (absl::Status s =
          core::ValidateNodeSpec(node.spec, core::LimitsConfig{}, field);
      !s.ok()) {
    return s;
  }
  return node;
}

// Fills levels and the shape figures of `fleet` from its nodes' labels.
void DeriveShape(SimFleet& fleet) {
  for (const char* level : {"block", "rack"}) {
    const bool everyone = std::all_of(
        fleet.nodes.begin(), fleet.nodes.end(),
        [&](const core::Node& n) { return n.spec.labels.contains(level); });
    if (everyone && !fleet.nodes.empty()) fleet.levels.push_back(level);
  }
  std::map<std::string, int> blocks;
  std::map<std::string, int> racks;
  const bool has_block = !fleet.levels.empty() && fleet.levels[0] == "block";
  const bool has_rack = !fleet.levels.empty() && fleet.levels.back() == "rack";
  for (const core::Node& node : fleet.nodes) {
    fleet.gpus_per_node = std::max(fleet.gpus_per_node, node.spec.gpu_count);
    const auto& labels = node.spec.labels;
    const std::string block = has_block ? labels.at("block") : "";
    if (has_block) ++blocks[block];
    if (has_rack) ++racks[absl::StrCat(block, "/", labels.at("rack"))];
  }
  for (const auto& [name, n] : blocks) {
    fleet.nodes_per_block = std::max(fleet.nodes_per_block, n);
  }
  for (const auto& [name, n] : racks) {
    fleet.nodes_per_rack = std::max(fleet.nodes_per_rack, n);
  }
}

}  // namespace

int64_t SimFleet::TotalGpus() const {
  int64_t total = 0;
  for (const core::Node& node : nodes) total += node.spec.gpu_count;
  return total;
}

std::vector<std::pair<std::string, int64_t>> SimFleet::GpusByModel() const {
  std::map<std::string, int64_t> by_model;
  for (const core::Node& node : nodes) {
    by_model[node.spec.gpu_model] += node.spec.gpu_count;
  }
  return {by_model.begin(), by_model.end()};
}

absl::StatusOr<SimFleet> MakeFleet(const FleetOptions& options) {
  if (options.nodes <= 0) return Bad("--nodes", "must be > 0");
  if (options.gpus_per_node <= 0 ||
      options.gpus_per_node > core::kMaxGpusPerNode) {
    return Bad("--gpus-per-node",
               absl::StrCat("must be in 1..", core::kMaxGpusPerNode));
  }
  if (options.nodes_per_rack <= 0)
    return Bad("--nodes-per-rack", "must be > 0");
  if (options.racks_per_block <= 0) {
    return Bad("--racks-per-block", "must be > 0");
  }
  SimFleet fleet;
  fleet.source = "flags";
  for (int i = 0; i < options.nodes; ++i) {
    const int rack = i / options.nodes_per_rack;
    const int block = rack / options.racks_per_block;
    core::Node node;
    node.spec.id = core::NodeId(absl::StrFormat("n%05d", i));
    node.spec.gpu_model = options.gpu_model;
    node.spec.gpu_count = options.gpus_per_node;
    node.spec.labels = {{"block", absl::StrFormat("b%03d", block)},
                        {"rack", absl::StrFormat("r%04d", rack)}};
    if (absl::Status s = core::ValidateNodeSpec(node.spec, core::LimitsConfig{},
                                                "--gpu-model");
        !s.ok()) {
      return s;
    }
    fleet.nodes.push_back(std::move(node));
  }
  DeriveShape(fleet);
  return fleet;
}

absl::StatusOr<SimFleet> ParseFleetJson(absl::string_view text) {
  // No exceptions: a malformed document parses to a discarded value.
  const Json json = Json::parse(text.begin(), text.end(), /*cb=*/nullptr,
                                /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError("not a JSON document");
  }
  const Json* nodes =
      json.is_object() ? Member(json, "nodes", "nodes") : nullptr;
  if (nodes == nullptr || !nodes->is_array() || nodes->empty()) {
    return Bad("nodes", "must be a non-empty array");
  }
  SimFleet fleet;
  for (size_t i = 0; i < nodes->size(); ++i) {
    absl::StatusOr<core::Node> node =
        ParseNode((*nodes)[i], absl::StrCat("nodes[", i, "]"));
    if (!node.ok()) return node.status();
    fleet.nodes.push_back(*std::move(node));
  }
  DeriveShape(fleet);
  return fleet;
}

absl::StatusOr<SimFleet> ReadFleetFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  std::ostringstream text;
  text << in.rdbuf();
  absl::StatusOr<SimFleet> fleet = ParseFleetJson(text.str());
  if (!fleet.ok()) {
    return absl::Status(fleet.status().code(),
                        absl::StrCat(path, ": ", fleet.status().message()));
  }
  fleet->source = path;
  return fleet;
}

}  // namespace phalanx::bench
