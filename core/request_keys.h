// RequestKeys: the idempotency keys of submits — (queue, request_id) → the
// gang it created and its spec's fingerprint — and when each expires.
//
// The only writer of request keys. Owned by the Scheduler; not thread-safe.
#ifndef PHALANX_CORE_REQUEST_KEYS_H_
#define PHALANX_CORE_REQUEST_KEYS_H_

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/time/time.h"
#include "core/model.h"

namespace phalanx::core {

class RequestKeys {
 public:
  using Key = std::pair<QueueName, std::string>;

  // The record of key (queue, request_id), or null.
  const RequestRecord* Find(const Key& key) const;
  // Adds or replaces a record (from a submit, or from the store).
  void Put(RequestRecord record);
  // Removes and returns the records expired at `now`, in expiry order.
  std::vector<RequestRecord> TakeExpired(absl::Time now);
  // Whether `gang`'s request key is live and names it.
  bool NamesGang(const Gang& gang) const;

 private:
  absl::btree_map<Key, RequestRecord> records_;
  std::set<std::pair<absl::Time, Key>> expiry_;
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_REQUEST_KEYS_H_
