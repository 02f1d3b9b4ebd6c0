#include "core/pending_index.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/check.h"
#include "core/placement.h"

namespace phalanx::core {
namespace {

// queue|priority|placement shape: the equivalence class of a gang.
std::string GroupKey(const GangSpec& spec) {
  return absl::StrCat(spec.queue.value(), "|", spec.priority, "|",
                      PlacementShapeKey(spec));
}

}  // namespace

bool PendingKey::operator<(const PendingKey& other) const {
  return std::tie(other.priority, submit_time, seq, id) <
         std::tie(priority, other.submit_time, other.seq, other.id);
}

bool SubmitOrderLess(const PendingKey& a, const PendingKey& b) {
  return std::tie(a.submit_time, a.seq, a.id) <
         std::tie(b.submit_time, b.seq, b.id);
}

int64_t GangSeq(const GangId& id) {
  int64_t seq = 0;
  absl::string_view value = id.value();
  if (value.size() < 3 || !absl::SimpleAtoi(value.substr(2), &seq)) return 0;
  return seq;
}

PendingKey PendingKeyOf(const Gang& gang) {
  const absl::Duration estimate = gang.spec.estimated_runtime;
  return PendingKey{
      gang.spec.priority, gang.submit_time, GangSeq(gang.id), gang.id,
      estimate > absl::ZeroDuration() ? estimate : absl::InfiniteDuration()};
}

std::set<PendingKey>::const_iterator PendingGroup::FirstNotKnownToFail(
    int64_t epoch, std::set<PendingKey>::const_iterator from) const {
  if (failed_epoch != epoch) return from;
  // Walk the members in order and, in step, the members short enough to
  // try; whichever walk ends first gives the answer.
  const absl::Duration limit = failed_estimate;
  auto short_enough = by_estimate.begin();
  const PendingKey* earliest = nullptr;  // among the short ones, >= *from
  for (auto it = from; it != members.end(); ++it) {
    if (it->estimate < limit) return it;
    if (short_enough == by_estimate.end() || short_enough->first >= limit) {
      return earliest ? members.find(*earliest) : members.end();
    }
    const PendingKey* key = short_enough->second;
    if (!(*key < *from) && (earliest == nullptr || *key < *earliest)) {
      earliest = key;
    }
    ++short_enough;
  }
  return members.end();
}

void PendingGroup::RecordFailure(int64_t epoch, absl::Duration estimate,
                                 ReasonCode code, const std::string& why) {
  if (failed_epoch != epoch || estimate < failed_estimate) {
    failed_epoch = epoch;
    failed_estimate = estimate;
    reason_code = code;
    reason = why;
  }
}

void PendingIndex::Insert(const Gang& gang, GangHandle handle) {
  const size_t index = IndexOf(handle);
  if (index >= filed_.size()) filed_.resize(index + 1);
  PHALANX_CHECK(filed_[index].group == nullptr);
  const std::string key = GroupKey(gang.spec);
  PendingGroup& group = groups_[key];
  group.queue = gang.spec.queue;
  PendingKey pending = PendingKeyOf(gang);
  pending.handle = handle;
  // A new gang mostly sorts last in its group (the latest submit): the
  // hint makes that insertion constant time.
  auto member = group.members.insert(group.members.end(), pending);
  auto by_estimate = group.by_estimate.emplace_hint(group.by_estimate.end(),
                                                    pending.estimate, &*member);
  group.joined.push_back(handle);
  group.Unstamp(handle);
  filed_[index] = Filed{&group, member, by_estimate};
  ++size_;
}

void PendingIndex::Erase(const Gang& gang, GangHandle handle) {
  PHALANX_CHECK(GroupOf(handle) != nullptr);
  Filed& filed = filed_[IndexOf(handle)];
  // The stored entries are the gang's own (its key cannot change while
  // it is pending: Put files a pending gang only when it becomes pending).
  PHALANX_CHECK(filed.by_estimate->second == &*filed.member &&
                filed.member->id == gang.id);
  filed.group->by_estimate.erase(filed.by_estimate);
  filed.group->members.erase(filed.member);
  filed = Filed{};
  --size_;
}

void PendingIndex::DropEmptyGroups() {
  std::erase_if(groups_,
                [](const auto& entry) { return entry.second.members.empty(); });
}

}  // namespace phalanx::core
