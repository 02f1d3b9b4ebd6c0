#include "core/fair_share.h"

#include <cmath>
#include <set>

namespace phalanx::core {

std::pair<int64_t, int64_t> TierKeys(const AdmissionConfig& config,
                                     int priority) {
  const int64_t p = priority;
  if (config.ordering == Ordering::kFairShareFirst) return {0, -p};
  // Every gang of the low tier shares one key behind all higher priorities,
  // so the score decides among them; priority breaks ties after it.
  const int64_t bound = config.fair_share_first_below_priority;
  if (p < bound) return {1 - bound, -p};
  return {-p, 0};
}

void FairShareLedger::Accrue(const QueueName& queue, const HeldGpus& held,
                             absl::Time now) {
  auto [it, fresh] = entries_.try_emplace(queue);
  LedgerEntry& entry = it->second;
  if (fresh) {
    entry.updated = now;
    dirty_.insert(queue);
    return;
  }
  if (now <= entry.updated) return;
  const double half_lives =
      absl::FDivDuration(now - entry.updated, config_.half_life);
  const double alpha = 1.0 - std::exp2(-half_lives);
  std::set<std::string> models;
  for (const auto& [model, u] : entry.usage) models.insert(model);
  for (const auto& [model, gpus] : held) models.insert(model);
  for (const std::string& model : models) {
    auto h = held.find(model);
    const double holding =
        h == held.end() ? 0.0 : static_cast<double>(h->second);
    double& u = entry.usage[model];
    u = (1.0 - alpha) * u + alpha * holding;
  }
  entry.updated = now;
  dirty_.insert(queue);
}

double FairShareLedger::ModelWeight(const std::string& model) const {
  auto it = config_.model_weights.find(model);
  return it == config_.model_weights.end() ? 1.0 : it->second;
}

FairShareScore FairShareLedger::Score(const QueueName& queue, double weight,
                                      const HeldGpus& held) const {
  double total = 0;
  if (auto it = entries_.find(queue); it != entries_.end()) {
    for (const auto& [model, u] : it->second.usage) {
      total += ModelWeight(model) * u;
    }
  }
  for (const auto& [model, gpus] : held) {
    total += ModelWeight(model) * static_cast<double>(gpus);
  }
  if (weight <= 0) return FairShareScore{true, total};
  return FairShareScore{false, total / weight};
}

double FairShareLedger::DecayedUsage(const QueueName& queue) const {
  double total = 0;
  if (auto it = entries_.find(queue); it != entries_.end()) {
    for (const auto& [model, u] : it->second.usage) total += u;
  }
  return total;
}

void FairShareLedger::Restore(const QueueName& queue, LedgerEntry entry) {
  entries_[queue] = std::move(entry);
}

void FairShareLedger::Forget(const QueueName& queue) {
  entries_.erase(queue);
  dirty_.erase(queue);
}

std::vector<QueueName> FairShareLedger::TakeDirty() {
  std::vector<QueueName> out(dirty_.begin(), dirty_.end());
  dirty_.clear();
  return out;
}

}  // namespace phalanx::core
