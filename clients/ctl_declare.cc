#include "clients/ctl_declare.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "clients/ctl_format.h"
#include "clients/ctl_requests.h"
#include "google/protobuf/field_mask.pb.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/field_mask_util.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"

namespace phalanx::ctl {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Struct;
using google::protobuf::Value;

// Fields the server sets, which a declaration may not name.
const std::set<std::string>& OutputOnly(const Descriptor& type) {
  static const auto* queue = new std::set<std::string>{"status"};
  static const auto* node = new std::set<std::string>{
      "last_heartbeat", "state_reason", "used_gpu_indices", "gang_ids",
      "drain_deadline"};
  static const auto* none = new std::set<std::string>;
  if (&type == v1::Queue::descriptor()) return *queue;
  if (&type == v1::Node::descriptor()) return *node;
  return *none;
}

absl::Status Invalid(absl::string_view what, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", problem));
}

// The field of `type` whose proto or JSON name is `key`; null when none.
const FieldDescriptor* FieldNamed(const Descriptor& type,
                                  const std::string& key) {
  if (const FieldDescriptor* field = type.FindFieldByName(key)) return field;
  for (int i = 0; i < type.field_count(); ++i) {
    if (type.field(i)->json_name() == key) return type.field(i);
  }
  return nullptr;
}

absl::StatusOr<Struct> ParseObject(absl::string_view text,
                                   absl::string_view what) {
  Struct object;
  const auto status =
      google::protobuf::util::JsonStringToMessage(std::string(text), &object);
  if (!status.ok()) return Invalid(what, "not a JSON object");
  return object;
}

// Whether a declaration that names `field` with `value` names the fields
// inside it one by one: a singular message field given as a non-empty
// object (not a map, a list or a well-known type such as a Duration, whose
// JSON is a string; `{}` names the whole field, back to its defaults).
bool NamesFieldsInside(const FieldDescriptor& field, const Value& value) {
  return field.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
         !field.is_repeated() && value.has_struct_value() &&
         !value.struct_value().fields().empty() &&
         field.message_type()->file()->package() != "google.protobuf";
}

// The fields of `type` that `object`'s keys name, in field order, as proto
// field names; with `leaves`, a message field given as an object names the
// fields inside it instead ("preemption.enabled", not "preemption"), so a
// mask of them leaves its other fields as they are.
absl::StatusOr<std::vector<std::string>> FieldsOf(const Struct& object,
                                                  const Descriptor& type,
                                                  absl::string_view what,
                                                  bool leaves = false) {
  std::vector<std::pair<const FieldDescriptor*, const Value*>> fields;
  for (const auto& [key, value] : object.fields()) {
    const FieldDescriptor* field = FieldNamed(type, key);
    if (field == nullptr) {
      return Invalid(what, absl::StrCat("no field \"", SafeText(key), "\" in ",
                                        type.full_name()));
    }
    if (OutputOnly(type).contains(field->name())) {
      return Invalid(
          what,
          absl::StrCat(field->name(), ": is set by the server, not declared"));
    }
    fields.emplace_back(field, &value);
  }
  std::sort(fields.begin(), fields.end(), [](const auto& a, const auto& b) {
    return a.first->index() < b.first->index();
  });
  std::vector<std::string> names;
  for (const auto& [field, value] : fields) {
    if (!leaves || !NamesFieldsInside(*field, *value)) {
      names.push_back(field->name());
      continue;
    }
    absl::StatusOr<std::vector<std::string>> inside =
        FieldsOf(value->struct_value(), *field->message_type(),
                 absl::StrCat(what, ": ", field->name()), leaves);
    if (!inside.ok()) return inside.status();
    for (const std::string& name : *inside) {
      names.push_back(absl::StrCat(field->name(), ".", name));
    }
  }
  return names;
}

// `message` as a Struct keyed by proto field names, defaults included.
Struct ToStruct(const Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  Struct object;
  (void)google::protobuf::util::JsonStringToMessage(json, &object);
  return object;
}

// The value at the dotted field path `path` of `object`; null when unset.
const Value* ValueAt(const Struct& object, const std::string& path) {
  const Struct* at = &object;
  const Value* value = nullptr;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (at == nullptr) return nullptr;
    auto it = at->fields().find(std::string(part));
    if (it == at->fields().end()) return nullptr;
    value = &it->second;
    at = value->has_struct_value() ? &value->struct_value() : nullptr;
  }
  return value;
}

