// GangTable: every gang record and the indexes kept in step with them — the
// pending gangs by group, the gangs holding capacity (by id, by queue and
// priority in order of admission, by expected end), the final gangs in
// order of finish for retention, the tombstones retention let go, the leases
// of gangs holding GPUs, and the count of gangs per (queue, state).
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
  // Forgets gang `id`, which must exist.
  void Erase(const GangId& id);

  GangPtr Find(const GangId& id) const;
  // The stored gang `id`, or null; valid until the table changes (for hot
  // loops that only read, with no reference count to move).
  const Gang* Peek(const GangId& id) const;
  // The stored record of a gang known to exist.
  const GangPtr& At(const GangId& id) const { return gangs_.at(id); }
  const absl::flat_hash_map<GangId, GangPtr>& all() const { return gangs_; }

  const PendingIndex& pending() const { return pending_; }
  PendingIndex& pending() { return pending_; }
  // Gangs holding capacity, sorted by id.
  const absl::btree_set<GangId>& active() const { return active_; }
  // The gangs of `queue` holding capacity, or null when none does.
  const ActiveByPriority* ActiveIn(const QueueName& queue) const;
  // The earliest expected end (admit time + estimate; InfiniteFuture
  // without one) of the gangs holding capacity, InfiniteFuture when none:
  // no capacity frees up on its own before it.
  absl::Time EarliestEnd() const;
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

  absl::flat_hash_map<GangId, GangPtr> gangs_;
  PendingIndex pending_;
  absl::btree_set<GangId> active_;
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
