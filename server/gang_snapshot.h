// GangSnapshot: an immutable map of gang id -> gang, shared between the
// scheduler loop's published views. It is a persistent treap ordered by
// GangIdOrder: applying a batch copies only the nodes on the paths to the
// gangs it changes (O(log n) each, expected), and every other node is shared
// with the snapshot before — so publishing a view costs O(changed gangs ×
// log n), and does not grow with what a touched region holds (a sharded
// copy-on-write map would copy a whole shard per touched region).
// Immutable once built; safe to read from any thread.
#ifndef PHALANX_SERVER_GANG_SNAPSHOT_H_
#define PHALANX_SERVER_GANG_SNAPSHOT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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
  GangSnapshot() = default;

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

  struct Node;
  using NodePtr = std::shared_ptr<const Node>;

 private:
  NodePtr root_;
  size_t size_ = 0;
};

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_GANG_SNAPSHOT_H_
