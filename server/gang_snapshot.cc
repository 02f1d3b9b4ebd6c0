#include "server/gang_snapshot.h"

#include <algorithm>
#include <utility>

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

// A treap of `put` built in O(n log n) for the sort and O(n) for the tree
// (a Cartesian tree from ids in order, with a stack of the right spine): a
// first view of 100k gangs without 100k path copies. A later gang of the
// same id wins, as in Put.
NodePtr Build(const std::vector<core::GangPtr>& put, size_t* size) {
  std::vector<core::GangPtr> sorted = put;
  const GangIdOrder less;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&](const core::GangPtr& a, const core::GangPtr& b) {
                     return less(a->id.value(), b->id.value());
                   });
  std::vector<std::shared_ptr<Node>> spine;
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i + 1 < sorted.size() &&
        !less(sorted[i]->id.value(), sorted[i + 1]->id.value())) {
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
