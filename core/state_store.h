// StateStore: the port through which Phalanx persists its state (docs/design.md
// §7). Core declares it; storage/ implements it on RocksDB and memory_store.h
// in memory. Implementations say whether they are thread-safe.
#ifndef PHALANX_CORE_STATE_STORE_H_
#define PHALANX_CORE_STATE_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/model.h"

namespace phalanx::core {

// The SHA-256 (lower-case hex) of the text of each start-up file (the
// daemon's --config, --fleet and --queues) as last applied to the state; ""
// when none was. Kept beside the state, not in the scheduler: the daemon's
// start-up reads it to apply only a file that changed, and writes it in the
// batch that applied the file (server/startup.h).
struct StartupFileHashes {
  std::string config;
  std::string fleet;
  std::string queues;
  bool operator==(const StartupFileHashes&) const = default;
};

// Everything a scheduler needs at start-up.
struct LoadedState {
  std::optional<Config> config;  // unset on a fresh store
  std::vector<Node> nodes;
  std::vector<Queue> queues;
  std::vector<Gang> gangs;  // non-final and retained final gangs
  std::vector<RequestRecord> requests;
  std::vector<std::pair<QueueName, LedgerEntry>> ledger;
  Meta meta;
  StartupFileHashes startup_files;
};

// What one scheduler-loop batch changed; committed atomically.
// One audited call (docs/security.md); written beside a batch, never part
// of the scheduler's state (no revision, no event).
struct AuditRecord {
  int64_t sequence = 0;  // strictly increasing
  absl::Time time;
  std::string principal;
  std::string method;
  std::string target;
  std::string outcome;  // a status code's name: "OK", "PERMISSION_DENIED"
  std::string summary;
  bool operator==(const AuditRecord&) const = default;
};

struct Mutation {
  std::vector<GangPtr> gangs_put;
  std::vector<GangId> gangs_deleted;
  std::vector<Node> nodes_put;
  std::vector<NodeId> nodes_deleted;
  std::vector<Queue> queues_put;
  std::vector<QueueName> queues_deleted;
  std::optional<Config> config;
  std::vector<RequestRecord> requests_put;
  std::vector<std::pair<QueueName, std::string>> requests_deleted;
  std::vector<std::pair<QueueName, LedgerEntry>> ledger_put;
  std::vector<QueueName> ledger_deleted;
  std::vector<Event> events;
  int64_t trim_events_before = 0;  // drop events below this revision; 0 = none
  std::vector<AuditRecord> audit_put;
  int64_t trim_audit_before = 0;  // drop audit records below this sequence
  Meta meta;
  // Replaces the stored start-up file hashes when set.
  std::optional<StartupFileHashes> startup_files;

  // Returns true when nothing needs to be written.
  bool empty() const;
};

class StateStore {
 public:
  virtual ~StateStore() = default;
  // Reads the whole persisted state.
  virtual absl::StatusOr<LoadedState> LoadAll() = 0;
  // Writes `mutation` atomically and durably before returning OK.
  virtual absl::Status Commit(const Mutation& mutation) = 0;
  // Returns up to `limit` events with revision > `after`, in order, and
  // stops early once those read take `max_bytes` or more as stored (always
  // at least one; a store without an encoding counts events only). Fails
  // with OutOfRange when events after `after` have been trimmed.
  virtual absl::StatusOr<std::vector<Event>> ReadEvents(
      int64_t after, int limit, size_t max_bytes = SIZE_MAX) = 0;
};

// The audit log's reads (its writes ride in Mutation). Implemented by the
// RocksDB store.
class AuditStore {
 public:
  virtual ~AuditStore() = default;
  // Up to `limit` records with sequence > `after`, in order.
  virtual absl::StatusOr<std::vector<AuditRecord>> ReadAudit(int64_t after,
                                                             int limit) = 0;
  // The highest sequence stored; 0 when none.
  virtual absl::StatusOr<int64_t> LastAuditSequence() = 0;
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_STATE_STORE_H_
