// GangTable: every gang record and the indexes kept in step with them — the
// pending gangs by group, the gangs holding capacity (by queue and priority
// in order of admission, and by expected end), the final gangs in
// order of finish for retention, the tombstones retention let go, the leases
// of gangs holding GPUs, and the count of gangs per (queue, state).
//
// Each stored gang has a dense handle (core/ids.h) from its first Put to
// its Erase; the hot paths read records by handle.
//
// The only writer of gang records and of those indexes: `Put` normalizes a
// record (what its placement means follows from its state) and moves it
// between indexes in one step. It knows nothing of reservations, holds or
// persistence; `Put` says what changed so the caller can tell their owners.
// Owned by the Scheduler; not thread-safe.
#ifndef PHALANX_CORE_GANG_TABLE_H_
#define PHALANX_CORE_GANG_TABLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "core/lease_table.h"
#include "core/model.h"
#include "core/pending_index.h"

namespace phalanx::core {

class GangTable {
 public:
  // The gangs of one queue holding capacity, by priority, each priority in
  // order of admission (then id; no admit time sorts last).
  using AdmissionOrder = absl::btree_set<std::pair<absl::Time, GangId>>;
  using ActiveByPriority = std::map<int, AdmissionOrder>;
  using Counts = std::map<std::pair<QueueName, GangState>, int64_t>;

  GangTable() = default;
  GangTable(const GangTable&) = delete;
  GangTable& operator=(const GangTable&) = delete;

  // What a Put did besides storing the record.
  struct PutResult {
    GangPtr gang;               // the stored record
    GangHandle handle;          // its handle
    bool left_pending = false;  // it was PENDING and is no longer
  };
  // Stores `gang` (new or replacing its record) and re-indexes it. The
  // record is normalized first: a gang holding capacity holds its
  // placement; a PENDING gang has none; a final gang keeps its last one,
  // released; only a PREEMPTING gang keeps a grace deadline, and only one
  // holding capacity a lease.
  PutResult Put(Gang gang);
  // Replaces the record of PENDING gang `current` with `updated`, which
  // differs in bookkeeping no index reads (its reason), and returns the new
  // record; null, and `updated` untouched, when `current` is not the
  // stored record.
  GangPtr ReplacePending(const GangPtr& current, Gang&& updated);
  // Forgets gang `id`, which must exist; its handle is free again.
  void Erase(const GangId& id);

  GangPtr Find(const GangId& id) const;
  // The stored gang `id`, or null; valid until the table changes (for hot
  // loops that only read, with no reference count to move).
  const Gang* Peek(const GangId& id) const;
  // The stored record of a gang known to exist.
  const GangPtr& At(const GangId& id) const { return At(handles_.at(id)); }
  // The handle of gang `id`, or kNoGang when there is no such gang.
  GangHandle HandleOf(const GangId& id) const;
  // The stored record of the gang with handle `handle`, which must be live.
  const GangPtr& At(GangHandle handle) const {
    return by_handle_[IndexOf(handle)];
  }
  // The gang with handle `handle`, or null when the handle is free or out
  // of range (kNoGang included); valid until the table changes.
  const Gang* Peek(GangHandle handle) const {
    return IndexOf(handle) < by_handle_.size()
               ? by_handle_[IndexOf(handle)].get()
               : nullptr;
  }
  // Every stored gang, as (id, record) pairs in handle order.
  class Records {
   public:
    class Iterator {
     public:
      using value_type = std::pair<const GangId&, const GangPtr&>;
      value_type operator*() const { return {(*it_)->id, *it_}; }
      Iterator& operator++();
      bool operator==(const Iterator& other) const { return it_ == other.it_; }

     private:
      friend class Records;
      using Slot = std::vector<GangPtr>::const_iterator;
      Iterator(Slot it, Slot end) : it_(it), end_(end) { SkipFree(); }
      void SkipFree() {
        while (it_ != end_ && *it_ == nullptr) ++it_;
      }
      Slot it_;
      Slot end_;
    };
    Iterator begin() const { return {by_handle_.begin(), by_handle_.end()}; }
    Iterator end() const { return {by_handle_.end(), by_handle_.end()}; }
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }

   private:
    friend class GangTable;
    Records(const std::vector<GangPtr>& by_handle, size_t size)
        : by_handle_(by_handle), size_(size) {}
    const std::vector<GangPtr>& by_handle_;
    size_t size_;
  };
  Records all() const { return Records(by_handle_, handles_.size()); }

  const PendingIndex& pending() const { return pending_; }
  PendingIndex& pending() { return pending_; }
  // The gangs of `queue` holding capacity, or null when none does.
  const ActiveByPriority* ActiveIn(const QueueName& queue) const;
  // The earliest expected end (admit time + estimate; InfiniteFuture
  // without one; InfinitePast for a gang on loan) of the gangs holding
  // capacity, InfiniteFuture when none: no reservation plan sees capacity
  // free up before it.
  absl::Time EarliestEnd() const;
  // Whether a gang holding capacity runs on loan (Gang::on_loan).
  bool AnyOnLoan() const { return EarliestEnd() == absl::InfinitePast(); }
  const Counts& counts() const { return counts_; }
  // Gangs of `queue` pending and holding capacity.
  std::pair<int, int> PendingAndActive(const QueueName& queue) const;

  LeaseTable& leases() { return leases_; }

  // Retention: the final gangs beyond `keep.finished_gangs`, or older than
  // `keep.finished_gang_age`, oldest first. Those for which
  // `still_named(gang)` holds (a live request key names them) become
  // tombstones, out of retention's count; the others are returned for the
  // caller to delete.
  std::vector<GangId> Retire(
      const RetentionConfig& keep, absl::Time now,
      const std::function<bool(const Gang&)>& still_named);
  // Whether `id` was a tombstone (and is no longer).
  bool DropTombstone(const GangId& id) { return tombstones_.erase(id) > 0; }

 private:
  void Unindex(const Gang& old);
  void Index(const Gang& gang);

  GangHandle AddHandle(const GangId& id);

  // The records by handle (null where a handle is free), the handle of
  // each stored id, and the free handles (the last freed is reused first).
  std::vector<GangPtr> by_handle_;
  absl::flat_hash_map<GangId, GangHandle> handles_;
  std::vector<GangHandle> free_handles_;
  PendingIndex pending_;
  absl::flat_hash_map<QueueName, ActiveByPriority> active_by_queue_;
  std::multiset<absl::Time> active_ends_;
  std::set<std::pair<absl::Time, GangId>> finished_;
  // Final gangs retention let go that stay while their request key is live.
  absl::btree_set<GangId> tombstones_;
  Counts counts_;
  // Leased gangs holding GPUs, kept in step with Gang::lease_expire_time.
  LeaseTable leases_;
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_GANG_TABLE_H_
