// ChangeLog: what changed since the caller last persisted, and the counters
// that name changes (the event revision, the next gang id, the first event
// retention keeps). Commands record here; `Take` assembles the `Mutation`
// the caller writes in one atomic batch and starts afresh.
//
// The only writer of the revision and gang-id counters. Owned by the
// Scheduler; not thread-safe.
#ifndef PHALANX_CORE_CHANGE_LOG_H_
#define PHALANX_CORE_CHANGE_LOG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "core/model.h"
#include "core/state_store.h"

namespace phalanx::core {

class Fleet;
class FairShareLedger;

class ChangeLog {
 public:
  // Starts from stored counters (a fresh log: Meta{}).
  void Restore(const Meta& meta);
  Meta meta() const {
    return {revision_, next_gang_seq_, first_retained_revision_};
  }
  int64_t revision() const { return revision_; }

  // Returns the next gang id ("g-000001", …) and consumes it.
  GangId NewGangId();
  // Returns the next revision and consumes it.
  int64_t NextRevision();
  // Records an event (its revision from NextRevision).
  void Record(Event event) { events_.push_back(std::move(event)); }

  // A gang's current record is to be written; a deleted gang is to be erased.
  void PutGang(const GangPtr& gang) { gangs_put_[gang->id] = gang; }
  void DeleteGang(const GangId& id);
  void PutNode(const NodeId& id);
  void DeleteNode(const NodeId& id);
  void PutQueue(const QueueName& name);
  void DeleteQueue(const QueueName& name);
  void PutConfig() { config_put_ = true; }
  void PutRequest(RequestRecord record);
  void DeleteRequest(std::pair<QueueName, std::string> key);
  void DeleteLedger(const QueueName& queue) {
    ledger_deleted_.push_back(queue);
  }
  // Retention keeps at most `events` events: moves the first retained
  // revision so, and records the trim.
  void TrimEvents(int64_t events);

  // Forgets every recorded change (state loaded from the store needs no
  // writing back); the counters stay.
  void Clear();
  // Returns everything recorded since the last Take, reading the current
  // node, queue, config and ledger records from the owners, and clears it.
  Mutation Take(const Fleet& fleet,
                const absl::btree_map<QueueName, Queue>& queues,
                const Config& config, FairShareLedger& ledger);

 private:
  int64_t revision_ = 0;
  int64_t next_gang_seq_ = 1;
  int64_t first_retained_revision_ = 1;
  // Changed gangs with their current records, so taking them looks nothing
  // up.
  absl::btree_map<GangId, GangPtr> gangs_put_;
  absl::btree_set<GangId> gangs_deleted_;
  absl::btree_set<NodeId> nodes_put_;
  absl::btree_set<NodeId> nodes_deleted_;
  absl::btree_set<QueueName> queues_put_;
  absl::btree_set<QueueName> queues_deleted_;
  bool config_put_ = false;
  std::vector<RequestRecord> requests_put_;
  std::vector<std::pair<QueueName, std::string>> requests_deleted_;
  std::vector<QueueName> ledger_deleted_;
  std::vector<Event> events_;
  int64_t trim_events_before_ = 0;
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_CHANGE_LOG_H_
