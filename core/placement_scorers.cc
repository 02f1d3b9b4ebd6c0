#include "core/placement_scorers.h"

#include <set>
#include <tuple>

#include "core/check.h"

namespace phalanx::core {

std::vector<std::pair<int, int64_t>> Distribute(std::vector<int64_t> left,
                                                const std::vector<int64_t>& tie,
                                                int64_t count, bool first_fit) {
  std::vector<std::pair<int, int64_t>> parts;
  if (first_fit) {
    for (size_t i = 0; i < left.size() && count > 0; ++i) {
      const int64_t take = std::min(count, left[i]);
      if (take > 0) parts.emplace_back(static_cast<int>(i), take);
      count -= take;
    }
    return parts;
  }
  while (count > 0) {
    int pick = -1;
    for (size_t i = 0; i < left.size(); ++i) {
      if (left[i] < count) continue;
      if (pick < 0 || left[i] < left[pick] ||
          (left[i] == left[pick] && tie[i] < tie[pick])) {
        pick = static_cast<int>(i);
      }
    }
    if (pick >= 0) {
      parts.emplace_back(pick, count);
      return parts;
    }
    for (size_t i = 0; i < left.size(); ++i) {
      if (pick < 0 || left[i] > left[pick] ||
          (left[i] == left[pick] && tie[i] < tie[pick])) {
        pick = static_cast<int>(i);
      }
    }
    PHALANX_CHECK(left[pick] > 0);
    parts.emplace_back(pick, left[pick]);
    count -= left[pick];
    left[pick] = 0;
  }
  return parts;
}

std::vector<std::pair<int, int64_t>> FewestNodes(
    std::vector<FewestNodesCandidate> nodes, int64_t count) {
  using Candidate = FewestNodesCandidate;
  // Taking the largest first is what makes the node count least; the
  // tie-breaks then keep domains few and whole nodes whole.
  std::sort(nodes.begin(), nodes.end(),
            [](const Candidate& a, const Candidate& b) {
              return std::tie(b.pods, b.leaf_pods, a.free, a.slot) <
                     std::tie(a.pods, a.leaf_pods, b.free, b.slot);
            });
  std::vector<std::pair<int, int64_t>> fills;
  std::set<int> leaves_used;
  for (size_t p = 0; p < nodes.size() && count > 0; ++p) {
    if (nodes[p].pods < count) {
      fills.emplace_back(nodes[p].slot, nodes[p].pods);
      leaves_used.insert(nodes[p].leaf);
      count -= nodes[p].pods;
      continue;
    }
    // The last node: of those after p that hold the fewest pods still
    // >= count (a run, as the order is by pods), the best by tie-break.
    size_t end = p;
    while (end + 1 < nodes.size() && nodes[end + 1].pods >= count) ++end;
    size_t best = end;
    for (size_t q = end; q >= p && nodes[q].pods == nodes[end].pods; --q) {
      auto key = [&](const Candidate& c) {
        return std::make_tuple(!leaves_used.contains(c.leaf), c.leaf_pods,
                               c.free, c.slot);
      };
      if (key(nodes[q]) < key(nodes[best])) best = q;
      if (q == 0) break;
    }
    fills.emplace_back(nodes[best].slot, count);
    count = 0;
  }
  PHALANX_CHECK(count == 0);
  return fills;
}

}  // namespace phalanx::core
