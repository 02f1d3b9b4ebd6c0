#include "core/request_keys.h"

namespace phalanx::core {

const RequestRecord* RequestKeys::Find(const Key& key) const {
  auto it = records_.find(key);
  return it == records_.end() ? nullptr : &it->second;
}

void RequestKeys::Put(RequestRecord record) {
  Key key{record.queue, record.request_id};
  expiry_.insert({record.expires, key});
  records_[std::move(key)] = std::move(record);
}

std::vector<RequestRecord> RequestKeys::TakeExpired(absl::Time now) {
  std::vector<RequestRecord> expired;
  while (!expiry_.empty() && expiry_.begin()->first <= now) {
    const Key key = expiry_.begin()->second;
    expiry_.erase(expiry_.begin());
    // A key re-put with a later expiry keeps its newer entry.
    auto it = records_.find(key);
    if (it != records_.end() && it->second.expires <= now) {
      expired.push_back(std::move(it->second));
      records_.erase(it);
    }
  }
  return expired;
}

bool RequestKeys::NamesGang(const Gang& gang) const {
  if (gang.spec.request_id.empty()) return false;
  const RequestRecord* record = Find({gang.spec.queue, gang.spec.request_id});
  return record != nullptr && record->gang_id == gang.id;
}

}  // namespace phalanx::core
