// EtcdStateStore: core's StateStore for the HA mode (docs/ha.md). The
// replicated log lives in etcd — one entry per scheduler-loop batch (or
// several, "parts", for a batch larger than one etcd request), key
// PREFIX/log/<seq> (20-digit, zero-padded), value a LogBatch — and each
// replica materializes it in its own RocksDbStore, which serves LoadAll and
// the reads.
//
// Commit appends each entry in ONE etcd transaction fenced by the leader's
// election key:
//   if   create_revision(PREFIX/leader) == term    (still the leader)
//   and  create_revision(PREFIX/log/<seq>) == 0    (the next free entry)
//   and  value(PREFIX/head) == seq - 1             (absent for seq 1)
//   then put PREFIX/log/<seq>, put PREFIX/head = seq
// and only then the batch is applied locally. A replica that is not the
// leader of `term` — deposed, paused and woken up, or behind the log — can
// therefore never append.
//
// A batch whose entry would exceed Options::max_batch_bytes (etcd's request
// limit) is split into "parts" (log.proto, LogBatch.parts): its encoding
// cut in slices, appended as consecutive entries, each its own fenced
// transaction as above. The leader applies the batch locally only after
// its last part committed; every other replica (CatchUp) buffers the parts
// in memory and applies the batch, atomically and at the seq of its last
// part, once that part is read. So the local store's applied seq is always
// the end of a whole batch, and that is the seq snapshots are taken at and
// PREFIX/applied/<ID> publishes. Parts left without their last one (the
// leader lost its term or died between two parts) are orphans: the fence
// keeps their writer from ever appending again, the next leader appends
// after them, and a replica drops the parts it buffered when it reads the
// first entry of another batch. Any batch commits, whatever its size.
//
// Snapshots and compaction (docs/ha.md): after a Commit that brings the log
// since the last snapshot to Options::snapshot_every_entries entries or
// snapshot_every_bytes bytes, the store pins its local RocksDB at that seq
// (a RocksDB snapshot: microseconds, on the committing thread) and a
// background thread writes it to etcd as chunks under
// PREFIX/snapshot/<seq>/<i>, each Txn fenced by the term, then the manifest
// PREFIX/manifest/<seq>; then, fenced too, deletes the log up to
// min(seq, every other live replica's PREFIX/applied/<ID>) and the older
// snapshots, and compacts etcd's history to that delete's revision. Commit
// never waits for it. CatchUp loads the newest complete snapshot (one
// atomic local write) when the entries it needs are gone, then applies the
// log after it. Every replica's CatchUp also publishes its applied seq
// under PREFIX/applied/<Options::replica_id>, on a lease of its own.
//
// Thread-compatible: one writer (the scheduler loop) calls Commit, CatchUp,
// TakeSnapshot and set_term; the reads may run concurrently with them.
#ifndef PHALANX_STORAGE_ETCD_ETCD_STATE_STORE_H_
#define PHALANX_STORAGE_ETCD_ETCD_STATE_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/state_store.h"
#include "phalanx/storage/v1/log.pb.h"
#include "storage/etcd/etcd_client.h"
#include "storage/rocksdb_store.h"
#include "storage/sync/mutex.h"

namespace phalanx::storage::etcd {

// etcd's default --max-request-bytes is 1.5 MiB; a log entry stays below it
// with room for the transaction's keys and compares.
constexpr size_t kDefaultMaxBatchBytes = (3u << 19) - (64u << 10);

struct EtcdStateStoreOptions {
  std::string prefix;  // "/phalanx/NAME", no trailing slash
  size_t max_batch_bytes = kDefaultMaxBatchBytes;
  // Log entries fetched per Range while catching up (fewer when
  // max_batch_bytes is large, so a page of full parts stays well under the
  // client's receive bound).
  int catch_up_page = 64;

  // This replica's id: CatchUp publishes its applied seq under
  // PREFIX/applied/<replica_id>; empty = publish nothing.
  std::string replica_id;
  // The TTL of the lease the applied key is attached to: a replica that
  // stops publishing holds the log back at most this long.
  absl::Duration applied_ttl = absl::Seconds(30);
  // A changed applied seq is published at most this often.
  absl::Duration applied_interval = absl::Seconds(1);

