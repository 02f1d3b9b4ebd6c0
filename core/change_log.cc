#include "core/change_log.h"

#include "absl/strings/str_format.h"
#include "core/fair_share.h"
#include "core/fleet.h"

namespace phalanx::core {

void ChangeLog::Restore(const Meta& meta) {
  revision_ = meta.last_revision;
  next_gang_seq_ = meta.next_gang_seq;
  first_retained_revision_ = meta.first_retained_revision;
}

GangId ChangeLog::NewGangId() {
  return GangId(absl::StrFormat("g-%06d", next_gang_seq_++));
}

int64_t ChangeLog::NextRevision() { return ++revision_; }

void ChangeLog::DeleteGang(const GangId& id) {
  gangs_put_.erase(id);
  gangs_deleted_.insert(id);
}

void ChangeLog::PutNode(const NodeId& id) {
  nodes_put_.insert(id);
  nodes_deleted_.erase(id);
}

void ChangeLog::DeleteNode(const NodeId& id) {
  nodes_put_.erase(id);
  nodes_deleted_.insert(id);
}

void ChangeLog::PutQueue(const QueueName& name) {
  queues_put_.insert(name);
  queues_deleted_.erase(name);
}

void ChangeLog::DeleteQueue(const QueueName& name) {
  queues_put_.erase(name);
  queues_deleted_.insert(name);
}

void ChangeLog::PutRequest(RequestRecord record) {
  requests_put_.push_back(std::move(record));
}

void ChangeLog::DeleteRequest(std::pair<QueueName, std::string> key) {
  requests_deleted_.push_back(std::move(key));
}

void ChangeLog::TrimEvents(int64_t events) {
  if (revision_ - first_retained_revision_ + 1 <= events) return;
  first_retained_revision_ = revision_ - events + 1;
  trim_events_before_ = first_retained_revision_;
}

void ChangeLog::Clear() {
  gangs_put_.clear();
  gangs_deleted_.clear();
  nodes_put_.clear();
  nodes_deleted_.clear();
  queues_put_.clear();
  queues_deleted_.clear();
  config_put_ = false;
  requests_put_.clear();
  requests_deleted_.clear();
  ledger_deleted_.clear();
  events_.clear();
  trim_events_before_ = 0;
}

Mutation ChangeLog::Take(const Fleet& fleet,
                         const absl::btree_map<QueueName, Queue>& queues,
                         const Config& config, FairShareLedger& ledger) {
  Mutation m;
  for (const auto& [id, gang] : gangs_put_) m.gangs_put.push_back(gang);
  m.gangs_deleted.assign(gangs_deleted_.begin(), gangs_deleted_.end());
  for (const NodeId& id : nodes_put_) {
    m.nodes_put.push_back(fleet.slots()[fleet.Find(id)].node);
  }
  m.nodes_deleted.assign(nodes_deleted_.begin(), nodes_deleted_.end());
  for (const QueueName& name : queues_put_) {
    m.queues_put.push_back(queues.at(name));
  }
  m.queues_deleted.assign(queues_deleted_.begin(), queues_deleted_.end());
  if (config_put_) m.config = config;
  m.requests_put = std::move(requests_put_);
  m.requests_deleted = std::move(requests_deleted_);
  for (const QueueName& queue : ledger.TakeDirty()) {
    m.ledger_put.emplace_back(queue, ledger.entries().at(queue));
  }
  m.ledger_deleted = std::move(ledger_deleted_);
  m.events = std::move(events_);
  m.trim_events_before = trim_events_before_;
  m.meta = meta();
  Clear();
  return m;
}

}  // namespace phalanx::core
