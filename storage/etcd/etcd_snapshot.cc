// EtcdStateStore's snapshots, log compaction and applied-seq publishing
// (docs/ha.md, "Snapshots and compaction"). The rest of the store is in
// etcd_state_store.cc.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status_macros.h"
#include "proto/log_convert.h"
#include "storage/etcd/etcd_state_store.h"
#include "storage/sync/mutex.h"

namespace phalanx::storage::etcd {
namespace {

// Snapshot chunks read per Range while loading (each up to a chunk's size).
constexpr int kChunksPerPage = 8;

}  // namespace

absl::Status EtcdStateStore::PublishApplied() {
  if (options_.replica_id.empty()) return absl::OkStatus();
  MutexLock lock(&publish_mu_);
  const absl::Time now = absl::Now();
  const int64_t seq = applied_seq_.load();
  bool put =
      seq != published_seq_ && now - published_at_ >= options_.applied_interval;
  if (lease_ == 0 || now - lease_renewed_ >= options_.applied_ttl / 3) {
    if (lease_ != 0) {
      absl::StatusOr<absl::Duration> ttl = client_->LeaseKeepAlive(lease_);
      if (ttl.status().code() == absl::StatusCode::kNotFound) {
        lease_ = 0;  // expired: the key went with it
      } else if (!ttl.ok()) {
        return ttl.status();
      }
    }
    if (lease_ == 0) {
      ASSIGN_OR_RETURN(lease_, client_->LeaseGrant(options_.applied_ttl));
      put = true;
    }
    lease_renewed_ = now;
  }
  if (!put) return absl::OkStatus();
  epb::PutRequest request;
  request.set_key(AppliedKey(options_.replica_id));
  request.set_value(absl::StrCat(seq));
  request.set_lease(lease_);
  RETURN_IF_ERROR(client_->Put(request).status());
  published_seq_ = seq;
  published_at_ = now;
  return absl::OkStatus();
}

absl::StatusOr<std::pair<storage::v1::SnapshotManifest, int64_t>>
EtcdStateStore::NewestManifest() {
  const std::string prefix = absl::StrCat(options_.prefix, "/manifest/");
  epb::RangeRequest range;
  range.set_key(prefix);
  range.set_range_end(PrefixEnd(prefix));
  range.set_sort_order(epb::RangeRequest::DESCEND);
  range.set_sort_target(epb::RangeRequest::KEY);
  range.set_limit(1);
  ASSIGN_OR_RETURN(epb::RangeResponse response, client_->Range(range));
  if (response.kvs_size() == 0) {
    return absl::NotFoundError("no complete snapshot");
  }
  storage::v1::SnapshotManifest manifest;
  if (!manifest.ParseFromString(response.kvs(0).value())) {
    return absl::DataLossError(absl::StrCat("snapshot manifest ",
                                            response.kvs(0).key().substr(0, 64),
                                            ": bad bytes"));
  }
  return std::make_pair(std::move(manifest), response.header().revision());
}

absl::Status EtcdStateStore::LoadSnapshot(int64_t need) {
  absl::Status last;
  // A retry only when etcd compacted the revision being read (a newer
  // snapshot replaced this one meanwhile).
  for (int attempt = 0; attempt < 3; ++attempt) {
    absl::StatusOr<std::pair<storage::v1::SnapshotManifest, int64_t>> newest =
        NewestManifest();
    if (newest.status().code() == absl::StatusCode::kNotFound) {
      return absl::DataLossError(
          absl::StrCat("catch up: log entries up to ", need,
                       " are gone and no complete snapshot holds them"));
    }
    RETURN_IF_ERROR(newest.status());
    const storage::v1::SnapshotManifest& manifest = newest->first;
    const int64_t revision = newest->second;
    const int64_t seq = manifest.seq();
    if (seq < need) {
      return absl::DataLossError(absl::StrCat(
          "catch up: log entries up to ", need,
          " are gone and the newest snapshot holds only up to ", seq));
    }
    // Every chunk is read at the manifest's revision: exactly the chunks
    // it lists, whatever the leader writes or deletes meanwhile.
    epb::RangeResponse page;
    int in_page = 0;
    int chunk = 0;
    // The next chunk key's LogBatch.
    auto read = [&]() -> absl::StatusOr<storage::v1::LogBatch> {
      if (in_page == page.kvs_size()) {
        epb::RangeRequest range;
        range.set_key(ChunkKey(seq, chunk));
        range.set_range_end(ChunkKey(seq, manifest.chunks()));
        range.set_revision(revision);
        range.set_limit(kChunksPerPage);
        ASSIGN_OR_RETURN(page, client_->Range(range));
        in_page = 0;
      }
      if (in_page == page.kvs_size() ||
          page.kvs(in_page).key() != ChunkKey(seq, chunk)) {
        return absl::DataLossError(
            absl::StrCat("snapshot ", seq, ": chunk ", chunk, " is missing"));
      }
      storage::v1::LogBatch batch;
      if (!batch.ParseFromString(page.kvs(in_page).value()) ||
          batch.seq() != seq) {
        return absl::DataLossError(
            absl::StrCat("snapshot ", seq, ": chunk ", chunk, ": bad bytes"));
      }
      ++in_page;
      ++chunk;
      return batch;
    };
    // The next chunk's records; a chunk split into parts (one record
    // larger than a request) is reassembled from its consecutive keys.
    auto next = [&]() -> absl::StatusOr<std::optional<core::Mutation>> {
      if (chunk == manifest.chunks()) return std::nullopt;
      ASSIGN_OR_RETURN(storage::v1::LogBatch batch, read());
      if (batch.parts() > 0) {
        const int first = chunk - 1;
        std::string bytes = batch.payload();
        for (int part = 1; part < batch.parts(); ++part) {
          if (chunk == manifest.chunks()) break;
          ASSIGN_OR_RETURN(storage::v1::LogBatch more, read());
          if (more.part() != part || more.parts() != batch.parts()) break;
          bytes.append(more.payload());
        }
        if (chunk - first != batch.parts() || !batch.ParseFromString(bytes)) {
          return absl::DataLossError(absl::StrCat("snapshot ", seq,
                                                  ": the chunk split from ",
                                                  first, ": bad parts"));
        }
      }
      ASSIGN_OR_RETURN(core::Mutation part, convert::MutationFromProto(batch));
      return std::optional<core::Mutation>(std::move(part));
    };
    last = local_->ReplaceAll(next, seq);
    if (last.ok()) {
      applied_seq_ = seq;
      read_seq_ = seq;
      pending_ = Pending();  // parts of a batch the snapshot holds
      ++snapshots_loaded_;
      std::fprintf(stderr,
                   "phalanxd: loaded the snapshot at seq %lld (%d chunks)\n",
                   static_cast<long long>(seq), manifest.chunks());
      return absl::OkStatus();
    }
    if (last.code() != absl::StatusCode::kOutOfRange) return last;
  }
  return last;
}

absl::StatusOr<int64_t> EtcdStateStore::SlowestOtherReplica() {
  const std::string prefix = absl::StrCat(options_.prefix, "/applied/");
  epb::RangeRequest range;
  range.set_key(prefix);
  range.set_range_end(PrefixEnd(prefix));
  ASSIGN_OR_RETURN(epb::RangeResponse response, client_->Range(range));
  int64_t slowest = std::numeric_limits<int64_t>::max();
  for (const mvccpb::KeyValue& kv : response.kvs()) {
    if (kv.key() == AppliedKey(options_.replica_id)) continue;
    int64_t seq = 0;
    if (absl::SimpleAtoi(kv.value(), &seq)) slowest = std::min(slowest, seq);
  }
  return slowest;
}

absl::Status EtcdStateStore::Compact(int64_t seq, int64_t term,
                                     SnapshotInfo& info) {
  ASSIGN_OR_RETURN(const int64_t slowest, SlowestOtherReplica());
  const int64_t through = std::min(seq, slowest);
  epb::TxnRequest txn;
  *txn.add_compare() = CreateRevisionIs(LeaderKey(), term);
  auto delete_range = [&](const std::string& from, const std::string& to) {
    epb::DeleteRangeRequest* d =
        txn.add_success()->mutable_request_delete_range();
    d->set_key(from);
    d->set_range_end(to);
  };
  delete_range(absl::StrCat(options_.prefix, "/log/"), LogKey(through + 1));
  delete_range(absl::StrCat(options_.prefix, "/manifest/"), ManifestKey(seq));
  // Chunks of every older snapshot, complete or interrupted.
  delete_range(absl::StrCat(options_.prefix, "/snapshot/"),
               absl::StrFormat("%s/snapshot/%020d/", options_.prefix, seq));
  ASSIGN_OR_RETURN(epb::TxnResponse response, client_->Txn(txn));
  if (!response.succeeded()) {
    return absl::AbortedError(absl::StrCat("snapshot: fenced: term ", term,
                                           " no longer leads; not compacting"));
  }
  info.log_deleted_through = through;
  info.compacted_revision = response.header().revision();
  return client_->Compact(info.compacted_revision);
}

absl::StatusOr<SnapshotInfo> EtcdStateStore::WriteSnapshot(
    const FrozenState& frozen, int64_t term) {
  const absl::Time start = absl::Now();
  SnapshotInfo info;
  info.seq = frozen.log_seq();
  absl::StatusOr<std::pair<storage::v1::SnapshotManifest, int64_t>> newest =
      NewestManifest();
  if (!newest.ok() && newest.status().code() != absl::StatusCode::kNotFound) {
    return newest.status();
  }
  // A complete snapshot at this seq (or later) exists: only compact.
  if (newest.ok() && newest->first.seq() >= info.seq) {
    RETURN_IF_ERROR(Compact(info.seq, term, info));
    info.took = absl::Now() - start;
    return info;
  }
  auto fenced = [&](epb::TxnRequest& txn) -> absl::Status {
    *txn.add_compare() = CreateRevisionIs(LeaderKey(), term);
    ASSIGN_OR_RETURN(epb::TxnResponse response, client_->Txn(txn));
    if (!response.succeeded()) {
      return absl::AbortedError(
          absl::StrCat("snapshot: fenced: term ", term, " no longer leads"));
    }
    return absl::OkStatus();
  };
  // First the leftovers of an interrupted attempt at this seq (this also
  // checks the fence before anything is written).
  {
    epb::TxnRequest txn;
    epb::DeleteRangeRequest* d =
        txn.add_success()->mutable_request_delete_range();
    d->set_key(ChunkKey(info.seq, 0));
    d->set_range_end(PrefixEnd(
        absl::StrFormat("%s/snapshot/%020d/", options_.prefix, info.seq)));
    RETURN_IF_ERROR(fenced(txn));
  }
  int64_t revision = 0;
  // A part holds records up to part_bytes; only a single larger record
  // makes one larger, and one over the request bound is written as
  // several chunk keys (LogBatch.parts, as in the log).
  const size_t part_bytes =
      std::min(options_.snapshot_chunk_bytes, options_.max_batch_bytes);
  auto put_chunk = [&](const std::string& bytes) -> absl::Status {
    epb::TxnRequest txn;
    epb::PutRequest* put = txn.add_success()->mutable_request_put();
    put->set_key(ChunkKey(info.seq, info.chunks));
    put->set_value(bytes);
    RETURN_IF_ERROR(fenced(txn));
    ++info.chunks;
    info.bytes += static_cast<int64_t>(bytes.size());
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(frozen.Export(
      part_bytes, [&](storage::v1::LogBatch& part) -> absl::Status {
        if (stopping_) return absl::CancelledError("snapshot: store closing");
        if (options_.snapshot_crash_after_chunks >= 0 &&
            info.chunks >= options_.snapshot_crash_after_chunks) {
          return absl::AbortedError("snapshot: crashed between chunks (test)");
        }
        part.set_term(term);
        revision = part.meta().last_revision();
        const std::string bytes = part.SerializeAsString();
        if (bytes.size() <= options_.max_batch_bytes) return put_chunk(bytes);
        const size_t slice = options_.max_batch_bytes / 2;
        const int32_t parts =
            static_cast<int32_t>((bytes.size() + slice - 1) / slice);
        for (int32_t i = 0; i < parts; ++i) {
          storage::v1::LogBatch piece;
          piece.set_seq(info.seq);
          piece.set_term(term);
          piece.set_part(i);
          piece.set_parts(parts);
          piece.set_payload(
              bytes.substr(static_cast<size_t>(i) * slice, slice));
          RETURN_IF_ERROR(put_chunk(piece.SerializeAsString()));
        }
        return absl::OkStatus();
      }));
  storage::v1::SnapshotManifest manifest;
  manifest.set_seq(info.seq);
  manifest.set_term(term);
  manifest.set_chunks(info.chunks);
  manifest.set_bytes(info.bytes);
  manifest.set_revision(revision);
  {
    epb::TxnRequest txn;
    epb::PutRequest* put = txn.add_success()->mutable_request_put();
    put->set_key(ManifestKey(info.seq));
    put->set_value(manifest.SerializeAsString());
    RETURN_IF_ERROR(fenced(txn));
  }
  RETURN_IF_ERROR(Compact(info.seq, term, info));
  info.took = absl::Now() - start;
  return info;
}

void EtcdStateStore::JoinSnapshot() {
  if (snapshotter_.joinable()) snapshotter_.join();
}

void EtcdStateStore::MaybeSnapshot(int64_t entries, size_t bytes) {
  entries_since_snapshot_ += entries;
  bytes_since_snapshot_ += bytes;
  const bool due =
      (options_.snapshot_every_entries > 0 &&
       entries_since_snapshot_ >= options_.snapshot_every_entries) ||
      (options_.snapshot_every_bytes > 0 &&
       bytes_since_snapshot_ >= options_.snapshot_every_bytes);
  // One in flight: the next Commit tries again.
  if (!due || snapshot_running_) return;
  JoinSnapshot();  // the previous one has finished
  absl::StatusOr<std::unique_ptr<FrozenState>> frozen = local_->Freeze();
  if (!frozen.ok()) {
    std::fprintf(stderr, "phalanxd: snapshot: %s\n",
                 frozen.status().ToString().c_str());
    return;
  }
  entries_since_snapshot_ = 0;
  bytes_since_snapshot_ = 0;
  snapshot_running_ = true;
  snapshotter_ =
      std::thread([this, frozen = std::move(*frozen), term = term_.load()]() {
        absl::StatusOr<SnapshotInfo> result = WriteSnapshot(*frozen, term);
        if (!result.ok()) {
          std::fprintf(stderr, "phalanxd: snapshot at seq %lld: %s\n",
                       static_cast<long long>(frozen->log_seq()),
                       result.status().ToString().c_str());
        }
        MutexLock lock(&snapshot_mu_);
        last_snapshot_ = std::move(result);
        snapshot_running_ = false;
      });
}

absl::StatusOr<SnapshotInfo> EtcdStateStore::WaitForSnapshot() {
  JoinSnapshot();
  MutexLock lock(&snapshot_mu_);
  if (!last_snapshot_) {
    return absl::NotFoundError("no snapshot ran since the last wait");
  }
  absl::StatusOr<SnapshotInfo> result = std::move(*last_snapshot_);
  last_snapshot_.reset();
  return result;
}

absl::StatusOr<SnapshotInfo> EtcdStateStore::TakeSnapshot() {
  const int64_t term = term_.load();
  if (term == 0) {
    return absl::FailedPreconditionError(
        "snapshot: this replica does not lead");
  }
  JoinSnapshot();
  ASSIGN_OR_RETURN(std::unique_ptr<FrozenState> frozen, local_->Freeze());
  entries_since_snapshot_ = 0;
  bytes_since_snapshot_ = 0;
  return WriteSnapshot(*frozen, term);
}

}  // namespace phalanx::storage::etcd
