#include "storage/etcd/etcd_state_store.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/check.h"
#include "core/status_macros.h"
#include "phalanx/storage/v1/log.pb.h"
#include "proto/log_convert.h"

namespace phalanx::storage::etcd {
namespace {

epb::Compare CreateRevisionIs(const std::string& key, int64_t revision) {
  epb::Compare compare;
  compare.set_key(key);
  compare.set_target(epb::Compare::CREATE);
  compare.set_result(epb::Compare::EQUAL);
  compare.set_create_revision(revision);
  return compare;
}

// The create revision of the only key `range` returned; 0 when none.
int64_t CreateRevision(const epb::RangeResponse& range) {
  return range.kvs_size() == 0 ? 0 : range.kvs(0).create_revision();
}

}  // namespace

EtcdStateStore::EtcdStateStore(EtcdClient* client,
                               std::unique_ptr<RocksDbStore> local,
                               EtcdStateStoreOptions options)
    : client_(client), local_(std::move(local)), options_(std::move(options)) {
  absl::StatusOr<int64_t> seq = local_->LogSeq();
  PHALANX_CHECK(seq.ok());
  applied_seq_ = *seq;
}

std::string EtcdStateStore::LeaderKey() const {
  return absl::StrCat(options_.prefix, "/leader");
}

std::string EtcdStateStore::LogKey(int64_t seq) const {
  return absl::StrFormat("%s/log/%020d", options_.prefix, seq);
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
  ASSIGN_OR_RETURN(core::Mutation mutation, convert::MutationFromProto(batch));
  RETURN_IF_ERROR(local_->ApplyLogBatch(mutation, seq));
  applied_seq_ = seq;
  if (apply_listener_) apply_listener_(mutation, seq);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> EtcdStateStore::CatchUp() {
  const int64_t start = applied_seq_.load();
  // Pages of entries until a short page; bounded by the log's length.
  for (;;) {
    epb::RangeRequest range;
    range.set_key(LogKey(applied_seq_ + 1));
    range.set_range_end(PrefixEnd(absl::StrCat(options_.prefix, "/log/")));
    range.set_limit(options_.catch_up_page);
    ASSIGN_OR_RETURN(epb::RangeResponse page, client_->Range(range));
    for (const mvccpb::KeyValue& kv : page.kvs()) {
      RETURN_IF_ERROR(ApplyEntry(kv, applied_seq_ + 1));
    }
    if (!page.more()) break;
  }
  return applied_seq_ - start;
}

absl::StatusOr<core::LoadedState> EtcdStateStore::LoadAll() {
  RETURN_IF_ERROR(CatchUp().status());
  return local_->LoadAll();
}

epb::TxnRequest EtcdStateStore::AppendTxn(int64_t seq,
                                          const std::string& bytes) const {
  epb::TxnRequest txn;
  *txn.add_compare() = CreateRevisionIs(LeaderKey(), term_);
  *txn.add_compare() = CreateRevisionIs(LogKey(seq), 0);
  epb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(LogKey(seq));
  put->set_value(bytes);
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
  return absl::AbortedError(absl::StrCat(
      "fenced: log entry ", seq, " is taken; this replica is behind the log"));
}

absl::Status EtcdStateStore::Commit(const core::Mutation& mutation) {
  if (term_ == 0) {
    return absl::FailedPreconditionError("commit: this replica does not lead");
  }
  const int64_t seq = applied_seq_ + 1;
  storage::v1::LogBatch batch;
  convert::ToProto(mutation, &batch);
  batch.set_seq(seq);
  batch.set_term(term_);
  const std::string bytes = batch.SerializeAsString();
  if (bytes.size() > options_.max_batch_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "commit: batch of ", bytes.size(), " bytes exceeds the log's bound of ",
        options_.max_batch_bytes, " bytes"));
  }
  ASSIGN_OR_RETURN(epb::TxnResponse response,
                   client_->Txn(AppendTxn(seq, bytes)));
  if (!response.succeeded()) RETURN_IF_ERROR(Refusal(response, seq, bytes));
  RETURN_IF_ERROR(local_->ApplyLogBatch(mutation, seq));
  applied_seq_ = seq;
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