// The JSON of `object`'s field at `path`; "" when it has none.
std::string FieldJson(const Struct& object, const std::string& path) {
  const Value* value = ValueAt(object, path);
  if (value == nullptr) return "";
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(*value, &json);
  return json;
}

bool SameField(const Struct& a, const Struct& b, const std::string& path) {
  const Value* x = ValueAt(a, path);
  const Value* y = ValueAt(b, path);
  if (x == nullptr || y == nullptr) return (x == nullptr) == (y == nullptr);
  return google::protobuf::util::MessageDifferencer::Equals(*x, *y);
}

// The fields among `named` (but not `skip`) whose values differ.
std::vector<FieldChange> Differences(const Message& in_force,
                                     const Message& declared,
                                     const std::vector<std::string>& named,
                                     const std::set<std::string>& skip) {
  const Struct have = ToStruct(in_force);
  const Struct want = ToStruct(declared);
  std::vector<FieldChange> changes;
  for (const std::string& field : named) {
    if (skip.contains(field) || SameField(have, want, field)) continue;
    changes.push_back({field, FieldJson(have, field), FieldJson(want, field)});
  }
  return changes;
}

// Every named field of a new object but its identity `id`, from unset.
std::vector<FieldChange> Creation(const Message& declared,
                                  const std::vector<std::string>& named,
                                  const std::string& id) {
  const Struct want = ToStruct(declared);
  std::vector<FieldChange> changes;
  for (const std::string& field : named) {
    if (field == id) continue;
    changes.push_back({field, "", FieldJson(want, field)});
  }
  return changes;
}

google::protobuf::FieldMask MaskOf(const std::vector<FieldChange>& changes) {
  google::protobuf::FieldMask mask;
  for (const FieldChange& change : changes) mask.add_paths(change.field);
  return mask;
}

// Adds the items of the list `key` of `object` (a fleet or queues file) to
// `out`, each with its named fields; `id` reads an item's identity.
template <typename Message, typename Id>
absl::Status AddItems(const Struct& object, const std::string& key,
                      const google::protobuf::RepeatedPtrField<Message>& items,
                      absl::string_view path, Id id,
                      std::vector<DeclaredObject<Message>>& out) {
  const Value& list = object.fields().at(key);
  for (int i = 0; i < items.size(); ++i) {
    const std::string what = absl::StrCat(path, ": ", key, "[", i, "]");
    if (id(items[i]).empty()) return Invalid(what, "has no name or id");
    for (const DeclaredObject<Message>& seen : out) {
      if (id(seen.message) == id(items[i])) {
        return Invalid(what, absl::StrCat("\"", SafeText(id(items[i])),
                                          "\" is declared twice"));
      }
    }
    absl::StatusOr<std::vector<std::string>> fields =
        FieldsOf(list.list_value().values(i).struct_value(),
                 *Message::descriptor(), what);
    if (!fields.ok()) return fields.status();
    out.push_back({items[i], *std::move(fields)});
  }
  return absl::OkStatus();
}

