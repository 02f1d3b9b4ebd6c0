// RocksDbStore: the StateStore of docs/design.md §7 on an embedded RocksDB. One
// column family per kind of record; values are the protobuf messages of proto/.
// Commit writes one atomic WriteBatch with sync=true, so a mutation is durable
// when Commit returns OK (docs/storage.md has the durability argument).
// A write the file system refuses for lack of space or quota fails with
// ResourceExhausted and writes nothing; the next write first resumes RocksDB
// (DB::Resume) and succeeds once space is free. Other I/O errors are
// Internal. Open on a full disk opens the store read-only (reads and Freeze
// work; it holds the data dir's LOCK as a writer does) and the first write
// after space frees reopens it read-write.
//
// The data dir carries a schema version (meta column family, key
// "schema_version"): Open migrates an older one in place and refuses a newer
// one.
//
// Thread-safe: Commit is meant for one writer (the scheduler loop); ReadEvents
// may run concurrently from any thread.
#ifndef PHALANX_STORAGE_ROCKSDB_STORE_H_
#define PHALANX_STORAGE_ROCKSDB_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/state_store.h"
#include "storage/sync/mutex.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
struct DBOptions;
class Env;
class FileLock;
class Snapshot;
class Statistics;
class Status;
class WriteBatch;
}  // namespace rocksdb

namespace phalanx::storage {
namespace v1 {
class LogBatch;
}  // namespace v1

// A consistent read-only view of a RocksDbStore at one instant (a RocksDB
// snapshot), made by RocksDbStore::Freeze: the HA mode's snapshots are
// written from it while commits go on (docs/ha.md). Holds the snapshot, and
// shares the RocksDB instance it was taken from, until destroyed: a view
// frozen while the store was read-only (a full disk) stays valid after the
// store reopens read-write. Must not outlive the store. Thread-compatible.
class FrozenState {
 public:
  ~FrozenState();
  FrozenState(const FrozenState&) = delete;
  FrozenState& operator=(const FrozenState&) = delete;

  // The HA log seq applied in this view; 0 when none.
  int64_t log_seq() const { return log_seq_; }
  // Visits every record of the view as LogBatch parts holding puts only
  // (gangs, nodes, queues, config, requests, ledger, retained events, audit
  // records; every part carries the meta), each part's records totalling at
  // most `part_bytes` (a single larger record gets a part of its own).
  // Applying every part to an empty store gives this view's state. Stops
  // at, and returns, the first error of `emit`.
  absl::Status Export(
      size_t part_bytes,
      const std::function<absl::Status(v1::LogBatch&)>& emit) const;
  // The whole state of the view, as RocksDbStore::LoadAll reads the live
  // one (a follower's read-only scheduler is restored from it, docs/ha.md).
  absl::StatusOr<core::LoadedState> Load() const;

 private:
  friend class RocksDbStore;
  FrozenState() = default;
  std::shared_ptr<rocksdb::DB> db_;
  const rocksdb::Snapshot* snapshot_ = nullptr;
  // By Family; null for a family the instance lacks (rocksdb_layout.h).
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  int64_t log_seq_ = 0;
};

class RocksDbStore : public core::StateStore, public core::AuditStore {
 public:
  struct Options {
    // fsync the WAL on every commit. Only benchmarks may turn this off.
    bool sync = true;
    // Bound on the WAL, so rarely written column families do not keep old
    // WAL files alive and make restarts replay them.
    uint64_t max_total_wal_size = 64ull << 20;
    // The Env every file goes through; null = RocksDB's default (the
    // production path). Tests pass one over storage/crash_test_fs.h to
    // simulate power loss. Not owned; must outlive the store.
    rocksdb::Env* env = nullptr;
    // Open without writing anything, and refuse every write
    // (FailedPrecondition). Such an open does not take the data dir's lock:
    // its caller must keep writers out (phalanxd --check-store holds the
    // lock itself; storage/store_check.h), as a writer's compactions
    // remove files under a reader. An older schema version is read as it
    // is, not migrated; a column family it lacks reads as empty.
    bool read_only = false;
  };

  // The schema version this build writes. Version 1 is a data dir written
  // before versions existed (no "schema_version" key).
  static constexpr int kSchemaVersion = 2;

  // Opens (creating when missing) the store in `dir`, migrating an older
  // schema version to kSchemaVersion. Fails with FailedPrecondition when the
  // data dir has a newer schema version than this build knows.
  static absl::StatusOr<std::unique_ptr<RocksDbStore>> Open(
      const std::string& dir, Options options);
  static absl::StatusOr<std::unique_ptr<RocksDbStore>> Open(
      const std::string& dir) {
    return Open(dir, Options{});
  }
  ~RocksDbStore() override;

  absl::StatusOr<core::LoadedState> LoadAll() override;
  absl::Status Commit(const core::Mutation& mutation) override;
  absl::StatusOr<std::vector<core::Event>> ReadEvents(
      int64_t after, int limit, size_t max_bytes = SIZE_MAX) override;
  absl::StatusOr<std::vector<core::AuditRecord>> ReadAudit(int64_t after,
                                                           int limit) override;
  absl::StatusOr<int64_t> LastAuditSequence() override;

