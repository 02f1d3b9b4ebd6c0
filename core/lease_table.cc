#include "core/lease_table.h"

#include <algorithm>

namespace phalanx::core {

void LeaseTable::Set(const GangId& gang, absl::Time expire) {
  auto [it, inserted] = expiry_.try_emplace(gang, expire);
  if (!inserted) {
    if (it->second == expire) return;
    by_time_.erase({it->second, gang});
    it->second = expire;
  }
  by_time_.insert({expire, gang});
}

void LeaseTable::Erase(const GangId& gang) {
  auto it = expiry_.find(gang);
  if (it == expiry_.end()) return;
  by_time_.erase({it->second, gang});
  expiry_.erase(it);
}

std::optional<absl::Time> LeaseTable::ExpiryOf(const GangId& gang) const {
  auto it = expiry_.find(gang);
  if (it == expiry_.end()) return std::nullopt;
  return it->second;
}

std::vector<GangId> LeaseTable::TakeLapsed(absl::Time now) {
  std::vector<GangId> lapsed;
  if (now < not_before_) return lapsed;
  while (!by_time_.empty() && by_time_.begin()->first <= now) {
    const GangId gang = by_time_.begin()->second;
    by_time_.erase(by_time_.begin());
    expiry_.erase(gang);
    lapsed.push_back(gang);
  }
  return lapsed;
}

absl::Time LeaseTable::NextLapse() const {
  if (by_time_.empty()) return absl::InfiniteFuture();
  return std::max(by_time_.begin()->first, not_before_);
}

}  // namespace phalanx::core