// Orders `creates` so that a queue comes after its parent when both are
// created.
std::vector<v1::PutQueueRequest> ParentsFirst(
    std::vector<v1::PutQueueRequest> creates) {
  std::vector<v1::PutQueueRequest> ordered;
  std::set<std::string> pending;
  for (const auto& request : creates) pending.insert(request.queue().name());
  while (!creates.empty()) {
    std::vector<v1::PutQueueRequest> later;
    for (auto& request : creates) {
      if (pending.contains(request.queue().parent())) {
        later.push_back(std::move(request));
        continue;
      }
      pending.erase(request.queue().name());
      ordered.push_back(std::move(request));
    }
    // A cycle of parents: send the rest as they are; the daemon refuses it.
    if (later.size() == creates.size()) {
      for (auto& request : later) ordered.push_back(std::move(request));
      break;
    }
    creates = std::move(later);
  }
  return ordered;
}

void PlanConfig(const DeclaredObject<v1::Config>& declared,
                const v1::Config& config, Plan& plan) {
  std::vector<FieldChange> changes =
      Differences(config, declared.message, declared.fields, {"version"});
  if (changes.empty()) return;
  v1::UpdateConfigRequest request;
  *request.mutable_config() = declared.message;
  request.mutable_config()->clear_version();
  *request.mutable_update_mask() = MaskOf(changes);
  request.set_expected_version(config.version());
  for (const std::string& level : declared.message.topology_levels()) {
    const auto& in_force = config.topology_levels();
    if (std::find(in_force.begin(), in_force.end(), level) == in_force.end()) {
      plan.nodes_first = true;  // a new level: the nodes bring its labels
    }
  }
  plan.config = std::move(request);
  plan.changes.push_back({"config", "", false, std::move(changes)});
}

// The node in force with the changed fields copied from the declared one;
// its state left unset, so the daemon keeps it.
v1::Node Merged(const v1::Node& in_force, const v1::Node& declared,
                const std::vector<FieldChange>& changes) {
  v1::Node merged;
  merged.set_id(in_force.id());
  merged.set_gpu_model(in_force.gpu_model());
  merged.set_gpu_count(in_force.gpu_count());
  merged.set_cpu_millis(in_force.cpu_millis());
  merged.set_memory_bytes(in_force.memory_bytes());
  *merged.mutable_labels() = in_force.labels();
  merged.set_address(in_force.address());
  google::protobuf::util::FieldMaskUtil::MergeOptions options;
  options.set_replace_message_fields(true);
  options.set_replace_repeated_fields(true);
  google::protobuf::util::FieldMaskUtil::MergeMessageTo(
      declared, MaskOf(changes), options, &merged);
  return merged;
}

void PlanNodes(const std::vector<DeclaredObject<v1::Node>>& declared,
               const v1::ListNodesResponse& nodes, Plan& plan) {
  std::map<std::string, const v1::Node*> in_force;
  for (const v1::Node& node : nodes.nodes()) in_force[node.id()] = &node;
  v1::UpsertNodesRequest request;
  for (const DeclaredObject<v1::Node>& node : declared) {
    auto it = in_force.find(node.message.id());
    if (it == in_force.end()) {
      *request.add_nodes() = node.message;
      plan.changes.push_back({"node", node.message.id(), true,
                              Creation(node.message, node.fields, "id")});
      continue;
    }
    std::vector<FieldChange> changes =
        Differences(*it->second, node.message, node.fields, {"id", "state"});
    if (changes.empty()) continue;
    *request.add_nodes() = Merged(*it->second, node.message, changes);
    plan.changes.push_back(
        {"node", node.message.id(), false, std::move(changes)});
  }
  if (request.nodes_size() > 0) plan.nodes = std::move(request);
}

