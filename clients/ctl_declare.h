// Declared state for `phalanxctl apply` and `phalanxctl diff`: files of the
// three kinds phalanxd's start-up takes (a phalanx.v1.Config; a fleet, the
// JSON of UpsertNodesRequest; queues, the JSON of ListQueuesResponse), the
// fields each file names, and the plan that makes the daemon's state say
// what they say — only the named fields that differ, each change a masked
// write (UpdateConfig and PutQueue with an update_mask; a node merged onto
// the node in force). Pure: no I/O; the caller reads the files and the
// state in force. Thread-safe.
#ifndef PHALANX_CLIENTS_CTL_DECLARE_H_
#define PHALANX_CLIENTS_CTL_DECLARE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "phalanx/v1/admin.pb.h"
#include "phalanx/v1/fleet.pb.h"
#include "phalanx/v1/types.pb.h"

namespace phalanx::ctl {

// A declared object and the fields its file names (proto field names, in
// the message's field order). A field the file leaves out is left alone.
template <typename Message>
struct DeclaredObject {
  Message message;
  std::vector<std::string> fields;
};

// What the files declare, merged.
struct Declared {
  std::optional<DeclaredObject<v1::Config>> config;
  std::vector<DeclaredObject<v1::Queue>> queues;
  std::vector<DeclaredObject<v1::Node>> nodes;
};

// The fields of `message`'s type that the JSON object `text` names (by
// proto or JSON name), in field order, as dotted proto field paths: a
// message field given as an object names the fields inside it
// ("preemption.enabled"), so a mask of them changes only those.
// InvalidArgument, naming `what`, for text that is not a JSON object of that
// message.
absl::StatusOr<std::vector<std::string>> NamedFields(
    absl::string_view text, const google::protobuf::Descriptor& type,
    absl::string_view what);

// Adds the file `path` with text `text` to `declared`. Its kind is read
// from its top-level keys: "nodes" alone is a fleet, "queues" alone a
// queues file, anything else a Config. InvalidArgument naming the file
// (and the item: "q.json: queues[2]: ...") for JSON that is not its
// message, an item without a name or id, an output-only field named (a
// queue's "status"; a node's "usedGpuIndices", …), a second config file,
// or a queue or node declared twice.
absl::Status AddDeclaredFile(absl::string_view text, absl::string_view path,
                             Declared& declared);

// One field that changes: its proto name, its JSON in force ("" = unset)
// and the declared JSON.
struct FieldChange {
  std::string field;
  std::string from;
  std::string to;
  bool operator==(const FieldChange&) const = default;
};

// What changes on one object.
struct ObjectChange {
  std::string kind;  // "config", "queue" or "node"
  std::string name;  // the queue's name or node's id; "" for the config
  bool create = false;
  std::vector<FieldChange> fields;
};

// The changes and the requests that make them, in the order to send them:
// the config, then the nodes (the other way round when `nodes_first`),
// then the queues (a new parent before its children). Every node must
// label every topology level in force, so nodes go first when the config
// adds a level (they bring its labels), and the config goes first when it
// only drops levels (the nodes may then drop their labels).
struct Plan {
  std::vector<ObjectChange> changes;
  std::optional<v1::UpdateConfigRequest> config;
  std::optional<v1::UpsertNodesRequest> nodes;
  bool nodes_first = false;
  std::vector<v1::PutQueueRequest> queues;
  int64_t config_version = 0;  // the version the plan was made against
};

// The plan that makes the state in force (`config`, `queues`, `nodes`)
// say what `declared` says. A queue or node not in force is created with
// every declared field (a node with its declared state); one in force gets
// only its named fields that differ. A node's declared state is ignored
// once the node exists (as at phalanxd's start-up: `nodes cordon|drain|
// uncordon` change it, recording a reason and moving gangs); a config's
// "version" is ignored. The config request carries expected_version =
// `config.version`, so the daemon refuses it (ABORTED) when the config
// changed after it was read.
Plan PlanChanges(const Declared& declared, const v1::Config& config,
                 const v1::ListQueuesResponse& queues,
                 const v1::ListNodesResponse& nodes);

// The plan as text, one object per line and one indented line per field:
// "~ queue llm\n    weight: 3 -> 7\n", "+ node n-9\n", or "no changes\n".
std::string PlanText(const Plan& plan);

}  // namespace phalanx::ctl

#endif  // PHALANX_CLIENTS_CTL_DECLARE_H_
