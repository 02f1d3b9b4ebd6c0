// The pending gangs, grouped into equivalence classes (docs/design.md §4 speed
// rules). Gangs of the same queue and priority with the same pod sets succeed
// or fail alike on the same capacity, except for backfill: a gang may use
// reserved nodes only when its estimated runtime is short enough, so within a
// group a failure with estimate E implies the failure of every member whose
// estimate is at least E (no estimate counts as infinite). The admission cycle
// caches that per group and capacity epoch, and skips a whole group in O(1)
// when even its shortest member is known to fail — a cycle costs the number
// of groups, not the number of pending gangs.
#ifndef PHALANX_CORE_PENDING_INDEX_H_
#define PHALANX_CORE_PENDING_INDEX_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "core/model.h"

namespace phalanx::core {

// A pending gang's place in line: priority (desc), submit time, sequence, id.
// `estimate` and `handle` ride along (not compared): the estimated runtime,
// or InfiniteDuration without one, and the gang's handle in its GangTable.
struct PendingKey {
  int priority = 0;
  absl::Time submit_time;
  int64_t seq = 0;
  GangId id;
  absl::Duration estimate;
  GangHandle handle = kNoGang;
  bool operator<(const PendingKey& other) const;
};

// Orders keys by submit time, sequence and id only (submit-order mode).
bool SubmitOrderLess(const PendingKey& a, const PendingKey& b);

PendingKey PendingKeyOf(const Gang& gang);

// Parses the sequence number of a gang id "g-000042" (0 if malformed).
int64_t GangSeq(const GangId& id);

struct PendingGroup {
  QueueName queue;
  std::set<PendingKey> members;
  // The members again, by estimate (pointing into `members`; equal
  // estimates in member order, so one is found in O(log n)).
  struct EstimateLess {
    bool operator()(
        const std::pair<absl::Duration, const PendingKey*>& a,
        const std::pair<absl::Duration, const PendingKey*>& b) const {
      if (a.first != b.first) return a.first < b.first;
      return *a.second < *b.second;
    }
  };
  std::set<std::pair<absl::Duration, const PendingKey*>, EstimateLess>
      by_estimate;
  // Handles of the gangs that joined since the cycle last looked at the
  // group (a handle may since name another gang: check GroupOf).
  std::vector<GangHandle> joined;
  // The cached failure: at capacity epoch `failed_epoch`, every member whose
  // estimate is >= `failed_estimate` stays pending with `reason`.
  int64_t failed_epoch = -1;
  absl::Duration failed_estimate;
  ReasonCode reason_code = ReasonCode::kNone;
  std::string reason;
  // When not empty, the cycle stamped this reason on every member it
  // stopped before reaching (members with a NO_FIT reason kept theirs),
  // except the members in `unstamped`: those that joined, or got another
  // reason, since. The next stamp with the same reason visits only them.
  std::string stamped;
  std::vector<GangHandle> unstamped;
  // When true, every member not in `unstamped` carries a NO_FIT reason,
  // which a stamp of any reason keeps: the next stamp, whatever its reason,
  // visits only `unstamped`. Set by a restart (Scheduler::Restore) for the
  // groups whose stored reasons are all NO_FIT, so the first stalled cycle
  // after it does not walk every pending gang; the next stamp clears it.
  bool keeps_any_stamp = false;
  // Notes that the member with handle `handle` joined or got a reason other
  // than `stamped`. A list longer than the group forgets the stamp (the
  // next one visits all).
  void Unstamp(GangHandle handle) {
    if (stamped.empty() && !keeps_any_stamp) return;
    if (unstamped.size() >= members.size()) {
      stamped.clear();
      keeps_any_stamp = false;
      unstamped.clear();
      return;
    }
    unstamped.push_back(handle);
  }

  // Whether a member with `estimate` is known to fail at `epoch`.
  bool KnownToFail(int64_t epoch, absl::Duration estimate) const {
    return failed_epoch == epoch && estimate >= failed_estimate;
  }
  // Whether every member is known to fail at `epoch`.
  bool AllKnownToFail(int64_t epoch) const {
    return !by_estimate.empty() &&
           KnownToFail(epoch, by_estimate.begin()->first);
  }
  // From `from` on, the first member not known to fail at `epoch`, or
  // members.end(). Costs about twice the smaller of the members passed over
  // and the members short enough to try.
  std::set<PendingKey>::const_iterator FirstNotKnownToFail(
      int64_t epoch, std::set<PendingKey>::const_iterator from) const;
  // Records that a member with `estimate` failed at `epoch`, with `code`
  // and the detail `why`.
  void RecordFailure(int64_t epoch, absl::Duration estimate, ReasonCode code,
                     const std::string& why);
};

// Not copyable: filed_ points into groups_.
class PendingIndex {
 public:
  PendingIndex() = default;
  PendingIndex(const PendingIndex&) = delete;
  PendingIndex& operator=(const PendingIndex&) = delete;
  // Files pending gang `gang`, whose handle is `handle`.
  void Insert(const Gang& gang, GangHandle handle);
  // Unfiles pending gang `gang`, whose handle is `handle`.
  void Erase(const Gang& gang, GangHandle handle);
  // The group of the pending gang with handle `handle`, or null.
  PendingGroup* GroupOf(GangHandle handle) const {
    return IndexOf(handle) < filed_.size() ? filed_[IndexOf(handle)].group
                                           : nullptr;
  }
  // Groups by key; pointers stay valid until DropEmptyGroups.
  const std::map<std::string, PendingGroup>& groups() const { return groups_; }
  std::map<std::string, PendingGroup>& groups() { return groups_; }
  size_t size() const { return size_; }
  // Forgets groups without members (not while a cycle walks them).
  void DropEmptyGroups();

 private:
  // Where a pending gang is filed: its group (null when the handle is not
  // filed), and its entries there (set iterators stay valid until their
  // own element is erased), so Erase needs no search.
  struct Filed {
    PendingGroup* group = nullptr;
    std::set<PendingKey>::iterator member;
    decltype(PendingGroup::by_estimate)::iterator by_estimate;
  };
  std::map<std::string, PendingGroup> groups_;
  std::vector<Filed> filed_;  // by handle
  size_t size_ = 0;
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_PENDING_INDEX_H_