  // Commits `mutation`, the HA log's entry `seq` (docs/ha.md), and records
  // `seq` as applied in the same atomic write.
  absl::Status ApplyLogBatch(const core::Mutation& mutation, int64_t seq);
  // The last log seq applied; 0 when none.
  absl::StatusOr<int64_t> LogSeq();
  // Pins the store's current state (cheap: a RocksDB snapshot; no copy).
  // Commits may go on while the view is read, also the first one after a
  // full disk, which reopens the store. Thread-safe.
  absl::StatusOr<std::unique_ptr<FrozenState>> Freeze();
  // Replaces the whole state, atomically and durably, by the parts `next`
  // returns (until it returns nullopt; Mutations of puts, as a snapshot's
  // chunks decode), and records `seq` as the applied log seq: readers see
  // the old state or the new one, never a mix, and a crash leaves either.
  // The schema version is kept. Nothing is written when `next` fails.
  // Holds the parts' encoding in memory until the write.
  using PartSource =
      std::function<absl::StatusOr<std::optional<core::Mutation>>()>;
  absl::Status ReplaceAll(const PartSource& next, int64_t seq);

  // Runs the store's consistency check (storage/store_check.h) on one
  // consistent view of it: OK, or DataLoss naming the first inconsistent
  // record and field. Thread-safe; commits may go on meanwhile.
  absl::Status CheckConsistency();

  // WAL fsyncs since open (RocksDB's WAL_FILE_SYNCED ticker).
  uint64_t WalSyncs() const;
  // The schema version the data dir had before Open migrated it (0 for a new
  // data dir); equal to kSchemaVersion when nothing was migrated.
  int opened_schema_version() const { return opened_schema_version_; }

  // Writes a RocksDB checkpoint of the store to `dir` (absolute; must not
  // exist or be an empty directory; its parent must exist) and returns the
  // revision it holds: the last committed batch's meta.last_revision. No
  // Commit runs while it is taken, so the checkpoint holds exactly the
  // batches up to that revision. SST files are hard-linked when `dir` is on
  // the same file system, else copied. Fails with InvalidArgument for a
  // relative path and FailedPrecondition for an existing non-empty `dir` or
  // a missing parent. Thread-safe.
  absl::StatusOr<int64_t> CreateCheckpoint(const std::string& dir);
  // Oldest revision still readable by ReadEvents.
  int64_t first_retained_revision() const { return first_retained_.load(); }

 private:
  RocksDbStore() = default;
  // Reads the schema version, migrates it to kSchemaVersion (unless
  // read-only) or refuses it.
  absl::Status CheckSchema();
  // Records kSchemaVersion over the opened_schema_version_ CheckSchema read
  // (nothing when equal): RocksDB's status of that write.
  rocksdb::Status MigrateSchema();
  // OK when a write may go on, reopening a store that a full disk left
  // read-only (ResourceExhausted while still full); FailedPrecondition
  // naming `what` when opened with Options::read_only.
  absl::Status Writable(absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // A view of the store's current state (Freeze without its log seq).
  std::unique_ptr<FrozenState> Pin();
  // Commit, also recording `log_seq` when it is > 0.
  absl::Status Write(const core::Mutation& mutation, int64_t log_seq);
  // The status of a failed write: ResourceExhausted (and a resume before
  // the next write) when the disk is full, else Internal.
  absl::Status WriteError(const rocksdb::Status& s, absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // The ResourceExhausted of a write refused for lack of space (`s`, during
  // `what`), naming the data dir; the next write resumes RocksDB first.
  absl::Status NoSpace(const rocksdb::Status& s, absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // The options every open of the data dir uses.
  rocksdb::DBOptions DbOptions() const;
  // Replaces the read-only instance by a read-write one and migrates an
  // older schema; on a disk still full, opens it read-only again and fails
  // with ResourceExhausted.
  absl::Status ReopenWritable() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Drops the store's share of the database: closed (flushed unless
  // read-only) now, or when the last frozen view of it is destroyed.
  void CloseDb();
  // Options::env, or RocksDB's default.
  rocksdb::Env& Env() const;
  // Takes the data dir's LOCK into dir_lock_ (storage/rocksdb_layout.h).
  absl::Status LockDir() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Releases dir_lock_, if held.
  void UnlockDir() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Adds `mutation`'s writes (and its meta) to `batch`.
  void AddToBatch(const core::Mutation& mutation, rocksdb::WriteBatch& batch);

  Options options_;
  std::string dir_;
  int opened_schema_version_ = 0;
  // Held by Commit and CreateCheckpoint: a checkpoint sees no half-applied
  // writer.
  Mutex write_mu_;
  // A write failed for lack of space: DB::Resume before the next one.
  bool resume_needed_ ABSL_GUARDED_BY(write_mu_) = false;
  // While read-only on a full disk: the data dir's LOCK, held as the
  // read-write instance holds it (a read-only open takes none), so no
  // other phalanxd or --check-store opens the store meanwhile.
  rocksdb::FileLock* dir_lock_ ABSL_GUARDED_BY(write_mu_) = nullptr;
  // Held shared by readers of db_ and handles_, exclusively (after
  // write_mu_) by ReopenWritable, which replaces them.
  Mutex db_mu_ ABSL_ACQUIRED_AFTER(write_mu_);
  // Opened read-only on a full disk, until ReopenWritable succeeds. Written
  // under write_mu_ and db_mu_; read under either.
  std::atomic<bool> read_only_{false};
  // Shared with the frozen views taken from it; the handles are owned by
  // db_'s deleter, by Family, null for a family a read-only open lacks.
  std::shared_ptr<rocksdb::DB> db_;
  std::shared_ptr<rocksdb::Statistics> statistics_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  std::atomic<int64_t> first_retained_{1};
};

// Big-endian encoding of a revision: keys sort in revision order.
std::string EventKey(int64_t revision);

}  // namespace phalanx::storage

#endif  // PHALANX_STORAGE_ROCKSDB_STORE_H_
