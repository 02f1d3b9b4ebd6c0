// CycleOrder: the order in which an admission cycle offers pending gangs.
// Per bucket (a queue; one bucket for all in submit order) the heads of its
// pending groups are merged; queues are ranked by (-priority, fair-share
// score) — or score first below a priority tier — then submit time and id.
// A queue is re-scored after each of its gangs is offered, so one team's
// burst cannot take the whole cycle. With AdmissionConfig::aging_per_hour a
// head ranks as if its priority were higher by the levels its wait earned;
// with fair_share_size_credit its queue's score is lowered by the credit ×
// the head's GPUs; with fair_share_wait_bound a head pending longer than
// the bound ranks ahead of every head of its tier still within it, by
// submit time, its score ignored. Members the cycle knows to fail are
// passed over without being looked at, a whole group at a time.
//
// A view over the gang table and quota book for one cycle: valid while
// neither changes what it reads except through the gangs it offers. Not
// thread-safe.
#ifndef PHALANX_CORE_CYCLE_ORDER_H_
#define PHALANX_CORE_CYCLE_ORDER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "core/fair_share.h"
#include "core/gang_table.h"
#include "core/model.h"
#include "core/pending_index.h"
#include "core/quota_book.h"

namespace phalanx::core {

class CycleOrder {
 public:
  // `could_reserve`: whether a gang known to fail must still be offered
  // (it may make a reservation); null: offer every gang.
  using CouldReserve = std::function<bool(const PendingKey&)>;

  // `now`: the cycle's time, for aging and the wait bound (InfinitePast:
  // neither).
  CycleOrder(const GangTable& gangs, const QuotaBook& quotas,
             const AdmissionConfig& admission, const int64_t& epoch,
             CouldReserve could_reserve, absl::Time now);

  struct Offer {
    GangPtr gang;
    PendingGroup* group = nullptr;
    absl::Duration estimate;
  };
  // The next gang, or an empty offer when every pending gang has been
  // offered or passed over.
  Offer Next();
  // Called after each offered gang: puts its group back in line (unless
  // `drop_group`: nothing more of it this cycle) and re-scores its queue.
  void Advance(bool drop_group);

 private:
  // Where a queue's head stands among all queues' heads.
  struct HeadKey {
    int64_t before_score;
    bool within_bound;  // false (past the wait bound) goes first
    FairShareScore score;
    int64_t after_score;
    absl::Time submit_time;
    int64_t seq;
    QueueName queue;
    bool operator<(const HeadKey& o) const;
  };
  struct Cursor {
    const PendingGroup* group;
    std::set<PendingKey>::const_iterator it;
  };
  struct CursorLess {
    bool submit_order;
    bool operator()(const Cursor* a, const Cursor* b) const;
  };
  using Bucket = std::set<Cursor*, CursorLess>;

  QueueName BucketOf(const PendingGroup& group) const;
  // Moves the cursor past members known to fail; whether it moved.
  bool PassOverKnownFailures(Cursor& cursor) const;
  void PushHead(const QueueName& name);
  // The priority levels `key` earned by waiting until now_ (aging).
  int AgingLevels(const PendingKey& key) const;
  // Whether `key` has been pending longer than the fair-share wait bound
  // at now_.
  bool PastWaitBound(const PendingKey& key) const;

  const GangTable& gangs_;
  const QuotaBook& quotas_;
  const AdmissionConfig& admission_;
  // The scheduler's capacity epoch, read live: admissions may move it.
  const int64_t& epoch_;
  const bool submit_order_;
  CouldReserve could_reserve_;
  const absl::Time now_;
  std::vector<Cursor> cursors_;
  std::map<QueueName, Bucket> buckets_;
  std::set<HeadKey> heads_;
  std::pair<QueueName, Cursor*> last_;
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_CYCLE_ORDER_H_
