// FairShareLedger: Admission Fair Sharing (docs/design.md §5). Per queue and
// GPU model, a decayed usage U — an exponential moving average of the GPUs the
// queue holds — and the score that orders queues (lower goes first).
// Deterministic and clock-free: time is an argument. Owned by the Scheduler;
// not thread-safe.
#ifndef PHALANX_CORE_FAIR_SHARE_H_
#define PHALANX_CORE_FAIR_SHARE_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/time/time.h"
#include "core/ids.h"
#include "core/model.h"

namespace phalanx::core {

// Orders queues: every positive-weight queue before every weight-0 queue,
// then by value. Never NaN.
struct FairShareScore {
  bool zero_weight = false;
  double value = 0;
  bool operator<(const FairShareScore& other) const {
    if (zero_weight != other.zero_weight) return !zero_weight;
    return value < other.value;
  }
  bool operator==(const FairShareScore&) const = default;
};

using HeldGpus = std::map<std::string, int64_t>;

// Where a pending gang of `priority` stands in the admission order, as the
// keys compared before and after its queue's fair-share score (smaller
// first): (-priority, 0) in priority order; (0, -priority) score first
// (kFairShareFirst); below AdmissionConfig::fair_share_first_below_priority
// one shared key behind every higher priority, then -priority. Monotone in
// priority, so a queue's own gangs keep their priority order.
std::pair<int64_t, int64_t> TierKeys(const AdmissionConfig& config,
                                     int priority);

class FairShareLedger {
 public:
  explicit FairShareLedger(FairShareConfig config = {}) : config_(config) {}
  void set_config(const FairShareConfig& config) { config_ = config; }

  // Decays `queue`'s usage to `now`, given that it held `held` since its
  // last update: U <- (1 - A)·U + A·held with A = 1 - 0.5^(Δt / half_life).
  void Accrue(const QueueName& queue, const HeldGpus& held, absl::Time now);
  // Σ_model w_model · (U_model + held_model) / weight.
  FairShareScore Score(const QueueName& queue, double weight,
                       const HeldGpus& held) const;
  // Sum over models of the decayed usage (for metrics).
  double DecayedUsage(const QueueName& queue) const;

  void Restore(const QueueName& queue, LedgerEntry entry);
  void Forget(const QueueName& queue);
  const std::map<QueueName, LedgerEntry>& entries() const { return entries_; }
  // Queues changed since the last call.
  std::vector<QueueName> TakeDirty();

 private:
  double ModelWeight(const std::string& model) const;

  FairShareConfig config_;
  std::map<QueueName, LedgerEntry> entries_;
  absl::btree_set<QueueName> dirty_;
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_FAIR_SHARE_H_
