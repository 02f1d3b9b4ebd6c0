// MemoryStore: a StateStore kept in memory, for core tests and the
// simulator. Commit applies a mutation to the held state exactly as the
// RocksDB store does to disk. Not thread-safe.
#ifndef PHALANX_CORE_MEMORY_STORE_H_
#define PHALANX_CORE_MEMORY_STORE_H_

#include <map>
#include <utility>

#include "core/state_store.h"

namespace phalanx::core {

class MemoryStore : public StateStore {
 public:
  absl::StatusOr<LoadedState> LoadAll() override;
  absl::Status Commit(const Mutation& mutation) override;
  absl::StatusOr<std::vector<Event>> ReadEvents(
      int64_t after, int limit, size_t max_bytes = SIZE_MAX) override;

  // Number of successful commits.
  int commits() const { return commits_; }

 private:
  std::optional<Config> config_;
  std::map<NodeId, Node> nodes_;
  std::map<QueueName, Queue> queues_;
  std::map<GangId, Gang> gangs_;
  std::map<std::pair<QueueName, std::string>, RequestRecord> requests_;
  std::map<int64_t, Event> events_;
  std::map<QueueName, LedgerEntry> ledger_;
  Meta meta_;
  StartupFileHashes startup_files_;
  int commits_ = 0;
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_MEMORY_STORE_H_