  // The leader snapshots after this many log entries, or this many log
  // bytes, since the last snapshot; 0 = never on its own (TakeSnapshot
  // still works).
  int64_t snapshot_every_entries = 10000;
  size_t snapshot_every_bytes = 64u << 20;
  // The records in one snapshot chunk (one etcd request), in bytes; at most
  // max_batch_bytes.
  size_t snapshot_chunk_bytes = 1u << 20;
  // Tests only: a snapshot stops (as if the leader crashed) after writing
  // this many chunks, before its manifest; -1 = never.
  int snapshot_crash_after_chunks = -1;
  // Tests only: a Commit split into parts stops (as if the leader died)
  // after appending this many of them, failing with Aborted; -1 = never.
  int commit_crash_after_parts = -1;
};

// A Txn compare: create_revision(key) == revision (0 = the key is absent).
epb::Compare CreateRevisionIs(const std::string& key, int64_t revision);

// What one snapshot wrote and compacted.
struct SnapshotInfo {
  int64_t seq = 0;                  // the state after this log entry
  int chunks = 0;                   // etcd requests of records
  int64_t bytes = 0;                // their size in all
  int64_t log_deleted_through = 0;  // log entries <= this were deleted
  int64_t compacted_revision = 0;   // etcd history compacted to this
  absl::Duration took;
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
  // What a leader's Commit knows of its lease. With `valid_until` set, an
  // append that fails on etcd's side (UNAVAILABLE, DEADLINE_EXCEEDED: a
  // member down or cut off) is retried, on the next member, until that
  // time; then the commit fails with Aborted, as a refused fence does.
  // `on_deposed`, when set, runs with every Aborted of an append before
  // Commit returns it (the daemon exits there). Set before the first
  // Commit, from the writer thread.
  struct LeaseFence {
    std::function<absl::Time()> valid_until;
    std::function<void(const absl::Status& why)> on_deposed;
  };
  void set_lease_fence(LeaseFence fence) { lease_fence_ = std::move(fence); }

  // Applies every log entry after the last applied seq to the local store,
  // in order; returns how many. Fails with DataLoss on a gap or an entry
  // that does not parse.
  absl::StatusOr<int64_t> CatchUp();
  // Called by CatchUp (not Commit) after each batch it applies locally,
  // with the batch's mutation, the seq it was applied at (its last part's)
  // and `after`, the applied seq it was applied on (the previous batch's;
  // orphan parts in between are skipped), on CatchUp's thread: a follower
  // updates its read view from it. Set before CatchUp runs.
  using ApplyListener = std::function<void(const core::Mutation& mutation,
                                           int64_t seq, int64_t after)>;
  void set_apply_listener(ApplyListener listener) {
    apply_listener_ = std::move(listener);
  }
  // The last log seq applied locally: always the end of a whole batch.
  int64_t applied_seq() const { return applied_seq_.load(); }
  // The last log seq read: applied_seq(), or later when parts of a batch
  // not yet complete (or orphans) were read after it.
  int64_t read_seq() const { return read_seq_.load(); }
  // Snapshots CatchUp has loaded since the store was made: when it grows,
  // the local state was replaced wholesale (a follower's read view must be
  // rebuilt from LoadAll rather than from applied entries).
  int64_t snapshots_loaded() const { return snapshots_loaded_.load(); }

  // Publishes applied_seq() under PREFIX/applied/<replica_id> on this
  // store's lease (granted, and renewed every applied_ttl/3, here), at most
  // once per applied_interval unless the lease needs renewing; a no-op
  // without a replica_id. CatchUp calls it; a daemon that does not catch up
  // for longer than applied_ttl may call it from a timer.
  absl::Status PublishApplied();

  // Writes a snapshot of the local state now (waiting for one in flight
  // first), deletes the log and older snapshots it makes unnecessary and
  // compacts etcd. Fails with FailedPrecondition when not leading, Aborted
  // when the fence refused a chunk (nothing is published then). Called by
  // the writer thread (tests, benches, operators); Commit starts the same
  // work in the background on its own.
  absl::StatusOr<SnapshotInfo> TakeSnapshot();
  // Waits for a background snapshot in flight; returns its result
  // (NotFound when none ran since the last call).
  absl::StatusOr<SnapshotInfo> WaitForSnapshot();
  // This replica's RocksDB (for its metrics; never written to directly).
  RocksDbStore* local() { return local_.get(); }

  // Catches up with the log, then loads the local store.
  absl::StatusOr<core::LoadedState> LoadAll() override;
  // Appends `mutation` to the log (fenced, see above; in parts when it is
  // larger than max_batch_bytes), then applies it locally. Fails with
  // FailedPrecondition when not leading, Aborted when the fence refused an
  // append (another leader, or the log moved on), ResourceExhausted naming
  // etcd's space quota while etcd is over it (NOSPACE alarm: the caller
  // retries the same mutation once space is freed), or etcd's error;
  // nothing is applied locally then (parts already appended are orphans).
  absl::Status Commit(const core::Mutation& mutation) override;
  absl::StatusOr<std::vector<core::Event>> ReadEvents(
      int64_t after, int limit, size_t max_bytes = SIZE_MAX) override;
  absl::StatusOr<std::vector<core::AuditRecord>> ReadAudit(int64_t after,
                                                           int limit) override;
  absl::StatusOr<int64_t> LastAuditSequence() override;

  // PREFIX/head (the last seq appended, decimal): never deleted.
  std::string HeadKey() const;
  // PREFIX/leader, PREFIX/log/<seq>, PREFIX/applied/<id>,
  // PREFIX/snapshot/<seq>/<chunk> and PREFIX/manifest/<seq>.
  std::string LeaderKey() const;
  std::string LogKey(int64_t seq) const;
  std::string AppliedKey(const std::string& replica_id) const;
  std::string ChunkKey(int64_t seq, int chunk) const;
  std::string ManifestKey(int64_t seq) const;

