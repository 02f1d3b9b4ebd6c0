#include "storage/rocksdb_store.h"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "core/validate.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "phalanx/storage/v1/log.pb.h"
#include "phalanx/storage/v1/records.pb.h"
#include "phalanx/v1/types.pb.h"
#include "proto/convert.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/statistics.h"
#include "rocksdb/utilities/checkpoint.h"
#include "rocksdb/write_batch.h"
#include "storage/rocksdb_layout.h"
#include "storage/store_check.h"
#include "storage/sync/mutex.h"

namespace phalanx::storage {
namespace {

namespace pb = ::phalanx::v1;

// Whether `s` is the file system refusing a write for lack of space or
// quota (ENOSPC, EDQUOT): RocksDB reports the first as NoSpace, the second
// as a plain IOError carrying strerror's text.
bool OutOfSpace(const rocksdb::Status& s) {
  return s.IsNoSpace() ||
         (s.IsIOError() &&
          absl::StrContains(s.ToString(), "Disk quota exceeded"));
}

}  // namespace

absl::StatusOr<rocksdb::FileLock*> LockDataDir(rocksdb::Env& env,
                                               const std::string& dir) {
  const std::string path = dir + "/LOCK";
  rocksdb::FileLock* lock = nullptr;
  const rocksdb::Status s = env.LockFile(path, &lock);
  if (s.ok()) return lock;
  // RocksDB's messages: another process's fcntl lock ("While lock file"),
  // or this process's ("lock hold by current process").
  const std::string why = s.ToString();
  if (absl::StrContains(why, "While lock file") ||
      absl::StrContains(why, "lock hold by current process")) {
    return absl::FailedPreconditionError(absl::StrCat(
        "in use by a running phalanxd (it holds ", path, "): stop it first"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("cannot lock ", path, ": ", why));
}

std::string EventKey(int64_t revision) {
  std::string key(8, '\0');
  for (int i = 7; i >= 0; --i) {
    key[i] = static_cast<char>(revision & 0xff);
    revision >>= 8;
  }
  return key;
}

rocksdb::DBOptions RocksDbStore::DbOptions() const {
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.max_total_wal_size = options_.max_total_wal_size;
  // Every table file open from the start (RocksDB's default, pinned here):
  // a read-only instance then opens no file after Open (it replays the WAL
  // into memory and keeps each table open for its life), so it stays
  // readable while the read-write instance that replaces it
  // (ReopenWritable) deletes files; a frozen view may still hold it.
  db_options.max_open_files = -1;
  if (options_.env != nullptr) db_options.env = options_.env;
  db_options.statistics = statistics_;
  return db_options;
}

namespace {

std::vector<rocksdb::ColumnFamilyDescriptor> Families() {
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const char* name : kFamilyNames) {
    families.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  return families;
}

// `db` owning its column-family `handles`: when the last owner drops it,
// the handles are destroyed and the instance closed, its memtables flushed
// first when `flush` (otherwise the next Open replays them from the WAL
// before LoadAll can start: a third of a restart with 100k gangs;
// bench/perf).
std::shared_ptr<rocksdb::DB> Own(rocksdb::DB* db, FamilyHandles handles,
                                 bool flush) {
  return std::shared_ptr<rocksdb::DB>(
      db, [handles = std::move(handles), flush](rocksdb::DB* db) {
        FamilyHandles open;
        for (rocksdb::ColumnFamilyHandle* handle : handles) {
          if (handle != nullptr) open.push_back(handle);
        }
        // A failed flush (a full disk) only costs that replay.
        if (flush) db->Flush(rocksdb::FlushOptions(), open);
        for (rocksdb::ColumnFamilyHandle* handle : open) {
          db->DestroyColumnFamilyHandle(handle);
        }
        db->Close();
        delete db;
      });
}

// Opens `dir` read-only with the families it has, in `handles` by Family
// (null for a family it lacks: a read-only open cannot create one).
rocksdb::Status OpenReadOnly(const rocksdb::DBOptions& options,
                             const std::string& dir, FamilyHandles& handles,
                             rocksdb::DB** db) {
  std::vector<std::string> names;
  rocksdb::Status listed =
      rocksdb::DB::ListColumnFamilies(options, dir, &names);
  if (!listed.ok()) return listed;
  std::vector<rocksdb::ColumnFamilyDescriptor> present;
  std::vector<int> families;
  for (int family = kDefault; family < kFamilies; ++family) {
    if (std::find(names.begin(), names.end(), kFamilyNames[family]) !=
        names.end()) {
      present.emplace_back(kFamilyNames[family],
                           rocksdb::ColumnFamilyOptions());
      families.push_back(family);
    }
  }
  FamilyHandles opened;
  rocksdb::Status s =
      rocksdb::DB::OpenForReadOnly(options, dir, present, &opened, db);
  if (!s.ok()) return s;
  handles.assign(kFamilies, nullptr);
  for (size_t i = 0; i < opened.size(); ++i) handles[families[i]] = opened[i];
  return s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RocksDbStore>> RocksDbStore::Open(
    const std::string& dir, Options options) {
  std::unique_ptr<RocksDbStore> store(new RocksDbStore());
  store->options_ = options;
  store->dir_ = dir;
  store->statistics_ = rocksdb::CreateDBStatistics();
  rocksdb::DB* db = nullptr;
  store->read_only_ = options.read_only;
  rocksdb::Status opened =
      options.read_only
          ? OpenReadOnly(store->DbOptions(), dir, store->handles_, &db)
          : rocksdb::DB::Open(store->DbOptions(), dir, Families(),
                              &store->handles_, &db);
  if (!options.read_only && OutOfSpace(opened)) {
    // RocksDB's read-write open writes (a new MANIFEST, the OPTIONS file):
    // on a full disk, open read-only; the first write reopens read-write.
    std::fprintf(stderr,
                 "phalanxd: data dir %s is full (%s): opened read-only, "
                 "writes are refused until space is free\n",
                 dir.c_str(), opened.ToString().c_str());
    store->handles_.clear();
    store->read_only_ = true;
    opened = OpenReadOnly(store->DbOptions(), dir, store->handles_, &db);
  }
  RETURN_IF_ERROR(FromRocks(opened, absl::StrCat("open ", dir)));
  store->db_ = Own(db, store->handles_, /*flush=*/!store->read_only_);
  if (store->read_only_ && !options.read_only) {
    MutexLock lock(&store->write_mu_);
    RETURN_IF_ERROR(store->LockDir());
  }
  RETURN_IF_ERROR(store->CheckSchema());
  return store;
}

absl::Status RocksDbStore::ReopenWritable() {
  WriterMutexLock lock(&db_mu_);
  // A frozen view may keep the read-only instance open meanwhile (DbOptions
  // says why that is safe).
  CloseDb();
  UnlockDir();  // the read-write open takes it
  rocksdb::DB* db = nullptr;
  rocksdb::Status opened =
      rocksdb::DB::Open(DbOptions(), dir_, Families(), &handles_, &db);
  if (opened.ok()) {
    db_ = Own(db, handles_, /*flush=*/true);
    read_only_ = false;
    resume_needed_ = false;
    // A data dir of an older schema is migrated now: the read-only open
    // could not.
    opened = MigrateSchema();
    if (opened.ok()) {
      std::fprintf(stderr, "phalanxd: data dir %s reopened read-write\n",
                   dir_.c_str());
      return absl::OkStatus();
    }
    CloseDb();
  }
  handles_.clear();
  RETURN_IF_ERROR(FromRocks(OpenReadOnly(DbOptions(), dir_, handles_, &db),
                            absl::StrCat("reopen read-only ", dir_)));
  db_ = Own(db, handles_, /*flush=*/false);
  read_only_ = true;
  RETURN_IF_ERROR(LockDir());
  return WriteError(opened, "reopen read-write");
}

void RocksDbStore::CloseDb() {
  db_.reset();
  handles_.clear();
}

rocksdb::Env& RocksDbStore::Env() const {
  return options_.env != nullptr ? *options_.env : *rocksdb::Env::Default();
}

absl::Status RocksDbStore::LockDir() {
  ASSIGN_OR_RETURN(dir_lock_, LockDataDir(Env(), dir_));
  return absl::OkStatus();
}

void RocksDbStore::UnlockDir() {
  if (dir_lock_ == nullptr) return;
  Env().UnlockFile(dir_lock_).PermitUncheckedError();
  dir_lock_ = nullptr;
}

// Migration policy (docs/storage.md): each version step is one function
// here, run in order, each committing its changes and the new version in one
// synced WriteBatch, so a crash mid-upgrade leaves either version. Version 1
// to 2 only records the version (the layout did not change).
absl::Status RocksDbStore::CheckSchema() {
  std::string value;
  rocksdb::Status s =
      GetRecord(*db_, handles_, kMeta, {}, kSchemaVersionKey, &value);
  int version = 0;
  if (s.ok()) {
    if (!absl::SimpleAtoi(value, &version) || version < 1) {
      return absl::DataLossError(
          absl::StrCat("data dir schema version is not a positive number: ",
                       core::QuoteForError(value)));
    }
  } else if (s.IsNotFound()) {
    // No version: a data dir of the release before versions (1) when it
    // holds state, else a new one.
    std::string meta;
    s = GetRecord(*db_, handles_, kMeta, {}, kMetaKey, &meta);
    if (s.ok()) {
      version = 1;
    } else if (!s.IsNotFound()) {
      return FromRocks(s, "read meta");
    }
  } else {
    return FromRocks(s, "read schema version");
  }
  opened_schema_version_ = version;
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("data dir schema version ", version,
                     " is newer than this phalanxd supports (", kSchemaVersion,
                     "); upgrade phalanxd"));
  }
  if (read_only_) return absl::OkStatus();  // migrated once writable
  return FromRocks(MigrateSchema(), "write schema version");
}

rocksdb::Status RocksDbStore::MigrateSchema() {
  if (opened_schema_version_ == kSchemaVersion) return rocksdb::Status::OK();
  // Version 0 (new) and 1 -> 2: record the version.
  rocksdb::WriteBatch batch;
  batch.Put(handles_[kMeta], kSchemaVersionKey, std::to_string(kSchemaVersion));
  rocksdb::WriteOptions write_options;
  write_options.sync = true;
  return db_->Write(write_options, &batch);
}

absl::StatusOr<int64_t> RocksDbStore::CreateCheckpoint(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path path(dir);
  if (!path.is_absolute()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "directory: must be an absolute path, not ", core::QuoteForError(dir)));
  }
  std::error_code error;
  if (fs::exists(path, error)) {
    if (!fs::is_directory(path, error)) {
      return absl::FailedPreconditionError(
          absl::StrCat("directory: ", core::QuoteForError(dir),
                       " exists and is not a directory"));
    }
    if (!fs::is_empty(path, error) || error) {
      return absl::FailedPreconditionError(absl::StrCat(
          "directory: ", core::QuoteForError(dir), " exists and is not empty"));
    }
    // RocksDB creates the directory itself (from a temporary one renamed
    // into place).
    fs::remove(path, error);
    if (error) {
      return absl::FailedPreconditionError(
          absl::StrCat("directory: cannot replace the empty directory ",
                       core::QuoteForError(dir), ": ", error.message()));
    }
  } else if (!fs::is_directory(path.parent_path(), error)) {
    return absl::FailedPreconditionError(
        absl::StrCat("directory: the parent of ", core::QuoteForError(dir),
                     " is not an existing directory"));
  }
  MutexLock lock(&write_mu_);
  int64_t revision = 0;
  std::string value;
  rocksdb::Status s = GetRecord(*db_, handles_, kMeta, {}, kMetaKey, &value);
  if (s.ok()) {
    storage::v1::MetaRecord meta;
    RETURN_IF_ERROR(ParseInto(value, &meta, "meta"));
    revision = convert::MetaFromProto(meta).last_revision;
  } else if (!s.IsNotFound()) {
    return FromRocks(s, "read meta");
  }
  rocksdb::Checkpoint* raw = nullptr;
  RETURN_IF_ERROR(
      FromRocks(rocksdb::Checkpoint::Create(db_.get(), &raw), "checkpoint"));
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // log_size_for_flush = 0: flush the memtables first, so the checkpoint
  // holds SST files and only the WAL written since.
  RETURN_IF_ERROR(FromRocks(checkpoint->CreateCheckpoint(dir),
                            absl::StrCat("checkpoint to ", dir)));
  return revision;
}

RocksDbStore::~RocksDbStore() {
  CloseDb();
  MutexLock lock(&write_mu_);
  UnlockDir();
}

uint64_t RocksDbStore::WalSyncs() const {
  return statistics_->getTickerCount(rocksdb::WAL_FILE_SYNCED);
}

namespace {

// The whole state as `read` sees it (a snapshot's, or the latest).
absl::StatusOr<core::LoadedState> ReadState(rocksdb::DB* db,
                                            const FamilyHandles& handles,
                                            const rocksdb::ReadOptions& read);

}  // namespace

absl::StatusOr<core::LoadedState> RocksDbStore::LoadAll() {
  ReaderMutexLock db_lock(&db_mu_);
  ASSIGN_OR_RETURN(core::LoadedState state,
                   ReadState(db_.get(), handles_, rocksdb::ReadOptions()));
  first_retained_ = state.meta.first_retained_revision;
  return state;
}

absl::StatusOr<core::LoadedState> FrozenState::Load() const {
  rocksdb::ReadOptions read;
  read.snapshot = snapshot_;
  return ReadState(db_.get(), handles_, read);
}

namespace {

absl::StatusOr<core::LoadedState> ReadState(rocksdb::DB* db,
                                            const FamilyHandles& handles,
                                            const rocksdb::ReadOptions& read) {
  core::LoadedState state;
  std::string value;
  rocksdb::Status s =
      GetRecord(*db, handles, kConfig, read, kConfigKey, &value);
  if (s.ok()) {
    pb::Config config;
    RETURN_IF_ERROR(ParseInto(value, &config, "config"));
    ASSIGN_OR_RETURN(state.config, convert::ConfigFromProto(config, "config"));
  } else if (!s.IsNotFound()) {
    return FromRocks(s, "read config");
  }
  s = GetRecord(*db, handles, kMeta, read, kMetaKey, &value);
  if (s.ok()) {
    storage::v1::MetaRecord meta;
    RETURN_IF_ERROR(ParseInto(value, &meta, "meta"));
    state.meta = convert::MetaFromProto(meta);
  } else if (!s.IsNotFound()) {
    return FromRocks(s, "read meta");
  }
  s = GetRecord(*db, handles, kMeta, read, kStartupFilesKey, &value);
  if (s.ok()) {
    storage::v1::StartupFilesRecord record;
    RETURN_IF_ERROR(ParseInto(value, &record, "startup files"));
    state.startup_files = convert::StartupFilesFromProto(record);
  } else if (!s.IsNotFound()) {
    return FromRocks(s, "read startup files");
  }

  auto scan = [&](Family family, auto&& each) -> absl::Status {
    std::unique_ptr<rocksdb::Iterator> it =
        NewFamilyIterator(*db, handles, family, read);
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      RETURN_IF_ERROR(each(it->key(), it->value()));
    }
    return FromRocks(it->status(), kFamilyNames[family]);
  };
  RETURN_IF_ERROR(
      scan(kNodes, [&](auto, const rocksdb::Slice& v) -> absl::Status {
        pb::Node node;
        RETURN_IF_ERROR(ParseInto(v, &node, "node"));
        ASSIGN_OR_RETURN(core::Node n, convert::NodeFromProto(node, "node"));
        state.nodes.push_back(std::move(n));
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(
      scan(kQueues, [&](auto, const rocksdb::Slice& v) -> absl::Status {
        pb::Queue queue;
        RETURN_IF_ERROR(ParseInto(v, &queue, "queue"));
        state.queues.push_back(convert::QueueFromProto(queue));
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(
      scan(kGangs, [&](auto, const rocksdb::Slice& v) -> absl::Status {
        pb::Gang gang;
        RETURN_IF_ERROR(ParseInto(v, &gang, "gang"));
        ASSIGN_OR_RETURN(core::Gang g, convert::GangFromProto(gang));
        state.gangs.push_back(std::move(g));
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(scan(
      kRequests,
      [&](const rocksdb::Slice& k, const rocksdb::Slice& v) -> absl::Status {
        storage::v1::RequestRecord record;
        RETURN_IF_ERROR(ParseInto(v, &record, "request"));
        const std::string key = k.ToString();
        const size_t split = key.find('\0');
        state.requests.push_back(convert::RequestFromProto(
            record, core::QueueName(key.substr(0, split)),
            key.substr(split + 1)));
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(scan(
      kLedger,
      [&](const rocksdb::Slice& k, const rocksdb::Slice& v) -> absl::Status {
        storage::v1::LedgerRecord record;
        RETURN_IF_ERROR(ParseInto(v, &record, "ledger"));
        state.ledger.emplace_back(core::QueueName(k.ToString()),
                                  convert::LedgerFromProto(record));
        return absl::OkStatus();
      }));
  return state;
}

}  // namespace

absl::Status RocksDbStore::CheckConsistency() {
  // One consistent view, read without the store's locks: commits go on.
  // (Not Freeze: a bad log seq is for the record checks to name.)
  const std::unique_ptr<FrozenState> frozen = Pin();
  absl::StatusOr<core::LoadedState> state = frozen->Load();
  // A record that does not load is named by the record checks (with no
  // meta to bound the events by, when the meta is the one).
  core::Meta meta = state.ok() ? state->meta : core::Meta{};
  if (!state.ok()) meta.last_revision = INT64_MAX;
  rocksdb::ReadOptions read;
  read.snapshot = frozen->snapshot_;
  RETURN_IF_ERROR(
      CheckRecords(frozen->db_.get(), frozen->handles_, read, meta));
  RETURN_IF_ERROR(state.status());
  return CheckLoadedState(*state);
}

absl::Status RocksDbStore::Commit(const core::Mutation& m) {
  return Write(m, 0);
}

absl::Status RocksDbStore::ApplyLogBatch(const core::Mutation& m, int64_t seq) {
  return Write(m, seq);
}

absl::StatusOr<int64_t> RocksDbStore::LogSeq() {
  ReaderMutexLock db_lock(&db_mu_);
  std::string value;
  rocksdb::Status s = GetRecord(*db_, handles_, kMeta, {}, kLogSeqKey, &value);
  if (s.IsNotFound()) return 0;
  RETURN_IF_ERROR(FromRocks(s, "read log seq"));
  return DecodeSeq(value);
}

std::unique_ptr<FrozenState> RocksDbStore::Pin() {
  ReaderMutexLock db_lock(&db_mu_);
  std::unique_ptr<FrozenState> frozen(new FrozenState());
  // Shared: the view keeps this instance open should ReopenWritable
  // replace it meanwhile.
  frozen->db_ = db_;
  frozen->handles_ = handles_;
  frozen->snapshot_ = db_->GetSnapshot();
  return frozen;
}

absl::StatusOr<std::unique_ptr<FrozenState>> RocksDbStore::Freeze() {
  std::unique_ptr<FrozenState> frozen = Pin();
  rocksdb::ReadOptions read;
  read.snapshot = frozen->snapshot_;
  std::string value;
  rocksdb::Status s = GetRecord(*frozen->db_, frozen->handles_, kMeta, read,
                                kLogSeqKey, &value);
  if (s.ok()) {
    ASSIGN_OR_RETURN(frozen->log_seq_, DecodeSeq(value));
  } else if (!s.IsNotFound()) {
    return FromRocks(s, "read log seq");
  }
  return frozen;
}

FrozenState::~FrozenState() {
  if (snapshot_ != nullptr) db_->ReleaseSnapshot(snapshot_);
}

absl::Status FrozenState::Export(
    size_t part_bytes,
    const std::function<absl::Status(v1::LogBatch&)>& emit) const {
  rocksdb::ReadOptions read;
  read.snapshot = snapshot_;
  storage::v1::MetaRecord meta;
  std::string value;
  rocksdb::Status s = GetRecord(*db_, handles_, kMeta, read, kMetaKey, &value);
  if (s.ok()) {
    RETURN_IF_ERROR(ParseInto(value, &meta, "meta"));
  } else if (!s.IsNotFound()) {
    return FromRocks(s, "read meta");
  }
  std::optional<storage::v1::StartupFilesRecord> startup_files;
  s = GetRecord(*db_, handles_, kMeta, read, kStartupFilesKey, &value);
  if (s.ok()) {
    RETURN_IF_ERROR(
        ParseInto(value, &startup_files.emplace(), "startup files"));
  } else if (!s.IsNotFound()) {
    return FromRocks(s, "read startup files");
  }
  v1::LogBatch part;
  size_t bytes = 0;
  auto flush = [&]() -> absl::Status {
    if (bytes == 0) return absl::OkStatus();
    *part.mutable_meta() = meta;
    if (startup_files) *part.mutable_startup_files() = *startup_files;
    part.set_seq(log_seq_);
    RETURN_IF_ERROR(emit(part));
    part.Clear();
    bytes = 0;
    return absl::OkStatus();
  };
  // Adds one record of `size` bytes, first flushing a part it would overflow.
  auto room = [&](size_t size) -> absl::Status {
    // A record's tag and length take a few bytes beside it.
    size += 8;
    if (bytes > 0 && bytes + size > part_bytes) RETURN_IF_ERROR(flush());
    bytes += size;
    return absl::OkStatus();
  };
  for (int family = kNodes; family < kFamilies; ++family) {
    if (family == kMeta) continue;  // carried by every part
    std::unique_ptr<rocksdb::Iterator> it =
        NewFamilyIterator(*db_, handles_, static_cast<Family>(family), read);
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const rocksdb::Slice v = it->value();
      RETURN_IF_ERROR(room(it->key().size() + v.size()));
      switch (family) {
        case kNodes:
          RETURN_IF_ERROR(ParseInto(v, part.add_nodes_put(), "node"));
          break;
        case kQueues:
          RETURN_IF_ERROR(ParseInto(v, part.add_queues_put(), "queue"));
          break;
        case kGangs:
          RETURN_IF_ERROR(ParseInto(v, part.add_gangs_put(), "gang"));
          break;
        case kLedger: {
          storage::v1::KeyedLedger* keyed = part.add_ledger_put();
          keyed->set_queue(it->key().ToString());
          RETURN_IF_ERROR(ParseInto(v, keyed->mutable_record(), "ledger"));
          break;
        }
        case kConfig:
          RETURN_IF_ERROR(ParseInto(v, part.mutable_config(), "config"));
          break;
        case kEvents:
          RETURN_IF_ERROR(ParseInto(v, part.add_events(), "event"));
          break;
        case kRequests: {
          const std::string key = it->key().ToString();
          const size_t split = key.find('\0');
          if (split == std::string::npos) {
            return absl::DataLossError("request key without a separator");
          }
          storage::v1::KeyedRequest* keyed = part.add_requests_put();
          keyed->mutable_key()->set_queue(key.substr(0, split));
          keyed->mutable_key()->set_request_id(key.substr(split + 1));
          RETURN_IF_ERROR(ParseInto(v, keyed->mutable_record(), "request"));
          break;
        }
        case kAudit:
          RETURN_IF_ERROR(ParseInto(v, part.add_audit_put(), "audit record"));
          break;
        default:
          break;
      }
    }
    RETURN_IF_ERROR(FromRocks(it->status(), kFamilyNames[family]));
  }
  // An empty store still gets one part: its meta.
  if (bytes == 0) bytes = 1;
  return flush();
}

absl::Status RocksDbStore::ReplaceAll(const PartSource& next, int64_t seq) {
  MutexLock lock(&write_mu_);
  RETURN_IF_ERROR(Writable("replace"));
  rocksdb::WriteBatch batch;
  // First delete every record (the single writer holds write_mu_, so the
  // keys read here are the ones the batch replaces).
  for (int family = kNodes; family < kFamilies; ++family) {
    if (family == kMeta) continue;
    std::unique_ptr<rocksdb::Iterator> it =
        NewFamilyIterator(*db_, handles_, static_cast<Family>(family), {});
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      batch.Delete(handles_[family], it->key());
    }
    RETURN_IF_ERROR(FromRocks(it->status(), kFamilyNames[family]));
  }
  batch.Delete(handles_[kMeta], kMetaKey);
  batch.Delete(handles_[kMeta], kStartupFilesKey);
  core::Meta meta;
  for (;;) {
    ASSIGN_OR_RETURN(std::optional<core::Mutation> part, next());
    if (!part) break;
    AddToBatch(*part, batch);
    meta = part->meta;
  }
  batch.Put(handles_[kMeta], kLogSeqKey, EventKey(seq));
  rocksdb::WriteOptions write_options;
  write_options.sync = options_.sync;
  RETURN_IF_ERROR(FromRocks(db_->Write(write_options, &batch), "replace"));
  first_retained_ = meta.first_retained_revision;
  return absl::OkStatus();
}

namespace {

// Appends field `gang` (4, the last field of GangEvent) holding the
// serialized gang `bytes` to a serialized GangEvent: the bytes
// SerializeToString gives for the event with that gang.
void AppendGangField(absl::string_view bytes, std::string& event) {
  using google::protobuf::internal::WireFormatLite;
  static_assert(pb::GangEvent::kGangFieldNumber == 4);
  uint8_t header[16];
  uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(
      WireFormatLite::MakeTag(pb::GangEvent::kGangFieldNumber,
                              WireFormatLite::WIRETYPE_LENGTH_DELIMITED),
      header);
  end = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(
      static_cast<uint32_t>(bytes.size()), end);
  event.append(reinterpret_cast<const char*>(header), end - header);
  event.append(bytes.data(), bytes.size());
}

}  // namespace

void RocksDbStore::AddToBatch(const core::Mutation& m,
                              rocksdb::WriteBatch& batch) {
  std::string buffer;
  // Each record's message is built on an arena whose first block is on the
  // stack and reset after the record is serialized, so a batch's gangs and
  // events allocate little (allocation was ~10 % of the daemon's CPU
  // under submits, much of it these short-lived messages).
  alignas(std::max_align_t) char block[kArenaBlockBytes];
  google::protobuf::ArenaOptions arena_options;
  arena_options.initial_block = block;
  arena_options.initial_block_size = sizeof(block);
  google::protobuf::Arena arena(arena_options);
  auto put = [&](Family family, const std::string& key,
                 const google::protobuf::Message& message) {
    message.SerializeToString(&buffer);
    batch.Put(handles_[family], key, buffer);
    arena.Reset();  // `message` may live on it: not used after this
  };
  // Each stored gang's bytes, kept for the events that carry the same gang
  // (a submit's SUBMITTED event): those are written without converting and
  // serializing the gang a second time.
  std::string gang_bytes;
  absl::flat_hash_map<const core::Gang*, std::pair<size_t, size_t>> spans;
  if (!m.events.empty()) spans.reserve(m.gangs_put.size());
  for (const core::GangPtr& gang : m.gangs_put) {
    auto* proto = google::protobuf::Arena::CreateMessage<pb::Gang>(&arena);
    convert::ToProto(*gang, proto);
    put(kGangs, gang->id.value(), *proto);
    if (!m.events.empty()) {
      spans[gang.get()] = {gang_bytes.size(), buffer.size()};
      gang_bytes.append(buffer);
    }
  }
  for (const core::GangId& id : m.gangs_deleted) {
    batch.Delete(handles_[kGangs], id.value());
  }
  for (const core::Node& node : m.nodes_put) {
    pb::Node proto;
    convert::ToProto(node, &proto);
    put(kNodes, node.spec.id.value(), proto);
  }
  for (const core::NodeId& id : m.nodes_deleted) {
    batch.Delete(handles_[kNodes], id.value());
  }
  for (const core::Queue& queue : m.queues_put) {
    pb::Queue proto;
    convert::ToProto(queue, &proto);
    put(kQueues, queue.name.value(), proto);
  }
  for (const core::QueueName& name : m.queues_deleted) {
    batch.Delete(handles_[kQueues], name.value());
  }
  if (m.config) {
    pb::Config proto;
    convert::ToProto(*m.config, &proto);
    put(kConfig, kConfigKey, proto);
  }
  for (const core::RequestRecord& record : m.requests_put) {
    auto* proto =
        google::protobuf::Arena::CreateMessage<storage::v1::RequestRecord>(
            &arena);
    convert::ToProto(record, proto);
    put(kRequests, RequestKey(record.queue, record.request_id), *proto);
  }
  for (const auto& [queue, id] : m.requests_deleted) {
    batch.Delete(handles_[kRequests], RequestKey(queue, id));
  }
  for (const auto& [queue, entry] : m.ledger_put) {
    storage::v1::LedgerRecord proto;
    convert::ToProto(entry, &proto);
    put(kLedger, queue.value(), proto);
  }
  for (const core::QueueName& queue : m.ledger_deleted) {
    batch.Delete(handles_[kLedger], queue.value());
  }
  for (const core::Event& event : m.events) {
    auto* proto = google::protobuf::Arena::CreateMessage<pb::GangEvent>(&arena);
    auto span = event.gang ? spans.find(event.gang.get()) : spans.end();
    if (span == spans.end()) {
      convert::ToProto(event, proto);
      put(kEvents, EventKey(event.revision), *proto);
      continue;
    }
    convert::ToProto(core::Event{event.revision, event.type, event.time,
                                 /*gang=*/nullptr},
                     proto);
    proto->SerializeToString(&buffer);
    arena.Reset();
    AppendGangField(absl::string_view(gang_bytes)
                        .substr(span->second.first, span->second.second),
                    buffer);
    batch.Put(handles_[kEvents], EventKey(event.revision), buffer);
  }
  if (m.trim_events_before > 0) {
    batch.DeleteRange(handles_[kEvents], EventKey(0),
                      EventKey(m.trim_events_before));
  }
  for (const core::AuditRecord& record : m.audit_put) {
    auto* proto =
        google::protobuf::Arena::CreateMessage<pb::AuditRecord>(&arena);
    convert::ToProto(record, proto);
    put(kAudit, EventKey(record.sequence), *proto);
  }
  if (m.trim_audit_before > 0) {
    batch.DeleteRange(handles_[kAudit], EventKey(0),
                      EventKey(m.trim_audit_before));
  }
  storage::v1::MetaRecord meta;
  convert::ToProto(m.meta, &meta);
  put(kMeta, kMetaKey, meta);
  if (m.startup_files) {
    storage::v1::StartupFilesRecord record;
    convert::ToProto(*m.startup_files, &record);
    put(kMeta, kStartupFilesKey, record);
  }
}

absl::Status RocksDbStore::Writable(absl::string_view what) {
  if (options_.read_only) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": data dir ", dir_, " was opened read-only"));
  }
  if (read_only_) return ReopenWritable();
  return absl::OkStatus();
}

absl::Status RocksDbStore::Write(const core::Mutation& m, int64_t log_seq) {
  MutexLock lock(&write_mu_);
  RETURN_IF_ERROR(Writable("commit"));
  // Encoded after the reopen: a batch names its families by the handles of
  // the instance it is written to.
  rocksdb::WriteBatch batch;
  AddToBatch(m, batch);
  if (log_seq > 0) batch.Put(handles_[kMeta], kLogSeqKey, EventKey(log_seq));
  rocksdb::WriteOptions write_options;
  write_options.sync = options_.sync;
  if (resume_needed_) {
    // A write refused for lack of space left RocksDB read-only (a
    // background error): resume it before writing again.
    // Any failure to resume (still no space, a recovery RocksDB runs
    // itself) is the same refusal: the write waits for space.
    rocksdb::Status s = db_->Resume();
    if (!s.ok()) return NoSpace(s, "resume writes");
    resume_needed_ = false;
  }
  if (rocksdb::Status s = db_->Write(write_options, &batch); !s.ok()) {
    return WriteError(s, "commit");
  }
  first_retained_ = m.meta.first_retained_revision;
  return absl::OkStatus();
}

absl::Status RocksDbStore::WriteError(const rocksdb::Status& s,
                                      absl::string_view what) {
  if (!OutOfSpace(s)) return FromRocks(s, what);
  return NoSpace(s, what);
}

absl::Status RocksDbStore::NoSpace(const rocksdb::Status& s,
                                   absl::string_view what) {
  resume_needed_ = true;
  return absl::ResourceExhaustedError(absl::StrCat(
      what, ": no space left in data dir ", dir_,
      " (free space or raise its quota; writes resume then): ", s.ToString()));
}

absl::StatusOr<std::vector<core::Event>> RocksDbStore::ReadEvents(
    int64_t after, int limit, size_t max_bytes) {
  ReaderMutexLock db_lock(&db_mu_);
  const int64_t oldest = first_retained_.load();
  if (after + 1 < oldest) {
    return absl::OutOfRangeError(absl::StrCat(
        "after_revision: events up to ", oldest - 1,
        " have been trimmed; list again and watch from its revision"));
  }
  std::vector<core::Event> events;
  size_t bytes = 0;
  std::unique_ptr<rocksdb::Iterator> it =
      NewFamilyIterator(*db_, handles_, kEvents, {});
  for (it->Seek(EventKey(after + 1));
       it->Valid() && static_cast<int>(events.size()) < limit &&
       bytes < max_bytes;
       it->Next()) {
    bytes += it->value().size();
    pb::GangEvent proto;
    RETURN_IF_ERROR(ParseInto(it->value(), &proto, "event"));
    ASSIGN_OR_RETURN(core::Event event, convert::EventFromProto(proto));
    events.push_back(std::move(event));
  }
  RETURN_IF_ERROR(FromRocks(it->status(), "read events"));
  return events;
}

absl::StatusOr<std::vector<core::AuditRecord>> RocksDbStore::ReadAudit(
    int64_t after, int limit) {
  ReaderMutexLock db_lock(&db_mu_);
  std::vector<core::AuditRecord> records;
  std::unique_ptr<rocksdb::Iterator> it =
      NewFamilyIterator(*db_, handles_, kAudit, {});
  for (it->Seek(EventKey(after + 1));
       it->Valid() && static_cast<int>(records.size()) < limit; it->Next()) {
    pb::AuditRecord proto;
    RETURN_IF_ERROR(ParseInto(it->value(), &proto, "audit record"));
    records.push_back(convert::AuditFromProto(proto));
  }
  RETURN_IF_ERROR(FromRocks(it->status(), "read audit"));
  return records;
}

absl::StatusOr<int64_t> RocksDbStore::LastAuditSequence() {
  ReaderMutexLock db_lock(&db_mu_);
  std::unique_ptr<rocksdb::Iterator> it =
      NewFamilyIterator(*db_, handles_, kAudit, {});
  it->SeekToLast();
  RETURN_IF_ERROR(FromRocks(it->status(), "read audit"));
  if (!it->Valid()) return 0;
  pb::AuditRecord proto;
  RETURN_IF_ERROR(ParseInto(it->value(), &proto, "audit record"));
  return proto.sequence();
}

}  // namespace phalanx::storage
