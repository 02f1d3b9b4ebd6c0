#include "storage/store_check.h"

#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

// DataLoss("`family`/`key`: `what`"), the key quoted when it is not
// printable.
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

// Checks one record of `family` stored under `key`.
absl::Status CheckRecord(Family family, const rocksdb::Slice& raw_key,
                         const rocksdb::Slice& value, const core::Meta& meta) {
  const std::string key = raw_key.ToString();
  auto parse_error = [&](const absl::Status& st) {
    return Inconsistent(family, key, st.message());
  };
  switch (family) {
    case kDefault:
      return Inconsistent(family, key, "no record belongs in this family");
    case kNodes: {
      pb::Node node;
      if (absl::Status st = ParseInto(value, &node, "node"); !st.ok()) {
        return parse_error(st);
      }
      absl::StatusOr<core::Node> n = convert::NodeFromProto(node, "node");
      if (!n.ok()) return parse_error(n.status());
      if (n->spec.id.value() != key) {
        return KeyMismatch(family, key, "spec.id", n->spec.id.value());
      }
      return absl::OkStatus();
    }
    case kQueues: {
      pb::Queue queue;
      if (absl::Status st = ParseInto(value, &queue, "queue"); !st.ok()) {
        return parse_error(st);
      }
      if (queue.name() != key)
        return KeyMismatch(family, key, "name", queue.name());
      return absl::OkStatus();
    }
    case kGangs: {
      pb::Gang gang;
      if (absl::Status st = ParseInto(value, &gang, "gang"); !st.ok()) {
        return parse_error(st);
      }
      // Refuses a state that is no GangState, among the rest.
      absl::StatusOr<core::Gang> g = convert::GangFromProto(gang);
      if (!g.ok()) return parse_error(g.status());
      if (g->id.value() != key)
        return KeyMismatch(family, key, "id", g->id.value());
      return absl::OkStatus();
    }
    case kLedger: {
      storage::v1::LedgerRecord record;
      if (absl::Status st = ParseInto(value, &record, "ledger"); !st.ok()) {
        return parse_error(st);
      }
      return absl::OkStatus();
    }
    case kConfig: {
      if (key != kConfigKey) {
        return Inconsistent(family, key,
                            "the config family's only key is \"current\"");
      }
      pb::Config config;
      if (absl::Status st = ParseInto(value, &config, "config"); !st.ok()) {
        return parse_error(st);
      }
      absl::StatusOr<core::Config> c =
          convert::ConfigFromProto(config, "config");
      return c.ok() ? absl::OkStatus() : parse_error(c.status());
    }
    case kEvents: {
      pb::GangEvent event;
      if (absl::Status st = ParseInto(value, &event, "event"); !st.ok()) {
        return parse_error(st);
      }
      absl::StatusOr<core::Event> e = convert::EventFromProto(event);
      if (!e.ok()) return parse_error(e.status());
      if (key != EventKey(e->revision)) {
        return KeyMismatch(family, key, "revision", absl::StrCat(e->revision));
      }
      if (e->revision < meta.first_retained_revision ||
          e->revision > meta.last_revision) {
        return Inconsistent(
            family, key,
            absl::StrCat("revision ", e->revision,
                         " is outside the retained range [",
                         meta.first_retained_revision, ", ", meta.last_revision,
                         "] the meta record names"));
      }
      return absl::OkStatus();
    }
    case kRequests: {
      const size_t split = key.find('\0');
      if (split == std::string::npos) {
        return Inconsistent(family, key, "the key has no queue separator");
      }
      storage::v1::RequestRecord record;
      if (absl::Status st = ParseInto(value, &record, "request"); !st.ok()) {
        return parse_error(st);
      }
      return absl::OkStatus();
    }
    case kMeta: {
      if (key == kMetaKey || key == kStartupFilesKey) return absl::OkStatus();
      if (key == kLogSeqKey) {
        absl::StatusOr<int64_t> seq = DecodeSeq(value.ToString());
        return seq.ok() ? absl::OkStatus() : parse_error(seq.status());
      }
      if (key == kSchemaVersionKey) {
        int version = 0;
        if (!absl::SimpleAtoi(value.ToString(), &version) || version < 1 ||
            version > RocksDbStore::kSchemaVersion) {
          return Inconsistent(
              family, key,
              absl::StrCat("not a schema version this build knows: ",
                           core::QuoteForError(value.ToString())));
        }
        return absl::OkStatus();
      }
      return Inconsistent(family, key, "not a key of the meta family");
    }
    case kAudit: {
      pb::AuditRecord record;
      if (absl::Status st = ParseInto(value, &record, "audit record");
          !st.ok()) {
        return parse_error(st);
      }
      if (key != EventKey(record.sequence())) {
        return KeyMismatch(family, key, "sequence",
                           absl::StrCat(record.sequence()));
      }
      return absl::OkStatus();
    }
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
    std::unique_ptr<rocksdb::Iterator> it(
        db->NewIterator(read, handles[family]));
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
  RocksDbStore::Options options;
  options.read_only = true;
  options.env = env;
  ASSIGN_OR_RETURN(std::unique_ptr<RocksDbStore> store,
                   RocksDbStore::Open(dir, options));
  return store->CheckConsistency();
}

}  // namespace phalanx::storage
