#include "core/memory_store.h"

#include "absl/strings/str_cat.h"

namespace phalanx::core {

absl::StatusOr<LoadedState> MemoryStore::LoadAll() {
  LoadedState state;
  state.config = config_;
  for (const auto& [id, node] : nodes_) state.nodes.push_back(node);
  for (const auto& [name, queue] : queues_) state.queues.push_back(queue);
  for (const auto& [id, gang] : gangs_) state.gangs.push_back(gang);
  for (const auto& [key, record] : requests_) state.requests.push_back(record);
  for (const auto& [queue, entry] : ledger_)
    state.ledger.emplace_back(queue, entry);
  state.meta = meta_;
  state.startup_files = startup_files_;
  return state;
}

absl::Status MemoryStore::Commit(const Mutation& m) {
  for (const GangPtr& gang : m.gangs_put) gangs_[gang->id] = *gang;
  for (const GangId& id : m.gangs_deleted) gangs_.erase(id);
  for (const Node& node : m.nodes_put) nodes_[node.spec.id] = node;
  for (const NodeId& id : m.nodes_deleted) nodes_.erase(id);
  for (const Queue& queue : m.queues_put) queues_[queue.name] = queue;
  for (const QueueName& name : m.queues_deleted) queues_.erase(name);
  if (m.config) config_ = m.config;
  for (const RequestRecord& r : m.requests_put) {
    requests_[{r.queue, r.request_id}] = r;
  }
  for (const auto& key : m.requests_deleted) requests_.erase(key);
  for (const auto& [queue, entry] : m.ledger_put) ledger_[queue] = entry;
  for (const QueueName& queue : m.ledger_deleted) ledger_.erase(queue);
  for (const Event& event : m.events) events_[event.revision] = event;
  if (m.trim_events_before > 0) {
    events_.erase(events_.begin(), events_.lower_bound(m.trim_events_before));
  }
  meta_ = m.meta;
  if (m.startup_files) startup_files_ = *m.startup_files;
  ++commits_;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Event>> MemoryStore::ReadEvents(int64_t after,
                                                           int limit, size_t) {
  if (after + 1 < meta_.first_retained_revision) {
    return absl::OutOfRangeError(absl::StrCat("after_revision: ", after,
                                              " has been trimmed; oldest is ",
                                              meta_.first_retained_revision));
  }
  std::vector<Event> out;
  for (auto it = events_.upper_bound(after);
       it != events_.end() && static_cast<int>(out.size()) < limit; ++it) {
    out.push_back(it->second);
  }
  return out;
}

}  // namespace phalanx::core
