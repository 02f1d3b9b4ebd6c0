#include "core/gang_table.h"

#include "core/check.h"

namespace phalanx::core {
namespace {

// When a gang holding capacity is expected to free it, unclamped:
// InfiniteFuture without an estimate (ExpectedEnd clamps it to now), and
// InfinitePast on loan (a reservation may take it back now:
// core/reservation.h ReleaseTime).
absl::Time RunningUntil(const Gang& gang) {
  if (gang.on_loan) return absl::InfinitePast();
  if (gang.spec.estimated_runtime <= absl::ZeroDuration() || !gang.admit_time) {
    return absl::InfiniteFuture();
  }
  return *gang.admit_time + gang.spec.estimated_runtime;
}

absl::Time FinishTime(const Gang& gang) {
  return gang.finish_time.value_or(gang.submit_time);
}

// A gang's key in active_by_queue_.
std::pair<absl::Time, GangId> ActiveKey(const Gang& gang) {
  return {gang.admit_time.value_or(absl::InfiniteFuture()), gang.id};
}

// What the placement means follows from the state: held while the gang
// holds capacity; none while pending; the last one, released, once final.
// Only a PREEMPTING gang has a grace deadline, and only one holding
// capacity a lease.
void Normalize(Gang& gang) {
  if (HoldsCapacity(gang.state)) {
    gang.placement_released = false;
  } else if (gang.state == GangState::kPending) {
    gang.placement.clear();
    gang.placement_released = false;
  } else {
    gang.placement_released = !gang.placement.empty();
  }
  if (gang.state != GangState::kPreempting) {
    gang.grace_deadline.reset();
    gang.shrink_to = 0;
  }
  if (!HoldsCapacity(gang.state)) gang.lease_expire_time.reset();
}

}  // namespace

// Takes an old record out of the indexes a new one of another state would
// not share (a pending gang that stays pending keeps its place in line).
void GangTable::Unindex(const Gang& old) {
  if (HoldsCapacity(old.state)) {
    active_ends_.erase(active_ends_.find(RunningUntil(old)));
    auto queue = active_by_queue_.find(old.spec.queue);
    auto level = queue->second.find(old.spec.priority);
    level->second.erase(ActiveKey(old));
    if (level->second.empty()) queue->second.erase(level);
    if (queue->second.empty()) active_by_queue_.erase(queue);
  }
  if (IsFinal(old.state)) finished_.erase({FinishTime(old), old.id});
  --counts_[{old.spec.queue, old.state}];
}

void GangTable::Index(const Gang& gang) {
  if (HoldsCapacity(gang.state)) {
    active_ends_.insert(RunningUntil(gang));
    active_by_queue_[gang.spec.queue][gang.spec.priority].insert(
        ActiveKey(gang));
  }
  if (IsFinal(gang.state)) {
    finished_.insert({FinishTime(gang), gang.id});
    tombstones_.erase(gang.id);  // back under retention
  }
  ++counts_[{gang.spec.queue, gang.state}];
}

GangTable::PutResult GangTable::Put(Gang gang) {
  Normalize(gang);
  PutResult result;
  // What the indexes hold for the gang follows from its stored record: no
  // lookup is made for an entry that cannot be there.
  bool was_pending = false;
  bool leased = false;
  auto it = handles_.find(gang.id);
  const bool known = it != handles_.end();
  const GangHandle handle = known ? it->second : AddHandle(gang.id);
  if (known) {
    const Gang& old = *At(handle);
    was_pending = old.state == GangState::kPending;
    leased = old.lease_expire_time.has_value();
    if (was_pending && gang.state != GangState::kPending) {
      pending_.Erase(old, handle);
      result.left_pending = true;
    }
    Unindex(old);
  }
  if (gang.state == GangState::kPending && !was_pending) {
    pending_.Insert(gang, handle);
  }
  if (gang.lease_expire_time) {
    leases_.Set(gang.id, *gang.lease_expire_time);
  } else if (leased) {
    leases_.Erase(gang.id);
  }
  Index(gang);
  result.gang = std::make_shared<const Gang>(std::move(gang));
  result.handle = handle;
  by_handle_[IndexOf(handle)] = result.gang;
  return result;
}

GangHandle GangTable::AddHandle(const GangId& id) {
  GangHandle handle;
  if (!free_handles_.empty()) {
    handle = free_handles_.back();
    free_handles_.pop_back();
  } else {
    handle = static_cast<GangHandle>(by_handle_.size());
    by_handle_.emplace_back();
  }
  handles_.emplace(id, handle);
  return handle;
}

GangHandle GangTable::HandleOf(const GangId& id) const {
  auto it = handles_.find(id);
  return it == handles_.end() ? kNoGang : it->second;
}

GangPtr GangTable::ReplacePending(const GangPtr& current, Gang&& updated) {
  auto it = handles_.find(current->id);
  if (it == handles_.end()) return nullptr;
  GangPtr& stored = by_handle_[IndexOf(it->second)];
  if (stored != current) return nullptr;
  stored = std::make_shared<const Gang>(std::move(updated));
  return stored;
}

void GangTable::Erase(const GangId& id) {
  auto it = handles_.find(id);
  PHALANX_CHECK(it != handles_.end());
  GangPtr& stored = by_handle_[IndexOf(it->second)];
  --counts_[{stored->spec.queue, stored->state}];
  stored = nullptr;
  free_handles_.push_back(it->second);
  handles_.erase(it);
}

GangPtr GangTable::Find(const GangId& id) const {
  auto it = handles_.find(id);
  return it == handles_.end() ? nullptr : At(it->second);
}

const Gang* GangTable::Peek(const GangId& id) const {
  auto it = handles_.find(id);
  return it == handles_.end() ? nullptr : At(it->second).get();
}

GangTable::Records::Iterator& GangTable::Records::Iterator::operator++() {
  ++it_;
  SkipFree();
  return *this;
}

const GangTable::ActiveByPriority* GangTable::ActiveIn(
    const QueueName& queue) const {
  auto it = active_by_queue_.find(queue);
  return it == active_by_queue_.end() ? nullptr : &it->second;
}

absl::Time GangTable::EarliestEnd() const {
  return active_ends_.empty() ? absl::InfiniteFuture() : *active_ends_.begin();
}

std::pair<int, int> GangTable::PendingAndActive(const QueueName& queue) const {
  int pending = 0;
  int active = 0;
  for (auto it = counts_.lower_bound({queue, GangState::kPending});
       it != counts_.end() && it->first.first == queue; ++it) {
    if (it->first.second == GangState::kPending) pending += it->second;
    if (HoldsCapacity(it->first.second)) active += it->second;
  }
  return {pending, active};
}

std::vector<GangId> GangTable::Retire(
    const RetentionConfig& keep, absl::Time now,
    const std::function<bool(const Gang&)>& still_named) {
  std::vector<GangId> retired;
  while (!finished_.empty() &&
         (static_cast<int64_t>(finished_.size()) > keep.finished_gangs ||
          finished_.begin()->first + keep.finished_gang_age <= now)) {
    const GangId id = finished_.begin()->second;
    finished_.erase(finished_.begin());
    if (still_named(*At(id))) {
      tombstones_.insert(id);
      continue;
    }
    retired.push_back(id);
  }
  return retired;
}

}  // namespace phalanx::core
