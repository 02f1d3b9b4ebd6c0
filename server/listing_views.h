// ListingViews: the read views pinned by multi-page ListGangs listings, so
// every page of one listing is read at its first page's revision. A first
// page that has more to come pins its view under its revision; later pages
// find it there. Views are dropped 60 s after their last use, and at most
// kMaxPinned are kept (the least recently used goes first): a view shares
// unchanged gangs with the live one, but one pinned across much churn keeps
// its own copy of what changed, so the bound keeps memory bounded. After a
// restart none is kept. Thread-safe.
#ifndef PHALANX_SERVER_LISTING_VIEWS_H_
#define PHALANX_SERVER_LISTING_VIEWS_H_

#include <cstdint>
#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "server/scheduler_loop.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {

class ListingViews {
 public:
  static constexpr int kMaxPinned = 8;
  static constexpr absl::Duration kIdle = absl::Seconds(60);

  // Keeps `view` under its revision (a view already kept there stays: they
  // differ at most in lease expiries, which move without a revision).
  void Pin(std::shared_ptr<const View> view, absl::Time now);
  // The view kept for `revision`, or null when it was never pinned or has
  // been dropped. Counts as a use.
  std::shared_ptr<const View> Find(int64_t revision, absl::Time now);

 private:
  struct Entry {
    std::shared_ptr<const View> view;
    absl::Time used;
  };
  void DropIdle(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Mutex mu_;
  std::map<int64_t, Entry> views_ ABSL_GUARDED_BY(mu_);
};

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_LISTING_VIEWS_H_
