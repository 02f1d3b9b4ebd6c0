#include "core/quota_book.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/check.h"
#include "core/fleet.h"
#include "core/saturating.h"

namespace phalanx::core {
namespace {

int64_t Lookup(const std::map<std::string, int64_t>& map,
               const std::string& key) {
  auto it = map.find(key);
  return it == map.end() ? 0 : it->second;
}

}  // namespace

const Queue* QuotaBook::FindQueue(const QueueName& name) const {
  auto it = queues_.find(name);
  return it == queues_.end() ? nullptr : &it->second;
}

void QuotaBook::PutQueue(Queue queue) {
  const QueueName name = queue.name;
  queues_[name] = std::move(queue);
}

void QuotaBook::EraseQueue(const QueueName& name) {
  queues_.erase(name);
  ledger_.Forget(name);
}

const HeldGpus& QuotaBook::Held(const QueueName& queue) const {
  static const HeldGpus kNone;
  auto it = held_.find(queue);
  return it == held_.end() ? kNone : it->second;
}

void QuotaBook::Charge(const Gang& gang, const Fleet& fleet, int sign) {
  HeldGpus& held = held_[gang.spec.queue];
  // Summed over each run of pods on one model: one map update per run.
  const std::string* model = nullptr;
  int64_t gpus = 0;
  for (const PodPlacement& pod : gang.placement) {
    const int slot = fleet.Find(pod.node);
    PHALANX_CHECK(slot >= 0);
    const std::string& pod_model = fleet.slots()[slot].node.spec.gpu_model;
    if (model != nullptr && *model != pod_model) {
      held[*model] += sign * gpus;
      gpus = 0;
    }
    model = &pod_model;
    gpus += static_cast<int64_t>(pod.gpu_indices.size());
  }
  if (model != nullptr) held[*model] += sign * gpus;
}

std::string QuotaBook::QuotaReason(const Queue& queue, const std::string& model,
                                   int64_t gpus) const {
  if (queue.nominal_gpus.empty()) return "";  // no quota declared: unlimited
  const int64_t nominal = Lookup(queue.nominal_gpus, model);
  const int64_t held = Lookup(Held(queue.name), model);
  // Quotas are bounded (limits.max_quota_gpus) but queues are not, so every
  // sum below saturates rather than wraps.
  const int64_t over = SaturatingSub(SaturatingAdd(held, gpus), nominal);
  if (over <= 0) return "";
  auto refuse = [&](absl::string_view why) {
    return absl::StrCat("QUOTA: queue ", queue.name.value(), " would hold ",
                        over, " ", model, " GPUs above its nominal ", nominal,
                        "; ", why);
  };
  if (queue.borrowing_limit_gpus >= 0 && over > queue.borrowing_limit_gpus) {
    return refuse(
        absl::StrCat("its borrowing limit is ", queue.borrowing_limit_gpus));
  }
  if (queue.parent.empty()) return refuse("it has no cohort to borrow from");
  // Borrowing in the cohort after this admission must not exceed what the
  // siblings can lend from their idle nominal quota.
  int64_t borrowed = over;
  int64_t lendable = 0;
  for (const auto& [name, sibling] : queues_) {
    if (sibling.parent != queue.parent || name == queue.name ||
        sibling.nominal_gpus.empty()) {
      continue;
    }
    const int64_t spare = SaturatingSub(Lookup(sibling.nominal_gpus, model),
                                        Lookup(Held(name), model));
    if (spare < 0) {
      borrowed = SaturatingSub(borrowed, spare);
    } else {
      lendable = SaturatingAdd(
          lendable, sibling.lending_limit_gpus < 0
                        ? spare
                        : std::min(spare, sibling.lending_limit_gpus));
    }
  }
  if (borrowed <= lendable) return "";
  const int64_t already =
      SaturatingAdd(SaturatingSub(borrowed, over),
                    std::max<int64_t>(0, SaturatingSub(held, nominal)));
  return refuse(absl::StrCat("cohort ", queue.parent.value(), " lends ",
                             lendable, " and ", already, " are borrowed"));
}

bool QuotaBook::WaitsForLending(const Queue& queue, const std::string& model,
                                int64_t gpus) const {
  if (queue.nominal_gpus.empty() || queue.parent.empty()) return false;
  const int64_t over =
      SaturatingSub(SaturatingAdd(Lookup(Held(queue.name), model), gpus),
                    Lookup(queue.nominal_gpus, model));
  return over > 0 &&
         (queue.borrowing_limit_gpus < 0 || over <= queue.borrowing_limit_gpus);
}

int64_t QuotaBook::BorrowedGpus(const QueueName& name) const {
  const Queue* queue = FindQueue(name);
  if (queue == nullptr || queue->nominal_gpus.empty()) return 0;
  int64_t borrowed = 0;
  for (const auto& [model, gpus] : Held(name)) {
    borrowed = SaturatingAdd(
        borrowed,
        std::max<int64_t>(
            0, SaturatingSub(gpus, Lookup(queue->nominal_gpus, model))));
  }
  return borrowed;
}

std::set<QueueName> QuotaBook::ReclaimableFrom(const Queue& mine,
                                               int64_t gpus) const {
  std::set<QueueName> from;
  if (mine.parent.empty() || mine.nominal_gpus.empty()) return from;
  int64_t total_held = 0;
  int64_t total_nominal = 0;
  for (const auto& [model, held] : Held(mine.name)) total_held += held;
  for (const auto& [model, nominal] : mine.nominal_gpus) {
    total_nominal = SaturatingAdd(total_nominal, nominal);
  }
  if (total_held + gpus > total_nominal) return from;
  for (const auto& [name, theirs] : queues_) {
    if (name == mine.name || theirs.parent != mine.parent ||
        theirs.nominal_gpus.empty()) {
      continue;
    }
    for (const auto& [model, held] : Held(name)) {
      if (held > Lookup(theirs.nominal_gpus, model)) {
        from.insert(name);
        break;
      }
    }
  }
  return from;
}

FairShareScore QuotaBook::Score(const QueueName& name) const {
  if (!fair_share_enabled_) return FairShareScore{};
  const Queue* queue = FindQueue(name);
  const double weight = queue == nullptr ? 1.0 : queue->weight;
  static const HeldGpus kNone;
  return ledger_.Score(name, weight, decayed_usage_only_ ? kNone : Held(name));
}

void QuotaBook::Accrue(const QueueName& queue, absl::Time now) {
  ledger_.Accrue(queue, Held(queue), now);
}

void QuotaBook::Sample(absl::Time now) {
  if (now - last_sample_ < sample_interval_) return;
  last_sample_ = now;
  for (const auto& [name, queue] : queues_) Accrue(name, now);
}

void QuotaBook::SetFairShare(const FairShareConfig& config) {
  ledger_.set_config(config);
  fair_share_enabled_ = config.enabled;
  decayed_usage_only_ = config.decayed_usage_only;
  sample_interval_ = config.sample_interval;
}

}  // namespace phalanx::core
