// The order stage of placement (docs/design.md §6): in which orders the pod
// sets of one gang are placed one after another. Greedy placement of one
// set can take the only room another had, so the listed order is never
// trusted: sets are tried most constrained first, then (when that fails)
// other orders, within a fixed bound. Pure functions and a small value
// type; thread-compatible.
#ifndef PHALANX_CORE_PLACEMENT_ORDER_H_
#define PHALANX_CORE_PLACEMENT_ORDER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "core/fleet.h"
#include "core/model.h"

namespace phalanx::core {

// Gangs of up to this many pod sets have every order tried...
inline constexpr size_t kExhaustiveSets = 4;
// ...and no gang has more orders tried than this (4! = 24); larger gangs
// get the most-constrained-first order and each other set brought to the
// front of it. With one placement per set alone (a set that cannot fit
// alone fits in no order), a search costs at most kMaxOrders + sets greedy
// placements of the gang.
inline constexpr size_t kMaxOrders = 24;

// Appends what placement sees of `set` (not its name) to `key`. Strings are
// length-prefixed, so no name can forge a separator.
void AppendPodSetShape(std::string& key, const PodSetSpec& set);

// The indices of spec.pod_sets, most constrained first: larger pods, larger
// slices, REQUIRED before PREFERRED before UNCONSTRAINED, narrower levels,
// more GPUs in all, more CPU and memory; then by shape. The order depends on
// what the sets are, never on where they are listed (sets alike in every
// respect are interchangeable and keep their listed order).
std::vector<size_t> MostConstrainedFirst(const GangSpec& spec,
                                         const Fleet& fleet);

// The orders after `first` (a most-constrained-first order) that the joint
// search tries, in the order it tries them, within the bounds above.
class OrderSearch {
 public:
  explicit OrderSearch(std::vector<size_t> first);
  // Sets `order` to the next order to try; false when there is none left.
  bool Next(std::vector<size_t>& order);

 private:
  std::vector<size_t> first_;
  std::vector<size_t> positions_;  // exhaustive: a permutation of 0..n-1
  size_t front_ = 0;               // bounded: the set last brought forward
  size_t tried_ = 1;               // `first` counts
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_PLACEMENT_ORDER_H_