void PlanQueues(const std::vector<DeclaredObject<v1::Queue>>& declared,
                const v1::ListQueuesResponse& queues, Plan& plan) {
  std::map<std::string, const v1::Queue*> in_force;
  for (const v1::Queue& queue : queues.queues()) {
    in_force[queue.name()] = &queue;
  }
  std::vector<v1::PutQueueRequest> creates;
  for (const DeclaredObject<v1::Queue>& queue : declared) {
    v1::PutQueueRequest request;
    *request.mutable_queue() = queue.message;
    auto it = in_force.find(queue.message.name());
    if (it == in_force.end()) {
      creates.push_back(std::move(request));
      plan.changes.push_back({"queue", queue.message.name(), true,
                              Creation(queue.message, queue.fields, "name")});
      continue;
    }
    std::vector<FieldChange> changes =
        Differences(*it->second, queue.message, queue.fields, {"name"});
    if (changes.empty()) continue;
    *request.mutable_update_mask() = MaskOf(changes);
    plan.queues.push_back(std::move(request));
    plan.changes.push_back(
        {"queue", queue.message.name(), false, std::move(changes)});
  }
  for (v1::PutQueueRequest& request : ParentsFirst(std::move(creates))) {
    plan.queues.push_back(std::move(request));
  }
}

}  // namespace

absl::StatusOr<std::vector<std::string>> NamedFields(absl::string_view text,
                                                     const Descriptor& type,
                                                     absl::string_view what) {
  absl::StatusOr<Struct> object = ParseObject(text, what);
  if (!object.ok()) return object.status();
  return FieldsOf(*object, type, what, /*leaves=*/true);
}

absl::Status AddDeclaredFile(absl::string_view text, absl::string_view path,
                             Declared& declared) {
  absl::StatusOr<Struct> object = ParseObject(text, path);
  if (!object.ok()) return object.status();
  const bool one_key = object->fields().size() == 1;
  if (one_key && object->fields().contains("nodes")) {
    absl::StatusOr<v1::UpsertNodesRequest> fleet =
        ParseJson<v1::UpsertNodesRequest>(text, path);
    if (!fleet.ok()) return fleet.status();
    return AddItems(
        *object, "nodes", fleet->nodes(), path,
        [](const v1::Node& node) { return node.id(); }, declared.nodes);
  }
  if (one_key && object->fields().contains("queues")) {
    absl::StatusOr<v1::ListQueuesResponse> queues =
        ParseJson<v1::ListQueuesResponse>(text, path);
    if (!queues.ok()) return queues.status();
    return AddItems(
        *object, "queues", queues->queues(), path,
        [](const v1::Queue& queue) { return queue.name(); }, declared.queues);
  }
  if (declared.config.has_value()) {
    return Invalid(path, "a second config file (one Config per apply)");
  }
  absl::StatusOr<v1::Config> config = ParseJson<v1::Config>(text, path);
  if (!config.ok()) return config.status();
  absl::StatusOr<std::vector<std::string>> fields =
      FieldsOf(*object, *v1::Config::descriptor(), path, /*leaves=*/true);
  if (!fields.ok()) return fields.status();
  declared.config = {*std::move(config), *std::move(fields)};
  return absl::OkStatus();
}

Plan PlanChanges(const Declared& declared, const v1::Config& config,
                 const v1::ListQueuesResponse& queues,
                 const v1::ListNodesResponse& nodes) {
  Plan plan;
  plan.config_version = config.version();
  if (declared.config.has_value()) PlanConfig(*declared.config, config, plan);
  PlanNodes(declared.nodes, nodes, plan);
  PlanQueues(declared.queues, queues, plan);
  return plan;
}

std::string PlanText(const Plan& plan) {
  if (plan.changes.empty()) return "no changes\n";
  std::string text;
  for (const ObjectChange& change : plan.changes) {
    absl::StrAppend(&text, change.create ? "+ " : "~ ", change.kind);
    if (!change.name.empty())
      absl::StrAppend(&text, " ", SafeText(change.name));
    if (change.kind == "config") {
      absl::StrAppend(&text, " (version ", plan.config_version, ")");
    }
    absl::StrAppend(&text, "\n");
    for (const FieldChange& field : change.fields) {
      absl::StrAppend(&text, "    ", field.field, ": ");
      if (!change.create) {
        absl::StrAppend(&text,
                        field.from.empty() ? "(unset)" : SafeText(field.from),
                        " -> ");
      }
      absl::StrAppend(&text, SafeText(field.to), "\n");
    }
  }
  return text;
}

}  // namespace phalanx::ctl