  ~EtcdStateStore() override;

 private:
  // The fenced append transaction for entry `seq` holding `bytes`.
  epb::TxnRequest AppendTxn(int64_t seq, const std::string& bytes) const;
  // Appends entry `seq` holding `bytes` (fenced).
  absl::Status AppendEntry(int64_t seq, const std::string& bytes);
  // One append Txn, retried as LeaseFence says; the Txn's response.
  absl::StatusOr<epb::TxnResponse> SendAppend(const epb::TxnRequest& txn);
  // Runs LeaseFence::on_deposed for an Aborted `status`; returns it.
  absl::Status Deposed(absl::Status status) const;
  // Appends `bytes`, the encoding of the batch starting at `first`, as one
  // entry or as parts; returns the seq of its last entry.
  absl::StatusOr<int64_t> AppendBatch(int64_t first, const std::string& bytes);
  // Why a refused append was refused; OK when the entry already holds
  // `bytes` under our term (our own earlier attempt, retried).
  absl::Status Refusal(const epb::TxnResponse& response, int64_t seq,
                       const std::string& bytes) const;
  // Parses one entry; applies it, buffers it (a part), or applies the
  // batch it completes.
  absl::Status ApplyEntry(const mvccpb::KeyValue& kv, int64_t seq);
  // Adds part `batch` (entry `seq`) to pending_; DataLoss when it does not
  // continue the batch buffered there, or starts none.
  absl::Status BufferPart(storage::v1::LogBatch& batch, int64_t seq);
  // Applies a whole batch at `seq` locally and tells the listener.
  absl::Status ApplyBatch(const core::Mutation& mutation, int64_t seq);
  // Drops the buffered parts of an unfinished batch (orphans); `seq` is
  // the entry that shows they are.
  void DropOrphans(int64_t seq);
  // The newest complete snapshot's manifest and the revision it was read
  // at; NotFound when there is none.
  absl::StatusOr<std::pair<storage::v1::SnapshotManifest, int64_t>>
  NewestManifest();
  // Replaces the local state by the newest complete snapshot, which must
  // hold at least entry `need`. Fails with DataLoss when none does.
  absl::Status LoadSnapshot(int64_t need);
  // Writes `frozen` as a snapshot fenced by `term`, then compacts.
  absl::StatusOr<SnapshotInfo> WriteSnapshot(const FrozenState& frozen,
                                             int64_t term);
  // Deletes what the snapshot at `seq` makes unnecessary; compacts etcd.
  absl::Status Compact(int64_t seq, int64_t term, SnapshotInfo& info);
  // The lowest applied seq another live replica published; INT64_MAX when
  // none did.
  absl::StatusOr<int64_t> SlowestOtherReplica();
  // Counts `entries` log entries of `bytes` in all since the last
  // snapshot; starts a background one when due and none is in flight.
  void MaybeSnapshot(int64_t entries, size_t bytes);
  // Joins the background snapshot thread, if any.
  void JoinSnapshot();

  EtcdClient* client_;
  std::unique_ptr<RocksDbStore> local_;
  const EtcdStateStoreOptions options_;
  std::atomic<int64_t> term_{0};
  std::atomic<int64_t> applied_seq_{0};
  std::atomic<int64_t> read_seq_{0};
  // The parts read of a batch not yet complete (the writer thread's).
  struct Pending {
    int64_t batch_seq = 0;  // 0 = none
    int32_t parts = 0;
    int32_t next_part = 0;
    std::string bytes;  // the slices read so far, concatenated
  };
  Pending pending_;
  std::atomic<int64_t> snapshots_loaded_{0};

  // Since the last snapshot (the writer thread's).
  int64_t entries_since_snapshot_ = 0;
  // The last error publishing the applied seq ("" after a success), so a
  // lasting one (etcd over its quota) is logged once, not at every
  // catch-up. Writer thread only.
  std::string publish_error_;
  size_t bytes_since_snapshot_ = 0;
  std::thread snapshotter_;
  std::atomic<bool> snapshot_running_{false};
  std::atomic<bool> stopping_{false};
  Mutex snapshot_mu_;
  std::optional<absl::StatusOr<SnapshotInfo>> last_snapshot_
      ABSL_GUARDED_BY(snapshot_mu_);

  Mutex publish_mu_;
  int64_t lease_ ABSL_GUARDED_BY(publish_mu_) = 0;
  absl::Time lease_renewed_ ABSL_GUARDED_BY(publish_mu_);
  int64_t published_seq_ ABSL_GUARDED_BY(publish_mu_) = -1;
  absl::Time published_at_ ABSL_GUARDED_BY(publish_mu_);
  ApplyListener apply_listener_;
  LeaseFence lease_fence_;
};

}  // namespace phalanx::storage::etcd

#endif  // PHALANX_STORAGE_ETCD_ETCD_STATE_STORE_H_
