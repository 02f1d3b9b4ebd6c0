// The on-disk layout of RocksDbStore (docs/storage.md): its column
// families, the fixed keys of the config and meta families, the decoding
// helpers every reader of the raw families shares (a family a data dir
// lacks reads as empty), and the data dir's lock. Internal to
// storage/ (rocksdb_store.cc and store_check.cc); nothing here is
// thread-affine.
#ifndef PHALANX_STORAGE_ROCKSDB_LAYOUT_H_
#define PHALANX_STORAGE_ROCKSDB_LAYOUT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/model.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/iterator.h"
#include "rocksdb/slice.h"
#include "rocksdb/status.h"

namespace phalanx::storage {

// Column families, in handle order.
enum Family {
  kDefault,
  kNodes,
  kQueues,
  kGangs,
  kLedger,
  kConfig,
  kEvents,
  kRequests,
  kMeta,
  kAudit,
  kFamilies
};
inline constexpr const char* kFamilyNames[kFamilies] = {
    "default", "nodes",  "queues",   "gangs", "ledger",
    "config",  "events", "requests", "meta",  "audit"};
// In the meta family: the MetaRecord (revisions, the gang id counter).
inline constexpr char kMetaKey[] = "state";
// The stack block of AddToBatch's arena: one record's message (a gang with
// a placement, an event, an audit record) fits in it.
inline constexpr size_t kArenaBlockBytes = 8192;
// The config family's only key.
inline constexpr char kConfigKey[] = "current";
// In the meta family: the data dir's schema version, a decimal number.
inline constexpr char kSchemaVersionKey[] = "schema_version";
// The HA log's last applied seq (docs/ha.md), beside the state it produced.
inline constexpr char kLogSeqKey[] = "log_seq";
// The start-up files' hashes (StartupFilesRecord), beside what they applied.
inline constexpr char kStartupFilesKey[] = "startup_files";

// Internal("`what`: …") for a failed RocksDB status; OK for OK.
inline absl::Status FromRocks(const rocksdb::Status& s,
                              absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", s.ToString()));
}

// The requests family's key of (queue, request_id): the two joined by a NUL.
inline std::string RequestKey(const core::QueueName& queue,
                              const std::string& id) {
  return absl::StrCat(queue.value(), std::string(1, '\0'), id);
}

// An open store's column-family handles, indexed by Family. A handle is null
// for a family the data dir does not have: a read-only open cannot create
// one, so a data dir written before that family existed is read with it
// missing, as an empty family.
using FamilyHandles = std::vector<rocksdb::ColumnFamilyHandle*>;

// An iterator over `family` of `db` as `read` sees it; an empty one when
// `handles` has no such family.
inline std::unique_ptr<rocksdb::Iterator> NewFamilyIterator(
    rocksdb::DB& db, const FamilyHandles& handles, Family family,
    const rocksdb::ReadOptions& read) {
  if (handles[family] == nullptr) {
    return std::unique_ptr<rocksdb::Iterator>(rocksdb::NewEmptyIterator());
  }
  return std::unique_ptr<rocksdb::Iterator>(
      db.NewIterator(read, handles[family]));
}

// Reads `key` of `family` into `value`; NotFound when `handles` has no
// such family.
inline rocksdb::Status GetRecord(rocksdb::DB& db, const FamilyHandles& handles,
                                 Family family,
                                 const rocksdb::ReadOptions& read,
                                 const rocksdb::Slice& key,
                                 std::string* value) {
  if (handles[family] == nullptr) return rocksdb::Status::NotFound();
  return db.Get(read, handles[family], key, value);
}

// Takes the data dir's RocksDB lock file (`dir`/LOCK, through `env`) the
// way a read-write open takes it (RocksDB's fcntl lock, and its table of
// the locks this process holds), so no process opens the store read-write
// until it is released (env.UnlockFile); a read-only open takes none.
// FailedPrecondition "in use by a running phalanxd" when a process holds
// it, or naming the error when it cannot be taken. Defined in
// rocksdb_store.cc.
absl::StatusOr<rocksdb::FileLock*> LockDataDir(rocksdb::Env& env,
                                               const std::string& dir);

// The big-endian seq EventKey wrote; DataLoss on a bad length.
inline absl::StatusOr<int64_t> DecodeSeq(const std::string& value) {
  if (value.size() != 8) return absl::DataLossError("log seq: bad length");
  int64_t seq = 0;
  for (unsigned char byte : value) seq = (seq << 8) | byte;
  return seq;
}

// Parses a stored value into `message`; DataLoss("cannot parse `what`")
// when it is not one.
template <typename Message>
absl::Status ParseInto(const rocksdb::Slice& value, Message* message,
                       absl::string_view what) {
  if (!message->ParseFromArray(value.data(), static_cast<int>(value.size()))) {
    return absl::DataLossError(absl::StrCat("cannot parse ", what));
  }
  return absl::OkStatus();
}

}  // namespace phalanx::storage

#endif  // PHALANX_STORAGE_ROCKSDB_LAYOUT_H_
