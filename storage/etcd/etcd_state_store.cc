#include "storage/etcd/etcd_state_store.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/check.h"
#include "core/status_macros.h"
#include "phalanx/storage/v1/log.pb.h"
#include "proto/log_convert.h"

namespace phalanx::storage::etcd {
namespace {

// A part's fields besides its payload's bytes (seq, term, batch_seq, part,
// parts, the payload's tag and length), at most.
constexpr size_t kPartOverheadBytes = 64;
// A catch-up page of entries stays under this many bytes at the writer's
// max_batch_bytes (the client receives up to 64 MiB per message).
constexpr size_t kCatchUpPageBytes = 32u << 20;

// The create revision of the only key `range` returned; 0 when none.
int64_t CreateRevision(const epb::RangeResponse& range) {
  return range.kvs_size() == 0 ? 0 : range.kvs(0).create_revision();
}

}  // namespace

epb::Compare CreateRevisionIs(const std::string& key, int64_t revision) {
  epb::Compare compare;
  compare.set_key(key);
  compare.set_target(epb::Compare::CREATE);
  compare.set_result(epb::Compare::EQUAL);
  compare.set_create_revision(revision);
  return compare;
}

EtcdStateStore::EtcdStateStore(EtcdClient* client,
                               std::unique_ptr<RocksDbStore> local,
                               EtcdStateStoreOptions options)
    : client_(client), local_(std::move(local)), options_(std::move(options)) {
  PHALANX_CHECK(options_.max_batch_bytes > 2 * kPartOverheadBytes);
  absl::StatusOr<int64_t> seq = local_->LogSeq();
  PHALANX_CHECK(seq.ok());
  applied_seq_ = *seq;
  read_seq_ = *seq;
}

EtcdStateStore::~EtcdStateStore() {
  stopping_ = true;
  JoinSnapshot();
}

std::string EtcdStateStore::LeaderKey() const {
  return absl::StrCat(options_.prefix, "/leader");
}

std::string EtcdStateStore::LogKey(int64_t seq) const {
  return absl::StrFormat("%s/log/%020d", options_.prefix, seq);
}

std::string EtcdStateStore::HeadKey() const {
  return absl::StrCat(options_.prefix, "/head");
}

std::string EtcdStateStore::AppliedKey(const std::string& replica_id) const {
  return absl::StrCat(options_.prefix, "/applied/", replica_id);
}

std::string EtcdStateStore::ChunkKey(int64_t seq, int chunk) const {
  return absl::StrFormat("%s/snapshot/%020d/%06d", options_.prefix, seq, chunk);
}

std::string EtcdStateStore::ManifestKey(int64_t seq) const {
  return absl::StrFormat("%s/manifest/%020d", options_.prefix, seq);
}

absl::Status EtcdStateStore::ApplyEntry(const mvccpb::KeyValue& kv,
                                        int64_t seq) {
  if (kv.key() != LogKey(seq)) {
    return absl::DataLossError(absl::StrCat(
        "log: expected entry ", seq, ", found ", kv.key().substr(0, 64)));
  }
  storage::v1::LogBatch batch;
  if (!batch.ParseFromString(kv.value())) {
    return absl::DataLossError(absl::StrCat("log entry ", seq, ": bad bytes"));
  }
  if (batch.parts() == 0) {  // a whole batch
    DropOrphans(seq);
    ASSIGN_OR_RETURN(core::Mutation mutation,
                     convert::MutationFromProto(batch));
    return ApplyBatch(mutation, seq);
  }
  RETURN_IF_ERROR(BufferPart(batch, seq));
  read_seq_ = seq;
  if (pending_.next_part < pending_.parts) return absl::OkStatus();
  storage::v1::LogBatch whole;
  if (!whole.ParseFromString(pending_.bytes)) {
    return absl::DataLossError(absl::StrCat("log: the batch of entries ",
                                            pending_.batch_seq, "..", seq,
                                            ": bad bytes"));
  }
  pending_ = Pending();
  ASSIGN_OR_RETURN(core::Mutation mutation, convert::MutationFromProto(whole));
  return ApplyBatch(mutation, seq);
}

absl::Status EtcdStateStore::BufferPart(storage::v1::LogBatch& batch,
                                        int64_t seq) {
  if (batch.parts() < 2 || batch.part() < 0 || batch.part() >= batch.parts() ||
      batch.batch_seq() != seq - batch.part()) {
    return absl::DataLossError(absl::StrCat(
        "log entry ", seq, ": bad part header (part ", batch.part(), " of ",
        batch.parts(), ", batch ", batch.batch_seq(), ")"));
  }
  if (batch.part() == 0) {
    DropOrphans(seq);
    pending_.batch_seq = seq;
    pending_.parts = batch.parts();
  } else if (pending_.batch_seq != batch.batch_seq() ||
             pending_.parts != batch.parts() ||
             pending_.next_part != batch.part()) {
    return absl::DataLossError(absl::StrCat(
        "log entry ", seq, ": part ", batch.part(), " of the batch at ",
        batch.batch_seq(), " without its earlier parts"));
  }
  pending_.bytes.append(batch.payload());
  ++pending_.next_part;
  return absl::OkStatus();
}

void EtcdStateStore::DropOrphans(int64_t seq) {
  if (pending_.batch_seq == 0) return;
  std::fprintf(stderr,
               "phalanxd: log: entry %lld starts a new batch; dropping %d of "
               "%d parts of the unfinished batch at %lld (its leader stopped "
               "between parts)\n",
               static_cast<long long>(seq), pending_.next_part, pending_.parts,
               static_cast<long long>(pending_.batch_seq));
  pending_ = Pending();
}

absl::Status EtcdStateStore::ApplyBatch(const core::Mutation& mutation,
                                        int64_t seq) {
  const int64_t after = applied_seq_;
  RETURN_IF_ERROR(local_->ApplyLogBatch(mutation, seq));
  applied_seq_ = seq;
  read_seq_ = seq;
  if (apply_listener_) apply_listener_(mutation, seq, after);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> EtcdStateStore::CatchUp() {
  const int64_t start = applied_seq_.load();
  const std::string log_prefix = absl::StrCat(options_.prefix, "/log/");
  // Full parts are up to max_batch_bytes each; halved again should the
  // writer's bound have been larger than ours.
  int limit = static_cast<int>(std::clamp<size_t>(
      kCatchUpPageBytes / options_.max_batch_bytes, 1,
      static_cast<size_t>(std::max(options_.catch_up_page, 1))));
  // Pages of entries until a short page; bounded by the log's length, and
  // by a few snapshot loads (another one is needed only when the log moved
  // past a snapshot while it loaded).
  for (int snapshots = 0;;) {
    epb::RangeRequest range;
    range.set_key(LogKey(read_seq_ + 1));
    range.set_range_end(PrefixEnd(log_prefix));
    range.set_limit(limit);
    absl::StatusOr<epb::RangeResponse> read = client_->Range(range);
    if (read.status().code() == absl::StatusCode::kResourceExhausted &&
        limit > 1) {
      limit /= 2;  // the page was too large to receive
      continue;
    }
    RETURN_IF_ERROR(read.status());
    const epb::RangeResponse& page = *read;
    // The entry after ours is gone (deleted up to a snapshot) when the
    // page starts later, or when it is empty and a newer snapshot exists.
    int64_t need = 0;
    if (page.kvs_size() > 0 && page.kvs(0).key() != LogKey(read_seq_ + 1)) {
      int64_t first = 0;
      if (!absl::SimpleAtoi(
              absl::string_view(page.kvs(0).key()).substr(log_prefix.size()),
              &first)) {
        return absl::DataLossError(absl::StrCat(
            "log: bad entry key ", page.kvs(0).key().substr(0, 64)));
      }
      need = first - 1;
    } else if (page.kvs_size() == 0) {
      absl::StatusOr<std::pair<storage::v1::SnapshotManifest, int64_t>> newest =
          NewestManifest();
      if (newest.ok() && newest->first.seq() > read_seq_) {
        need = newest->first.seq();
      } else if (!newest.ok() &&
                 newest.status().code() != absl::StatusCode::kNotFound) {
        return newest.status();
      }
    }
    if (need > 0) {
      if (++snapshots > 3) {
        return absl::UnavailableError(
            "catch up: the log keeps moving past the snapshots loaded");
      }
      RETURN_IF_ERROR(LoadSnapshot(need));
      continue;
    }
    for (const mvccpb::KeyValue& kv : page.kvs()) {
      RETURN_IF_ERROR(ApplyEntry(kv, read_seq_ + 1));
    }
    if (!page.more()) break;
  }
  // Best effort: a replica that cannot publish only holds the log back
  // less (the leader then compacts past it, and it loads a snapshot).
  if (absl::Status published = PublishApplied(); !published.ok()) {
    if (published.ToString() != publish_error_) {
      publish_error_ = published.ToString();
      std::fprintf(stderr,
                   "phalanxd: publishing the applied seq: %s (logged again "
                   "when the error changes)\n",
                   publish_error_.c_str());
    }
  } else if (!publish_error_.empty()) {
    publish_error_.clear();
    std::fprintf(stderr, "phalanxd: publishing the applied seq again\n");
  }
  return applied_seq_ - start;
}

absl::StatusOr<core::LoadedState> EtcdStateStore::LoadAll() {
  RETURN_IF_ERROR(CatchUp().status());
  // The log since the newest snapshot counts toward the next one.
  absl::StatusOr<std::pair<storage::v1::SnapshotManifest, int64_t>> newest =
      NewestManifest();
  if (!newest.ok() && newest.status().code() != absl::StatusCode::kNotFound) {
    return newest.status();
  }
  entries_since_snapshot_ =
      applied_seq_ - (newest.ok() ? newest->first.seq() : 0);
  return local_->LoadAll();
}

epb::TxnRequest EtcdStateStore::AppendTxn(int64_t seq,
                                          const std::string& bytes) const {
  epb::TxnRequest txn;
  *txn.add_compare() = CreateRevisionIs(LeaderKey(), term_);
  *txn.add_compare() = CreateRevisionIs(LogKey(seq), 0);
  // The head names the last entry ever appended: a replica that has not
  // applied the whole log cannot append, even where compaction deleted
  // the entries it lacks.
  if (seq == 1) {
    *txn.add_compare() = CreateRevisionIs(HeadKey(), 0);
  } else {
    epb::Compare* head = txn.add_compare();
    head->set_key(HeadKey());
    head->set_target(epb::Compare::VALUE);
    head->set_result(epb::Compare::EQUAL);
    head->set_value(absl::StrCat(seq - 1));
  }
  epb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(LogKey(seq));
  put->set_value(bytes);
  epb::PutRequest* head = txn.add_success()->mutable_request_put();
  head->set_key(HeadKey());
  head->set_value(absl::StrCat(seq));
  txn.add_failure()->mutable_request_range()->set_key(LeaderKey());
  txn.add_failure()->mutable_request_range()->set_key(LogKey(seq));
  return txn;
}

absl::Status EtcdStateStore::Refusal(const epb::TxnResponse& response,
                                     int64_t seq,
                                     const std::string& bytes) const {
  const epb::RangeResponse& leader = response.responses(0).response_range();
  const epb::RangeResponse& entry = response.responses(1).response_range();
  const int64_t leader_term = CreateRevision(leader);
  if (leader_term != term_) {
    return absl::AbortedError(absl::StrCat(
        "fenced: the leader's term is ", leader_term, ", not ", term_.load(),
        leader_term == 0 ? " (no leader)" : " (another replica leads)"));
  }
  // An UNAVAILABLE retry of our own append may find it already written.
  if (entry.kvs_size() == 1 && entry.kvs(0).value() == bytes) {
    return absl::OkStatus();
  }
  return absl::AbortedError(
      absl::StrCat("fenced: log entry ", seq,
                   " is not the next one; this replica is behind the log"));
}

absl::StatusOr<epb::TxnResponse> EtcdStateStore::SendAppend(
    const epb::TxnRequest& txn) {
  if (!lease_fence_.valid_until) return client_->Txn(txn);
  // Bounded by the lease: each round tries every member once (or until
  // the lease's end), and rounds stop once the lease may have expired.
  for (;;) {
    const absl::Time until = lease_fence_.valid_until();
    absl::StatusOr<epb::TxnResponse> response = client_->Txn(txn, until);
    const bool transient =
        response.status().code() == absl::StatusCode::kUnavailable ||
        response.status().code() == absl::StatusCode::kDeadlineExceeded;
    if (!transient) return response;
    const absl::Time now = absl::Now();
    if (now >= until) {
      return absl::AbortedError(absl::StrCat(
          "fenced: no append got through before the lease could expire: ",
          response.status().ToString()));
    }
    absl::SleepFor(std::min(absl::Milliseconds(50), until - now));
  }
}

absl::Status EtcdStateStore::Deposed(absl::Status status) const {
  if (absl::IsAborted(status) && lease_fence_.on_deposed) {
    lease_fence_.on_deposed(status);
  }
  return status;
}

namespace {

// etcd's answer to a write while it is over --quota-backend-bytes (its
// NOSPACE alarm), as the loop's refusal reports it: what it is and what
// the operator does.
absl::Status OverQuota(const absl::Status& status) {
  if (!absl::IsResourceExhausted(status) ||
      !absl::StrContains(status.message(), "database space exceeded")) {
    return status;
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "commit: no space left in etcd: it is over its space quota "
      "(--quota-backend-bytes, NOSPACE alarm; compact and defragment etcd, "
      "then disarm the alarm: writes resume then): ",
      status.message()));
}

}  // namespace

absl::Status EtcdStateStore::AppendEntry(int64_t seq,
                                         const std::string& bytes) {
  absl::StatusOr<epb::TxnResponse> response = SendAppend(AppendTxn(seq, bytes));
  if (!response.ok()) return Deposed(OverQuota(response.status()));
  if (!response->succeeded()) {
    RETURN_IF_ERROR(Deposed(Refusal(*response, seq, bytes)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> EtcdStateStore::AppendBatch(int64_t first,
                                                    const std::string& bytes) {
  if (bytes.size() <= options_.max_batch_bytes) {
    RETURN_IF_ERROR(AppendEntry(first, bytes));
    return first;
  }
  const size_t slice = options_.max_batch_bytes - kPartOverheadBytes;
  const int32_t parts =
      static_cast<int32_t>((bytes.size() + slice - 1) / slice);
  for (int32_t i = 0; i < parts; ++i) {
    if (options_.commit_crash_after_parts >= 0 &&
        i >= options_.commit_crash_after_parts) {
      return absl::AbortedError("commit: crashed between parts (test)");
    }
    storage::v1::LogBatch part;
    part.set_seq(first + i);
    part.set_term(term_);
    part.set_batch_seq(first);
    part.set_part(i);
    part.set_parts(parts);
    part.set_payload(bytes.substr(static_cast<size_t>(i) * slice, slice));
    RETURN_IF_ERROR(AppendEntry(first + i, part.SerializeAsString()));
  }
  // Rare (a cycle admitting thousands of gangs): worth a line.
  std::fprintf(stderr,
               "phalanxd: log: a batch of %zu bytes went to etcd in %d parts "
               "(entries %lld..%lld)\n",
               bytes.size(), parts, static_cast<long long>(first),
               static_cast<long long>(first + parts - 1));
  return first + parts - 1;
}

absl::Status EtcdStateStore::Commit(const core::Mutation& mutation) {
  if (term_ == 0) {
    return absl::FailedPreconditionError("commit: this replica does not lead");
  }
  // After everything read: orphan parts, if any, stay behind.
  const int64_t first = read_seq_ + 1;
  storage::v1::LogBatch batch;
  convert::ToProto(mutation, &batch);
  batch.set_seq(first);
  batch.set_term(term_);
  // The same bytes for the same batch: a retried append recognises its
  // own entry, already in the log, by them.
  const std::string bytes = convert::DeterministicBytes(batch);
  ASSIGN_OR_RETURN(const int64_t last, AppendBatch(first, bytes));
  DropOrphans(first);
  // The batch is in the log now (followers apply it, a new leader has it):
  // a local failure, a full disk included, must not read as a refusal the
  // caller may report as "not committed". It stops the daemon instead; a
  // restart applies the log.
  if (absl::Status applied = local_->ApplyLogBatch(mutation, last);
      !applied.ok()) {
    return absl::InternalError(
        absl::StrCat("commit: appended to the log but not applied locally: ",
                     applied.message()));
  }
  applied_seq_ = last;
  read_seq_ = last;
  MaybeSnapshot(last - first + 1, bytes.size());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<core::Event>> EtcdStateStore::ReadEvents(
    int64_t after, int limit, size_t max_bytes) {
  return local_->ReadEvents(after, limit, max_bytes);
}

absl::StatusOr<std::vector<core::AuditRecord>> EtcdStateStore::ReadAudit(
    int64_t after, int limit) {
  return local_->ReadAudit(after, limit);
}

absl::StatusOr<int64_t> EtcdStateStore::LastAuditSequence() {
  return local_->LastAuditSequence();
}

}  // namespace phalanx::storage::etcd
