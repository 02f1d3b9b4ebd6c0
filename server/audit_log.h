// AuditLog: the persisted record of who changed what and who was refused
// (docs/security.md). The gate and the handlers hand it entries from any
// thread; the scheduler loop writes the pending ones into each batch's
// mutation (so a mutating call's record is durable with its effect), gives
// each its sequence number and trims by the config's retention (count and
// age). Refusals are bounded per principal (a token bucket), so a flood of
// refused calls cannot flood the disk; what is dropped is counted.
//
// Thread-safe: Record, List and dropped from any thread; Contribute on the
// loop thread only.
#ifndef PHALANX_SERVER_AUDIT_LOG_H_
#define PHALANX_SERVER_AUDIT_LOG_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/state_store.h"
#include "phalanx/v1/admin.pb.h"
#include "server/gate.h"
#include "server/scheduler_loop.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {

class AuditLog : public BatchObserver, public AuditSink {
 public:
  struct Options {
    // Refusals recorded per principal: a token bucket.
    double refusals_per_second = 20;
    double refusal_burst = 200;
    // Entries waiting for the next batch at most (then dropped, counted).
    size_t max_pending = 10000;
  };

  // Continues the sequence after what `store` holds.
  static absl::StatusOr<std::unique_ptr<AuditLog>> Open(core::AuditStore* store,
                                                        Options options);
  static absl::StatusOr<std::unique_ptr<AuditLog>> Open(
      core::AuditStore* store) {
    return Open(store, Options{});
  }

  // Continues the sequence after what the store holds now: an HA replica
  // promoted to leader, whose store moved on while it followed. Call before
  // the loop starts.
  absl::Status Resume();

  void Record(AuditEntry entry) override;

  // Moves the pending entries into `mutation` and trims by retention.
  void Contribute(core::Mutation& mutation, const core::Scheduler& scheduler,
                  absl::Time now) override;
  void OnApplied(const core::Mutation&, const core::Scheduler&, absl::Duration,
                 int) override {}
  void OnDurable(const core::Mutation&, absl::Duration, int) override {}

  // One page of records, oldest first. InvalidArgument for a bad page size
  // or token.
  absl::Status List(const v1::ListAuditRecordsRequest& request,
                    v1::ListAuditRecordsResponse* response) const;
  // Entries dropped since start (rate bound or full queue).
  int64_t dropped() const { return dropped_.load(); }

 private:
  AuditLog(core::AuditStore* store, Options options, int64_t last_sequence);
  bool AdmitRefusal(const std::string& principal, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The first sequence to keep under the age rule, read from the store.
  int64_t FirstYoungerThan(absl::Time cutoff);

  core::AuditStore* store_;
  const Options options_;
  std::atomic<int64_t> dropped_{0};

  Mutex mu_;
  std::deque<AuditEntry> pending_ ABSL_GUARDED_BY(mu_);
  struct Bucket {
    double tokens = 0;
    absl::Time last;
  };
  // Keyed by principal name ("" = unauthenticated): bounded by the --auth
  // file's principals.
  absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);

  // Loop thread only.
  int64_t next_sequence_;
  int64_t first_kept_ = 1;
  absl::Time next_age_check_ = absl::InfinitePast();
};

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_AUDIT_LOG_H_
