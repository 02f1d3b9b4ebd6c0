#include "server/gang_snapshot.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/ascii.h"

namespace phalanx::server {
namespace {

// `id` split into the text before its trailing digits and those digits
// without leading zeros.
std::pair<absl::string_view, absl::string_view> SplitNumber(
    absl::string_view id) {
  size_t digits = id.size();
  while (digits > 0 && absl::ascii_isdigit(id[digits - 1])) --digits;
  absl::string_view number = id.substr(digits);
  while (number.size() > 1 && number.front() == '0') number.remove_prefix(1);
  return {id.substr(0, digits), number};
}

}  // namespace

bool GangIdOrder::operator()(absl::string_view a, absl::string_view b) const {
  const auto [a_text, a_number] = SplitNumber(a);
  const auto [b_text, b_number] = SplitNumber(b);
  if (a_text != b_text) return a_text < b_text;
  if (a_number.size() != b_number.size()) {
    return a_number.size() < b_number.size();
  }
  if (a_number != b_number) return a_number < b_number;
  return a < b;
}

// A treap node: ordered by its gang's id (GangIdOrder), a max-heap on
// `priority`, a hash of the id (so the shape depends only on the set of
// ids, not on the order they came in). Immutable once shared.
struct GangSnapshot::Node {
  core::GangPtr gang;
  uint64_t priority = 0;
  NodePtr left, right;

  const std::string& id() const { return gang->id.value(); }
};

namespace {

using Node = GangSnapshot::Node;
using NodePtr = GangSnapshot::NodePtr;

uint64_t PriorityOf(const std::string& id) { return absl::HashOf(id); }

NodePtr Make(core::GangPtr gang, uint64_t priority, NodePtr left,
             NodePtr right) {
  auto node = std::make_shared<Node>();
  node->gang = std::move(gang);
  node->priority = priority;
  node->left = std::move(left);
  node->right = std::move(right);
  return node;
}

NodePtr WithChildren(const Node& node, NodePtr left, NodePtr right) {
  return Make(node.gang, node.priority, std::move(left), std::move(right));
}

// Splits `t` into the ids before `id` and those after it (an equal id is
// dropped: the caller replaces or removes it).
std::pair<NodePtr, NodePtr> Split(const NodePtr& t, const std::string& id) {
  if (t == nullptr) return {nullptr, nullptr};
  const GangIdOrder less;
  if (less(t->id(), id)) {
    auto [l, r] = Split(t->right, id);
    return {WithChildren(*t, t->left, std::move(l)), std::move(r)};
  }
  if (less(id, t->id())) {
    auto [l, r] = Split(t->left, id);
    return {std::move(l), WithChildren(*t, std::move(r), t->right)};
  }
  return {t->left, t->right};
}

// Joins two treaps whose ids are all before (`a`) and after (`b`).
NodePtr Merge(const NodePtr& a, const NodePtr& b) {
  if (a == nullptr) return b;
  if (b == nullptr) return a;
  if (a->priority >= b->priority) {
    return WithChildren(*a, a->left, Merge(a->right, b));
  }
  return WithChildren(*b, Merge(a, b->left), b->right);
}

const Node* FindNode(const NodePtr& root, absl::string_view id) {
  const GangIdOrder less;
  const Node* t = root.get();
  while (t != nullptr) {
    if (less(id, t->id())) {
      t = t->left.get();
    } else if (less(t->id(), id)) {
      t = t->right.get();
    } else {
      return t;
    }
  }
  return nullptr;
}

// `t` with `gang` stored (replacing a gang of the same id); `*added` tells
// whether the id is new.
NodePtr Put(const NodePtr& t, core::GangPtr gang, uint64_t priority,
            bool* added) {
  const std::string& id = gang->id.value();
  if (t == nullptr || priority > t->priority) {
    // The new node goes here. Its id cannot be below: every node under `t`
    // has a priority <= t's < this id's (a heap on priority).
    *added = true;
    auto [l, r] = Split(t, id);
    return Make(std::move(gang), priority, std::move(l), std::move(r));
  }
  const GangIdOrder less;
  if (less(id, t->id())) {
    return WithChildren(*t, Put(t->left, std::move(gang), priority, added),
                        t->right);
  }
  if (less(t->id(), id)) {
    return WithChildren(*t, t->left,
                        Put(t->right, std::move(gang), priority, added));
  }
  *added = false;  // same id, same priority: replace in place
  return Make(std::move(gang), priority, t->left, t->right);
}

// `t` without `id`; `*removed` tells whether it was there.
NodePtr Erase(const NodePtr& t, const std::string& id, bool* removed) {
  if (t == nullptr) return nullptr;
  const GangIdOrder less;
  if (less(id, t->id())) {
    NodePtr left = Erase(t->left, id, removed);
    return *removed ? WithChildren(*t, std::move(left), t->right) : t;
  }
  if (less(t->id(), id)) {
    NodePtr right = Erase(t->right, id, removed);
    return *removed ? WithChildren(*t, t->left, std::move(right)) : t;
  }
  *removed = true;
  return Merge(t->left, t->right);
}

// A gang id's sort key for Build: what GangIdOrder compares, taken apart
// once so the sort mostly compares integers. `text` packs the first 8 bytes
// of the text before the trailing digits (big-endian, zero-padded); `value`
// is the digits' value when there are at most 19 of them.
struct SortKey {
  uint64_t text = 0;
  uint64_t value = 0;
  uint32_t text_size = 0;
  bool small = false;
  uint32_t index = 0;
};

SortKey KeyOf(absl::string_view id, uint32_t index) {
  const auto [text, number] = SplitNumber(id);
  SortKey key;
  key.index = index;
  key.text_size = static_cast<uint32_t>(text.size());
  for (size_t i = 0; i < 8; ++i) {
    const uint8_t byte = i < text.size() ? static_cast<uint8_t>(text[i]) : 0;
    key.text = (key.text << 8) | byte;
  }
  key.small = number.size() <= 19;
  for (size_t i = 0; key.small && i < number.size(); ++i) {
    key.value = key.value * 10 + static_cast<uint64_t>(number[i] - '0');
  }
  return key;
}

// GangIdOrder on the ids of `put`, then input order (so a sort by it is
// stable). Texts whose packed bytes differ are ordered by them; equal
// short texts by the digits' value; anything else by GangIdOrder itself.
bool KeyLess(const std::vector<core::GangPtr>& put, const SortKey& a,
             const SortKey& b) {
  if (a.text != b.text) return a.text < b.text;
  if (a.text_size == b.text_size && a.text_size <= 8 && a.small && b.small &&
      a.value != b.value) {
    return a.value < b.value;
  }
  const GangIdOrder less;
  const std::string& a_id = put[a.index]->id.value();
  const std::string& b_id = put[b.index]->id.value();
  if (less(a_id, b_id)) return true;
  if (less(b_id, a_id)) return false;
  return a.index < b.index;
}

// `put` in GangIdOrder, equal ids in input order (as a stable sort). The
// sort runs on keys of 32 bytes, not on the gangs: a first view of 1M
// gangs spent 28 % of a restart's CPU in a stable_sort of GangPtrs whose
// every comparison parsed two ids (bench/results/scale.md).
std::vector<core::GangPtr> SortedById(const std::vector<core::GangPtr>& put) {
  std::vector<SortKey> keys;
  keys.reserve(put.size());
  for (size_t i = 0; i < put.size(); ++i) {
    keys.push_back(KeyOf(put[i]->id.value(), static_cast<uint32_t>(i)));
  }
  auto less = [&](const SortKey& a, const SortKey& b) {
    return KeyLess(put, a, b);
  };
  if (!std::is_sorted(keys.begin(), keys.end(), less)) {
    std::sort(keys.begin(), keys.end(), less);
  }
  std::vector<core::GangPtr> sorted;
  sorted.reserve(put.size());
  for (const SortKey& key : keys) sorted.push_back(put[key.index]);
  return sorted;
}

// A treap of `put` built in O(n log n) for the sort and O(n) for the tree
// (a Cartesian tree from ids in order, with a stack of the right spine): a
// first view of 100k gangs without 100k path copies. A later gang of the
// same id wins, as in Put.
NodePtr Build(const std::vector<core::GangPtr>& put, size_t* size) {
  const std::vector<core::GangPtr> sorted = SortedById(put);
  std::vector<std::shared_ptr<Node>> spine;
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i + 1 < sorted.size() &&
        sorted[i]->id.value() == sorted[i + 1]->id.value()) {
      continue;  // the same id again next: the later one wins
    }
    auto node = std::make_shared<Node>();
    node->gang = sorted[i];
    node->priority = PriorityOf(node->id());
    std::shared_ptr<Node> last;
    while (!spine.empty() && spine.back()->priority < node->priority) {
      last = std::move(spine.back());
      spine.pop_back();
    }
    node->left = std::move(last);
    if (!spine.empty()) spine.back()->right = node;
    spine.push_back(std::move(node));
    ++*size;
  }
  return spine.empty() ? nullptr : NodePtr(spine.front());
}

}  // namespace

