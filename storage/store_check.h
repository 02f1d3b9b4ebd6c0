// The store's consistency check: what every data dir must satisfy however
// it was written (a clean stop, a crash, a full disk, an HA replica's
// applied log). Used by the fault tests after each fault heals and by
// `phalanxd --check-store` (docs/operations.md). Each check returns the
// first inconsistency it finds as DataLoss, naming the family and key of
// the record and the field that is wrong
// (`gangs/g-000007: placement[2].gpu_indices: GPU 3 of node n1 is also held
// by gang g-000004`). Stateless functions; thread-safe.
#ifndef PHALANX_STORAGE_STORE_CHECK_H_
#define PHALANX_STORAGE_STORE_CHECK_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/state_store.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
class Env;
struct ReadOptions;
}  // namespace rocksdb

namespace phalanx::storage {

// Opens the data dir `dir` read-only (through `env`; null = RocksDB's
// default) and runs RocksDbStore::CheckConsistency on it, writing nothing
// but RocksDB's lock file `dir`/LOCK (created when missing). Holds that
// lock meanwhile, as a read-write open does, so no phalanxd opens the store
// during the check. Fails with FailedPrecondition when a process holds it
// (a running phalanxd: a writer's compactions would remove files under the
// check) or it cannot be taken, NotFound when `dir` is no directory, the
// open's error when it is no store, DataLoss naming the first
// inconsistency.
absl::Status CheckStoreConsistency(const std::string& dir,
                                   rocksdb::Env* env = nullptr);

// What RocksDbStore::CheckConsistency runs, in this order.
//
// Each record of each family as read by `read`: it parses, its key is the
// one its value names (a node's id, a gang's id, an event's revision, an
// audit record's sequence, a request's queue and id), a gang's state is a
// known one, events lie within [meta.first_retained_revision,
// meta.last_revision], the meta and config families hold only their known
// keys and the default family nothing. `handles` is indexed by family; a
// null handle is a family the data dir lacks, read as empty.
absl::Status CheckRecords(
    rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& handles,
    const rocksdb::ReadOptions& read, const core::Meta& meta);
// The references between the records of `state`: every gang holding GPUs
// (ADMITTED, RUNNING, PREEMPTING) holds them on nodes the store has, at GPU
// indices below the node's GPU count, and no GPU is held by two gangs; a
// waiting or active gang's queue exists; every gang id and every request
// record's gang id was issued (below meta.next_gang_seq); no gang is newer
// than meta.last_revision; every ledger entry's queue exists. Then the
// state must restore as a start-up restores it (core::Scheduler::Restore).
absl::Status CheckLoadedState(const core::LoadedState& state);

}  // namespace phalanx::storage

#endif  // PHALANX_STORAGE_STORE_CHECK_H_
