#include "server/audit_log.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "proto/convert.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {
namespace {

constexpr int kDefaultPageSize = 100;
constexpr int kMaxPageSize = 1000;
// The age rule reads the oldest records once a minute at most.
constexpr absl::Duration kAgeCheckInterval = absl::Minutes(1);
constexpr int kAgeCheckPage = 1000;

}  // namespace

absl::StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(
    core::AuditStore* store, Options options) {
  ASSIGN_OR_RETURN(int64_t last, store->LastAuditSequence());
  std::unique_ptr<AuditLog> log(new AuditLog(store, options, last));
  ASSIGN_OR_RETURN(std::vector<core::AuditRecord> oldest,
                   store->ReadAudit(0, 1));
  if (!oldest.empty()) log->first_kept_ = oldest.front().sequence;
  return log;
}

absl::Status AuditLog::Resume() {
  ASSIGN_OR_RETURN(int64_t last, store_->LastAuditSequence());
  ASSIGN_OR_RETURN(std::vector<core::AuditRecord> oldest,
                   store_->ReadAudit(0, 1));
  next_sequence_ = last + 1;
  first_kept_ = oldest.empty() ? next_sequence_ : oldest.front().sequence;
  return absl::OkStatus();
}

AuditLog::AuditLog(core::AuditStore* store, Options options,
                   int64_t last_sequence)
    : store_(store), options_(options), next_sequence_(last_sequence + 1) {
  first_kept_ = next_sequence_;
}

void AuditLog::Record(AuditEntry entry) {
  MutexLock lock(&mu_);
  const bool refusal = entry.outcome != absl::StatusCode::kOk;
  if ((refusal && !AdmitRefusal(entry.principal, entry.time)) ||
      pending_.size() >= options_.max_pending) {
    dropped_.fetch_add(1);
    return;
  }
  pending_.push_back(std::move(entry));
}

bool AuditLog::AdmitRefusal(const std::string& principal, absl::Time now) {
  auto [it, inserted] =
      buckets_.try_emplace(principal, Bucket{options_.refusal_burst, now});
  Bucket& bucket = it->second;
  if (!inserted && now > bucket.last) {
    bucket.tokens =
        std::min(options_.refusal_burst,
                 bucket.tokens + options_.refusals_per_second *
                                     absl::ToDoubleSeconds(now - bucket.last));
    bucket.last = now;
  }
  if (bucket.tokens < 1) return false;
  bucket.tokens -= 1;
  return true;
}

void AuditLog::Contribute(core::Mutation& mutation,
                          const core::Scheduler& scheduler, absl::Time now) {
  std::deque<AuditEntry> entries;
  {
    MutexLock lock(&mu_);
    entries.swap(pending_);
  }
  for (AuditEntry& entry : entries) {
    mutation.audit_put.push_back(core::AuditRecord{
        next_sequence_++, entry.time, std::move(entry.principal),
        std::move(entry.method), std::move(entry.target),
        absl::StatusCodeToString(entry.outcome), std::move(entry.summary)});
  }
  const core::RetentionConfig& retention = scheduler.config().retention;
  int64_t keep_from =
      std::max(first_kept_, next_sequence_ - retention.audit_records);
  if (now >= next_age_check_) {
    next_age_check_ = now + kAgeCheckInterval;
    keep_from =
        std::max(keep_from, FirstYoungerThan(now - retention.audit_age));
  }
  if (keep_from > first_kept_) {
    mutation.trim_audit_before = keep_from;
    first_kept_ = keep_from;
  }
}

int64_t AuditLog::FirstYoungerThan(absl::Time cutoff) {
  int64_t after = first_kept_ - 1;
  // Bounded: at most one page beyond the first record still young.
  auto page = store_->ReadAudit(after, kAgeCheckPage);
  if (!page.ok()) return first_kept_;
  for (const core::AuditRecord& record : *page) {
    if (record.time >= cutoff) return record.sequence;
  }
  return page->empty() ? first_kept_ : page->back().sequence + 1;
}

absl::Status AuditLog::List(const v1::ListAuditRecordsRequest& request,
                            v1::ListAuditRecordsResponse* response) const {
  if (request.page_size() < 0 || request.page_size() > kMaxPageSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size: must be in [0, ", kMaxPageSize, "]"));
  }
  int64_t after = 0;
  if (!request.page_token().empty() &&
      (!absl::SimpleAtoi(request.page_token(), &after) || after < 0)) {
    return absl::InvalidArgumentError(
        "page_token: not a token this call returned");
  }
  const int limit =
      request.page_size() == 0 ? kDefaultPageSize : request.page_size();
  ASSIGN_OR_RETURN(std::vector<core::AuditRecord> records,
                   store_->ReadAudit(after, limit + 1));
  const bool more = static_cast<int>(records.size()) > limit;
  if (more) records.resize(limit);
  for (const core::AuditRecord& record : records) {
    convert::ToProto(record, response->add_records());
  }
  if (more)
    response->set_next_page_token(absl::StrCat(records.back().sequence));
  response->set_dropped(dropped());
  return absl::OkStatus();
}

}  // namespace phalanx::server
