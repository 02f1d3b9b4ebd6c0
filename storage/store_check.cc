#include "storage/store_check.h"

#include <filesystem>
#include <map>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/pending_index.h"
#include "core/scheduler.h"
#include "core/status_macros.h"
#include "core/validate.h"
#include "phalanx/storage/v1/records.pb.h"
#include "phalanx/v1/types.pb.h"
#include "proto/convert.h"
#include "rocksdb/db.h"
#include "storage/rocksdb_layout.h"
#include "storage/rocksdb_store.h"

namespace phalanx::storage {
namespace {

namespace pb = ::phalanx::v1;

// DataLoss("`family`/"`key`": `what`"), the key quoted as errors quote
// input (control characters escaped).
absl::Status Inconsistent(Family family, absl::string_view key,
                          absl::string_view what) {
  return absl::DataLossError(absl::StrCat(
      kFamilyNames[family], "/", core::QuoteForError(key), ": ", what));
}

// A record's key that is not the one its value names.
absl::Status KeyMismatch(Family family, absl::string_view key,
                         absl::string_view field, absl::string_view named) {
  return Inconsistent(
      family, key,
      absl::StrCat("the record's ", field, " is ", core::QuoteForError(named),
                   ", not its key"));
}

// `value` parsed as a `Message`; DataLoss naming the record when it is not
// one.
template <typename Message>
absl::StatusOr<Message> Parse(Family family, const std::string& key,
                              const rocksdb::Slice& value,
                              absl::string_view what) {
  Message message;
  if (absl::Status st = ParseInto(value, &message, what); !st.ok()) {
    return Inconsistent(family, key, st.message());
  }
  return message;
}

// `converted`'s error as DataLoss naming the record; OK when it is OK.
template <typename T>
absl::Status Converted(Family family, const std::string& key,
                       const absl::StatusOr<T>& converted) {
  if (converted.ok()) return absl::OkStatus();
  return Inconsistent(family, key, converted.status().message());
}

absl::Status CheckNode(const std::string& key, const rocksdb::Slice& value) {
  ASSIGN_OR_RETURN(pb::Node node, Parse<pb::Node>(kNodes, key, value, "node"));
  if (node.id() != key) return KeyMismatch(kNodes, key, "id", node.id());
  return Converted(kNodes, key, convert::NodeFromProto(node, "node"));
}

absl::Status CheckQueue(const std::string& key, const rocksdb::Slice& value) {
  ASSIGN_OR_RETURN(pb::Queue queue,
                   Parse<pb::Queue>(kQueues, key, value, "queue"));
  if (queue.name() != key)
    return KeyMismatch(kQueues, key, "name", queue.name());
  return absl::OkStatus();
}

absl::Status CheckGang(const std::string& key, const rocksdb::Slice& value) {
  ASSIGN_OR_RETURN(pb::Gang gang, Parse<pb::Gang>(kGangs, key, value, "gang"));
  if (gang.id() != key) return KeyMismatch(kGangs, key, "id", gang.id());
  // Refuses a state that is no GangState, among the rest.
  return Converted(kGangs, key, convert::GangFromProto(gang));
}

absl::Status CheckConfig(const std::string& key, const rocksdb::Slice& value) {
  if (key != kConfigKey) {
    return Inconsistent(kConfig, key,
                        "the config family's only key is \"current\"");
  }
  ASSIGN_OR_RETURN(pb::Config config,
                   Parse<pb::Config>(kConfig, key, value, "config"));
  return Converted(kConfig, key, convert::ConfigFromProto(config, "config"));
}

// An event under its revision's key, within the retained range of `meta`.
absl::Status CheckEvent(const std::string& key, const rocksdb::Slice& value,
                        const core::Meta& meta) {
  ASSIGN_OR_RETURN(pb::GangEvent proto,
                   Parse<pb::GangEvent>(kEvents, key, value, "event"));
  absl::StatusOr<core::Event> event = convert::EventFromProto(proto);
  RETURN_IF_ERROR(Converted(kEvents, key, event));
  if (key != EventKey(event->revision)) {
    return KeyMismatch(kEvents, key, "revision", absl::StrCat(event->revision));
  }
  if (event->revision < meta.first_retained_revision ||
      event->revision > meta.last_revision) {
    return Inconsistent(
        kEvents, key,
        absl::StrCat("revision ", event->revision,
                     " is outside the retained range [",
                     meta.first_retained_revision, ", ", meta.last_revision,
                     "] the meta record names"));
  }
  return absl::OkStatus();
}

absl::Status CheckRequest(const std::string& key, const rocksdb::Slice& value) {
  if (key.find('\0') == std::string::npos) {
    return Inconsistent(kRequests, key, "the key has no queue separator");
  }
  return Parse<storage::v1::RequestRecord>(kRequests, key, value, "request")
      .status();
}

// One of the meta family's known keys, with a value of its kind.
absl::Status CheckMetaKey(const std::string& key, const rocksdb::Slice& value) {
  if (key == kMetaKey) {
    return Parse<storage::v1::MetaRecord>(kMeta, key, value, "meta").status();
  }
  if (key == kStartupFilesKey) {
    return Parse<storage::v1::StartupFilesRecord>(kMeta, key, value,
                                                  "startup files")
        .status();
  }
  if (key == kLogSeqKey) {
    return Converted(kMeta, key, DecodeSeq(value.ToString()));
  }
  if (key != kSchemaVersionKey) {
    return Inconsistent(kMeta, key, "not a key of the meta family");
  }
  int version = 0;
  if (!absl::SimpleAtoi(value.ToString(), &version) || version < 1 ||
      version > RocksDbStore::kSchemaVersion) {
    return Inconsistent(kMeta, key,
                        absl::StrCat("not a schema version this build knows: ",
                                     core::QuoteForError(value.ToString())));
  }
  return absl::OkStatus();
}

absl::Status CheckAudit(const std::string& key, const rocksdb::Slice& value) {
  ASSIGN_OR_RETURN(pb::AuditRecord record,
                   Parse<pb::AuditRecord>(kAudit, key, value, "audit record"));
  if (key != EventKey(record.sequence())) {
    return KeyMismatch(kAudit, key, "sequence",
                       absl::StrCat(record.sequence()));
  }
  return absl::OkStatus();
}

// Checks one record of `family` stored under `raw_key`.
absl::Status CheckRecord(Family family, const rocksdb::Slice& raw_key,
                         const rocksdb::Slice& value, const core::Meta& meta) {
  const std::string key = raw_key.ToString();
  switch (family) {
    case kDefault:
      return Inconsistent(family, key, "no record belongs in this family");
    case kNodes:
      return CheckNode(key, value);
    case kQueues:
      return CheckQueue(key, value);
    case kGangs:
      return CheckGang(key, value);
    case kLedger:
      return Parse<storage::v1::LedgerRecord>(family, key, value, "ledger")
          .status();
    case kConfig:
      return CheckConfig(key, value);
    case kEvents:
      return CheckEvent(key, value, meta);
    case kRequests:
      return CheckRequest(key, value);
    case kMeta:
      return CheckMetaKey(key, value);
    case kAudit:
      return CheckAudit(key, value);
    case kFamilies:
      break;
  }
  return absl::OkStatus();
}

// Whether core can have issued `id` by `meta` (an id of another form is
// not core's and passes).
bool Issued(const core::GangId& id, const core::Meta& meta) {
  // core::GangSeq reads 0 from an id of another form.
  return core::GangSeq(id) < meta.next_gang_seq;
}

// Checks the placement of a gang holding GPUs against the nodes' GPU
// counts and the GPUs already `held` (node → GPU index → holder), which it
// extends.
absl::Status CheckHeldGpus(
    const core::Gang& gang,
    const absl::flat_hash_map<std::string, int>& gpu_counts,
    std::map<std::pair<std::string, int>, core::GangId>& held) {
  for (size_t i = 0; i < gang.placement.size(); ++i) {
    const core::PodPlacement& pod = gang.placement[i];
    const std::string field = absl::StrCat("placement[", i, "]");
    auto node = gpu_counts.find(pod.node.value());
    if (node == gpu_counts.end()) {
      return Inconsistent(kGangs, gang.id.value(),
                          absl::StrCat(field, ".node: node ",
                                       core::QuoteForError(pod.node.value()),
                                       " is not in the store"));
    }
    for (int gpu : pod.gpu_indices) {
      if (gpu < 0 || gpu >= node->second) {
        return Inconsistent(
            kGangs, gang.id.value(),
            absl::StrCat(field, ".gpu_indices: GPU ", gpu, " of node ",
                         pod.node.value(), " is outside [0, ", node->second,
                         ")"));
      }
      auto [it, added] =
          held.emplace(std::make_pair(pod.node.value(), gpu), gang.id);
      if (!added) {
        return Inconsistent(
            kGangs, gang.id.value(),
            absl::StrCat(field, ".gpu_indices: GPU ", gpu, " of node ",
                         pod.node.value(), " is also held by gang ",
                         it->second.value()));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckRecords(
    rocksdb::DB* db, const std::vector<rocksdb::ColumnFamilyHandle*>& handles,
    const rocksdb::ReadOptions& read, const core::Meta& meta) {
  for (int family = kDefault; family < kFamilies; ++family) {
    std::unique_ptr<rocksdb::Iterator> it =
        NewFamilyIterator(*db, handles, static_cast<Family>(family), read);
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      RETURN_IF_ERROR(CheckRecord(static_cast<Family>(family), it->key(),
                                  it->value(), meta));
    }
    RETURN_IF_ERROR(FromRocks(it->status(), kFamilyNames[family]));
  }
  return absl::OkStatus();
}

absl::Status CheckLoadedState(const core::LoadedState& state) {
  const core::Meta& meta = state.meta;
  absl::flat_hash_map<std::string, int> gpu_counts;
  for (const core::Node& node : state.nodes) {
    gpu_counts[node.spec.id.value()] = node.spec.gpu_count;
  }
  absl::flat_hash_set<std::string> queues;
  for (const core::Queue& queue : state.queues)
    queues.insert(queue.name.value());
  std::map<std::pair<std::string, int>, core::GangId> held;
  for (const core::Gang& gang : state.gangs) {
    const std::string& id = gang.id.value();
    if (!Issued(gang.id, meta)) {
      return Inconsistent(kGangs, id,
                          absl::StrCat("id: not issued yet (meta.next_gang_seq "
                                       "is ",
                                       meta.next_gang_seq, ")"));
    }
    if (gang.revision > meta.last_revision) {
      return Inconsistent(
          kGangs, id,
          absl::StrCat("revision: ", gang.revision,
                       " is past meta.last_revision ", meta.last_revision));
    }
    if (!core::IsFinal(gang.state) &&
        !queues.contains(gang.spec.queue.value())) {
      return Inconsistent(
          kGangs, id,
          absl::StrCat("spec.queue: queue ",
                       core::QuoteForError(gang.spec.queue.value()),
                       " is not in the store"));
    }
    if (core::HoldsCapacity(gang.state)) {
      RETURN_IF_ERROR(CheckHeldGpus(gang, gpu_counts, held));
    }
  }
  for (const core::RequestRecord& record : state.requests) {
    if (!Issued(record.gang_id, meta)) {
      return Inconsistent(
          kRequests, RequestKey(record.queue, record.request_id),
          absl::StrCat("gang_id: ", record.gang_id.value(),
                       " was not issued yet (meta.next_gang_seq is ",
                       meta.next_gang_seq, ")"));
    }
  }
  for (const auto& [queue, entry] : state.ledger) {
    if (!queues.contains(queue.value())) {
      return Inconsistent(kLedger, queue.value(),
                          "no queue of this name is in the store");
    }
  }
  // What a start-up would refuse to load (counters out of range, a pod
  // count that does not match the placement, …).
  absl::StatusOr<std::unique_ptr<core::Scheduler>> restored =
      core::Scheduler::Restore(state, absl::Now());
  if (!restored.ok()) {
    return absl::DataLossError(absl::StrCat("the state does not restore: ",
                                            restored.status().message()));
  }
  return absl::OkStatus();
}

absl::Status CheckStoreConsistency(const std::string& dir, rocksdb::Env* env) {
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    return absl::NotFoundError(absl::StrCat(
        "data dir ", core::QuoteForError(dir), " is not a directory"));
  }
  rocksdb::Env& lock_env = env != nullptr ? *env : *rocksdb::Env::Default();
  ASSIGN_OR_RETURN(rocksdb::FileLock * lock, LockDataDir(lock_env, dir));
  RocksDbStore::Options options;
  options.read_only = true;
  options.env = env;
  absl::StatusOr<std::unique_ptr<RocksDbStore>> store =
      RocksDbStore::Open(dir, options);
  const absl::Status checked =
      store.ok() ? (*store)->CheckConsistency() : store.status();
  store = nullptr;  // closed before the lock is released
  lock_env.UnlockFile(lock).PermitUncheckedError();
  return checked;
}

}  // namespace phalanx::storage
