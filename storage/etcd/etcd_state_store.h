// EtcdStateStore: core's StateStore for the HA mode (docs/ha.md). The
// replicated log lives in etcd — one entry per scheduler-loop batch, key
// PREFIX/log/<seq> (20-digit, zero-padded), value a LogBatch — and each
// replica materializes it in its own RocksDbStore, which serves LoadAll and
// the reads.
//
// Commit is ONE etcd transaction, fenced by the leader's election key:
//   if   create_revision(PREFIX/leader) == term    (still the leader)
//   and  create_revision(PREFIX/log/<seq>) == 0    (the next free entry)
//   then put PREFIX/log/<seq>
// and only then the batch is applied locally. A replica that is not the
// leader of `term` — deposed, paused and woken up, or behind the log — can
// therefore never append. A batch whose entry would exceed
// Options::max_batch_bytes is refused (ResourceExhausted), never split: a
// batch is atomic, and a split one could be half committed by a leader that
// dies between its parts.
//
// Thread-compatible: one writer (the scheduler loop) calls Commit, CatchUp
// and set_term; the reads may run concurrently with them.
#ifndef PHALANX_STORAGE_ETCD_ETCD_STATE_STORE_H_
#define PHALANX_STORAGE_ETCD_ETCD_STATE_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/state_store.h"
#include "storage/etcd/etcd_client.h"
#include "storage/rocksdb_store.h"

namespace phalanx::storage::etcd {

// etcd's default --max-request-bytes is 1.5 MiB; a log entry stays below it
// with room for the transaction's keys and compares.
constexpr size_t kDefaultMaxBatchBytes = (3u << 19) - (64u << 10);

struct EtcdStateStoreOptions {
  std::string prefix;  // "/phalanx/NAME", no trailing slash
  size_t max_batch_bytes = kDefaultMaxBatchBytes;
  // Log entries fetched per Range while catching up.
  int catch_up_page = 64;
};

class EtcdStateStore : public core::StateStore, public core::AuditStore {
 public:
  // `client` must outlive the store; `local` is this replica's RocksDB.
  EtcdStateStore(EtcdClient* client, std::unique_ptr<RocksDbStore> local,
                 EtcdStateStoreOptions options);

  // The term (the election key's create revision) every later Commit is
  // fenced by; 0 = not leading, and Commit fails with FailedPrecondition.
  void set_term(int64_t term) { term_ = term; }
  int64_t term() const { return term_.load(); }

  // Applies every log entry after the last applied seq to the local store,
  // in order; returns how many. Fails with DataLoss on a gap or an entry
  // that does not parse.
  absl::StatusOr<int64_t> CatchUp();
  // Called by CatchUp (not Commit) after each log entry it applies
  // locally, with the entry's mutation and seq, on CatchUp's thread: a
  // follower updates its read view from it. Set before CatchUp runs.
  using ApplyListener =
      std::function<void(const core::Mutation& mutation, int64_t seq)>;
  void set_apply_listener(ApplyListener listener) {
    apply_listener_ = std::move(listener);
  }
  // The last log seq applied locally.
  int64_t applied_seq() const { return applied_seq_.load(); }
  // This replica's RocksDB (for its metrics; never written to directly).
  RocksDbStore* local() { return local_.get(); }

  // Catches up with the log, then loads the local store.
  absl::StatusOr<core::LoadedState> LoadAll() override;
  // Appends `mutation` to the log (fenced, see above), then applies it
  // locally. Fails with FailedPrecondition when not leading, Aborted when
  // the fence refused the append (another leader, or the log moved on),
  // ResourceExhausted when the batch is too large, or etcd's error.
  absl::Status Commit(const core::Mutation& mutation) override;
  absl::StatusOr<std::vector<core::Event>> ReadEvents(
      int64_t after, int limit, size_t max_bytes = SIZE_MAX) override;
  absl::StatusOr<std::vector<core::AuditRecord>> ReadAudit(int64_t after,
                                                           int limit) override;
  absl::StatusOr<int64_t> LastAuditSequence() override;

  // PREFIX/leader and PREFIX/log/<seq>.
  std::string LeaderKey() const;
  std::string LogKey(int64_t seq) const;

 private:
  // The fenced append transaction for entry `seq` holding `bytes`.
  epb::TxnRequest AppendTxn(int64_t seq, const std::string& bytes) const;
  // Why a refused append was refused; OK when the entry already holds
  // `bytes` under our term (our own earlier attempt, retried).
  absl::Status Refusal(const epb::TxnResponse& response, int64_t seq,
                       const std::string& bytes) const;
  // Parses and applies one entry.
  absl::Status ApplyEntry(const mvccpb::KeyValue& kv, int64_t seq);

  EtcdClient* client_;
  std::unique_ptr<RocksDbStore> local_;
  const EtcdStateStoreOptions options_;
  std::atomic<int64_t> term_{0};
  std::atomic<int64_t> applied_seq_{0};
  ApplyListener apply_listener_;
};

}  // namespace phalanx::storage::etcd

#endif  // PHALANX_STORAGE_ETCD_ETCD_STATE_STORE_H_
