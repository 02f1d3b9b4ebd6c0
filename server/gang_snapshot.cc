#include "server/gang_snapshot.h"

#include <algorithm>

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

GangSnapshot::GangSnapshot() {
  auto empty = std::make_shared<const Shard>();
  shards_.fill(empty);
}

int GangSnapshot::ShardOf(const std::string& id) {
  return static_cast<int>(absl::HashOf(id) % kShards);
}

GangSnapshot GangSnapshot::Apply(
    const std::vector<core::GangPtr>& put,
    const std::vector<core::GangId>& deleted) const {
  GangSnapshot next = *this;
  std::array<std::shared_ptr<Shard>, kShards> copies;
  auto writable = [&](int shard) -> Shard& {
    if (!copies[shard]) {
      copies[shard] = std::make_shared<Shard>(*shards_[shard]);
    }
    return *copies[shard];
  };
  for (const core::GangPtr& gang : put) {
    Shard& shard = writable(ShardOf(gang->id.value()));
    if (shard.insert_or_assign(gang->id.value(), gang).second) ++next.size_;
  }
  for (const core::GangId& id : deleted) {
    next.size_ -= writable(ShardOf(id.value())).erase(id.value());
  }
  for (int i = 0; i < kShards; ++i) {
    if (copies[i]) next.shards_[i] = std::move(copies[i]);
  }
  return next;
}

core::GangPtr GangSnapshot::Find(const core::GangId& id) const {
  const Shard& shard = *shards_[ShardOf(id.value())];
  auto it = shard.find(id.value());
  return it == shard.end() ? nullptr : it->second;
}

std::vector<core::GangPtr> GangSnapshot::List(
    const std::string& after, int limit,
    const std::function<bool(const core::Gang&)>& keep) const {
  // Each shard contributes its first `limit` matches; the overall first
  // `limit` are among them.
  std::vector<core::GangPtr> out;
  for (const auto& shard : shards_) {
    int taken = 0;
    for (auto it = shard->upper_bound(after);
         it != shard->end() && taken < limit; ++it) {
      if (keep(*it->second)) {
        out.push_back(it->second);
        ++taken;
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [](const core::GangPtr& a, const core::GangPtr& b) {
              return GangIdOrder()(a->id.value(), b->id.value());
            });
  if (static_cast<int>(out.size()) > limit) out.resize(limit);
  return out;
}

}  // namespace phalanx::server
