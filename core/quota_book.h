// QuotaBook: the queues, the GPUs each holds by model, and the fair-share
// ledger of their decayed usage — what quota checks, borrowing, reclaim and
// fair-share ordering read.
//
// The only writer of queue records, held-GPU counts and the ledger. Owned by
// the Scheduler; not thread-safe.
#ifndef PHALANX_CORE_QUOTA_BOOK_H_
#define PHALANX_CORE_QUOTA_BOOK_H_

#include <cstdint>
#include <set>
#include <string>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "core/fair_share.h"
#include "core/model.h"

namespace phalanx::core {

class Fleet;

class QuotaBook {
 public:
  explicit QuotaBook(const FairShareConfig& fair_share) {
    SetFairShare(fair_share);
  }

  const absl::btree_map<QueueName, Queue>& queues() const { return queues_; }
  const Queue* FindQueue(const QueueName& name) const;
  // Creates or replaces a queue (its checks are the caller's).
  void PutQueue(Queue queue);
  // Forgets a queue and its ledger entry.
  void EraseQueue(const QueueName& name);

  // GPUs `queue` holds, by model (empty when none).
  const HeldGpus& Held(const QueueName& queue) const;
  // Adds (sign +1) or removes (-1) the GPUs of `gang`'s placement to its
  // queue's count; every placed node must be in `fleet`.
  void Charge(const Gang& gang, const Fleet& fleet, int sign);

  // "" when `queue` may take `gpus` more GPUs of `model` (within nominal
  // quota, or borrowing what its cohort can lend), else the "QUOTA: …"
  // reason why not.
  std::string QuotaReason(const Queue& queue, const std::string& model,
                          int64_t gpus) const;
  // GPUs the queue holds above its nominal quota, over all models.
  int64_t BorrowedGpus(const QueueName& name) const;
  // Whether `queue`, asking `gpus` more `model` GPUs above its nominal
  // quota, stays within its borrowing limit and has a cohort: a refusal
  // then waits only for the cohort to lend more.
  bool WaitsForLending(const Queue& queue, const std::string& model,
                       int64_t gpus) const;
  // The sibling queues above their nominal quota of some model, from which
  // a gang of `queue` asking for `gpus` more may reclaim: none unless
  // `queue` stays within its own total nominal quota after it.
  std::set<QueueName> ReclaimableFrom(const Queue& queue, int64_t gpus) const;

  // The queue's fair-share score now (lower goes first); all equal when
  // fair sharing is off; without the GPUs held now with
  // FairShareConfig::decayed_usage_only.
  FairShareScore Score(const QueueName& name) const;
  // Accrues `queue`'s usage up to `now` (before its holdings change).
  void Accrue(const QueueName& queue, absl::Time now);
  // Accrues every queue, at most once per sample interval.
  void Sample(absl::Time now);
  void SetFairShare(const FairShareConfig& config);
  const FairShareLedger& ledger() const { return ledger_; }
  FairShareLedger& ledger() { return ledger_; }

 private:
  absl::btree_map<QueueName, Queue> queues_;
  absl::flat_hash_map<QueueName, HeldGpus> held_;
  FairShareLedger ledger_;
  bool fair_share_enabled_ = true;
  bool decayed_usage_only_ = false;
  absl::Duration sample_interval_;
  absl::Time last_sample_ = absl::InfinitePast();
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_QUOTA_BOOK_H_