GangSnapshot GangSnapshot::Apply(
    const std::vector<core::GangPtr>& put,
    const std::vector<core::GangId>& deleted) const {
  GangSnapshot next = *this;
  const bool fresh = root_ == nullptr && put.size() > 1;
  if (fresh) {
    next.root_ = Build(put, &next.size_);
  } else {
    for (const core::GangPtr& gang : put) {
      bool added = false;
      const uint64_t priority = PriorityOf(gang->id.value());
      next.root_ = Put(next.root_, gang, priority, &added);
      if (added) ++next.size_;
    }
  }
  for (const core::GangId& id : deleted) {
    bool removed = false;
    next.root_ = Erase(next.root_, id.value(), &removed);
    if (removed) --next.size_;
  }
  return next;
}

core::GangPtr GangSnapshot::Find(const core::GangId& id) const {
  const Node* node = FindNode(root_, id.value());
  return node == nullptr ? nullptr : node->gang;
}

std::vector<core::GangPtr> GangSnapshot::List(
    const std::string& after, int limit,
    const std::function<bool(const core::Gang&)>& keep) const {
  // In-order from the first id after `after`: the stack holds the nodes
  // still to visit whose left side is done.
  const GangIdOrder less;
  std::vector<const Node*> stack;
  for (const Node* t = root_.get(); t != nullptr;) {
    if (less(after, t->id())) {
      stack.push_back(t);
      t = t->left.get();
    } else {
      t = t->right.get();
    }
  }
  std::vector<core::GangPtr> out;
  while (!stack.empty() && static_cast<int>(out.size()) < limit) {
    const Node* t = stack.back();
    stack.pop_back();
    if (keep(*t->gang)) out.push_back(t->gang);
    for (const Node* c = t->right.get(); c != nullptr; c = c->left.get()) {
      stack.push_back(c);
    }
  }
  return out;
}

}  // namespace phalanx::server
