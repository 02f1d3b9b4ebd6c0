#include "core/cycle_order.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

namespace phalanx::core {

bool CycleOrder::HeadKey::operator<(const HeadKey& o) const {
  return std::tie(before_score, within_bound, score, after_score, submit_time,
                  seq, queue) < std::tie(o.before_score, o.within_bound,
                                         o.score, o.after_score, o.submit_time,
                                         o.seq, o.queue);
}

bool CycleOrder::CursorLess::operator()(const Cursor* a,
                                        const Cursor* b) const {
  if (submit_order) return SubmitOrderLess(*a->it, *b->it);
  return *a->it < *b->it;
}

CycleOrder::CycleOrder(const GangTable& gangs, const QuotaBook& quotas,
                       const AdmissionConfig& admission, const int64_t& epoch,
                       CouldReserve could_reserve, absl::Time now)
    : gangs_(gangs),
      quotas_(quotas),
      admission_(admission),
      epoch_(epoch),
      submit_order_(admission.ordering == Ordering::kSubmitOrder),
      could_reserve_(std::move(could_reserve)),
      now_(now) {
  const auto& groups = gangs.pending().groups();
  cursors_.reserve(groups.size());
  for (const auto& [key, group] : groups) {
    if (group.members.empty()) continue;
    cursors_.push_back({&group, group.members.begin()});
    auto [bucket, added] =
        buckets_.try_emplace(BucketOf(group), CursorLess{submit_order_});
    bucket->second.insert(&cursors_.back());
  }
  for (const auto& [name, bucket] : buckets_) PushHead(name);
}

CycleOrder::Offer CycleOrder::Next() {
  while (!heads_.empty()) {
    const QueueName name = heads_.begin()->queue;
    heads_.erase(heads_.begin());
    Bucket& bucket = buckets_.at(name);
    Cursor* cursor = *bucket.begin();
    bucket.erase(bucket.begin());
    if (PassOverKnownFailures(*cursor)) {
      if (cursor->it != cursor->group->members.end()) bucket.insert(cursor);
      PushHead(name);
      continue;
    }
    last_ = {name, cursor};
    const PendingKey& key = *cursor->it++;
    return Offer{gangs_.At(key.handle),
                 const_cast<PendingGroup*>(cursor->group), key.estimate};
  }
  return Offer{};
}

void CycleOrder::Advance(bool drop_group) {
  auto [name, cursor] = last_;
  if (!drop_group && cursor->it != cursor->group->members.end()) {
    buckets_.at(name).insert(cursor);
  }
  PushHead(name);
}

QueueName CycleOrder::BucketOf(const PendingGroup& group) const {
  return submit_order_ ? QueueName() : group.queue;
}

// The oldest member left may still reserve: then nothing is passed over (the
// younger ones of the group can reserve only if it can).
bool CycleOrder::PassOverKnownFailures(Cursor& cursor) const {
  if (!could_reserve_ || could_reserve_(*cursor.it)) return false;
  const auto start = cursor.it;
  cursor.it = cursor.group->FirstNotKnownToFail(epoch_, start);
  return cursor.it != start;
}

void CycleOrder::PushHead(const QueueName& name) {
  const Bucket& bucket = buckets_.at(name);
  if (bucket.empty()) return;
  const PendingKey& key = *(*bucket.begin())->it;
  if (submit_order_) {
    heads_.insert(HeadKey{0, false, {}, 0, key.submit_time, key.seq, name});
    return;
  }
  // Aged in 64 bits and held to int: a priority near the top saturates.
  const int64_t aged = int64_t{key.priority} + AgingLevels(key);
  const auto [before, after] =
      TierKeys(admission_, static_cast<int>(std::min<int64_t>(
                               aged, std::numeric_limits<int>::max())));
  // Past the wait bound the score no longer counts: submit time decides.
  const bool within_bound = !PastWaitBound(key);
  FairShareScore score;
  if (within_bound) score = quotas_.Score(name);
  if (within_bound && admission_.fair_share_size_credit > 0) {
    const GangPtr head = gangs_.At(key.handle);
    score.value -= admission_.fair_share_size_credit *
                   static_cast<double>(head->spec.TotalGpus());
  }
  heads_.insert(HeadKey{before, within_bound, score, after, key.submit_time,
                        key.seq, name});
}

bool CycleOrder::PastWaitBound(const PendingKey& key) const {
  const absl::Duration bound = admission_.fair_share_wait_bound;
  if (bound == absl::InfiniteDuration() || now_ == absl::InfinitePast()) {
    return false;
  }
  return now_ - key.submit_time > bound;
}

int CycleOrder::AgingLevels(const PendingKey& key) const {
  if (admission_.aging_per_hour <= 0 || now_ == absl::InfinitePast() ||
      now_ <= key.submit_time) {
    return 0;
  }
  const double levels =
      absl::ToDoubleHours(now_ - key.submit_time) * admission_.aging_per_hour;
  return static_cast<int>(
      std::min<double>(std::floor(levels), admission_.aging_max_levels));
}

}  // namespace phalanx::core
