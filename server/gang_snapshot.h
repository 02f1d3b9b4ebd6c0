// GangSnapshot: an immutable map of gang id -> gang, shared between the
// scheduler loop's published views. Applying a batch copies only the shards it
// touches, so publishing a view costs O(changed gangs), not O(all gangs).
// Immutable once built; safe to read from any thread.
#ifndef PHALANX_SERVER_GANG_SNAPSHOT_H_
#define PHALANX_SERVER_GANG_SNAPSHOT_H_

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/strings/string_view.h"
#include "core/model.h"

namespace phalanx::server {

// Orders gang ids numerically: an id ending in digits sorts by the text
// before them, then by their value ("g-2" < "g-10", "g-999999" <
// "g-1000000"), then by the whole string (so "g-02" and "g-2" differ).
// Server ids ("g-000042") are all of that form. A strict weak order.
struct GangIdOrder {
  using is_transparent = void;
  bool operator()(absl::string_view a, absl::string_view b) const;
};

class GangSnapshot {
 public:
  GangSnapshot();

  // Returns a snapshot with `put` stored and `deleted` removed.
  GangSnapshot Apply(const std::vector<core::GangPtr>& put,
                     const std::vector<core::GangId>& deleted) const;
  // Returns the gang, or null.
  core::GangPtr Find(const core::GangId& id) const;
  // Returns up to `limit` gangs with id > `after` (in GangIdOrder) for
  // which `keep` is true.
  std::vector<core::GangPtr> List(
      const std::string& after, int limit,
      const std::function<bool(const core::Gang&)>& keep) const;
  size_t size() const { return size_; }

 private:
  static constexpr int kShards = 256;
  using Shard = absl::btree_map<std::string, core::GangPtr, GangIdOrder>;
  static int ShardOf(const std::string& id);

  std::array<std::shared_ptr<const Shard>, kShards> shards_;
  size_t size_ = 0;
};

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_GANG_SNAPSHOT_H_
