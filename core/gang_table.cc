#include "core/gang_table.h"

#include "core/check.h"

namespace phalanx::core {
namespace {

// When a gang holding capacity is expected to end, unclamped:
// InfiniteFuture without an estimate (ExpectedEnd clamps it to now).
absl::Time RunningUntil(const Gang& gang) {
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
  if (gang.state != GangState::kPreempting) gang.grace_deadline.reset();
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
    active_.insert(gang.id);
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
  bool held = false;
  bool leased = false;
  auto it = gangs_.find(gang.id);
  if (it != gangs_.end()) {
    const Gang& old = *it->second;
    was_pending = old.state == GangState::kPending;
    held = HoldsCapacity(old.state);
    leased = old.lease_expire_time.has_value();
    if (was_pending && gang.state != GangState::kPending) {
      pending_.Erase(old);
      result.left_pending = true;
    }
    Unindex(old);
  }
  if (gang.state == GangState::kPending && !was_pending) pending_.Insert(gang);
  if (held && !HoldsCapacity(gang.state)) active_.erase(gang.id);
  if (gang.lease_expire_time) {
    leases_.Set(gang.id, *gang.lease_expire_time);
  } else if (leased) {
    leases_.Erase(gang.id);
  }
  Index(gang);
  auto ptr = std::make_shared<const Gang>(std::move(gang));
  // Nothing above adds or removes a gang record: `it` still stands.
  if (it != gangs_.end()) {
    it->second = ptr;
  } else {
    gangs_.emplace(ptr->id, ptr);
  }
  result.gang = std::move(ptr);
  return result;
}

GangPtr GangTable::ReplacePending(const GangPtr& current, Gang&& updated) {
  auto it = gangs_.find(current->id);
  if (it == gangs_.end() || it->second != current) return nullptr;
  it->second = std::make_shared<const Gang>(std::move(updated));
  return it->second;
}

void GangTable::Erase(const GangId& id) {
  auto it = gangs_.find(id);
  PHALANX_CHECK(it != gangs_.end());
  --counts_[{it->second->spec.queue, it->second->state}];
  gangs_.erase(it);
}

GangPtr GangTable::Find(const GangId& id) const {
  auto it = gangs_.find(id);
  return it == gangs_.end() ? nullptr : it->second;
}

const Gang* GangTable::Peek(const GangId& id) const {
  auto it = gangs_.find(id);
  return it == gangs_.end() ? nullptr : it->second.get();
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
    if (still_named(*gangs_.at(id))) {
      tombstones_.insert(id);
      continue;
    }
    retired.push_back(id);
  }
  return retired;
}

}  // namespace phalanx::core
