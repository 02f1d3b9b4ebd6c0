#include "server/listing_views.h"

#include <utility>

#include "storage/sync/mutex.h"

namespace phalanx::server {

void ListingViews::Pin(std::shared_ptr<const View> view, absl::Time now) {
  MutexLock lock(&mu_);
  DropIdle(now);
  auto [it, inserted] = views_.try_emplace(view->revision, Entry{view, now});
  it->second.used = now;
  if (!inserted) return;
  while (static_cast<int>(views_.size()) > kMaxPinned) {
    auto oldest = views_.begin();
    for (auto i = views_.begin(); i != views_.end(); ++i) {
      if (i->second.used < oldest->second.used) oldest = i;
    }
    views_.erase(oldest);
  }
}

std::shared_ptr<const View> ListingViews::Find(int64_t revision,
                                               absl::Time now) {
  MutexLock lock(&mu_);
  DropIdle(now);
  auto it = views_.find(revision);
  if (it == views_.end()) return nullptr;
  it->second.used = now;
  return it->second.view;
}

void ListingViews::DropIdle(absl::Time now) {
  for (auto it = views_.begin(); it != views_.end();) {
    it = it->second.used + kIdle <= now ? views_.erase(it) : std::next(it);
  }
}

}  // namespace phalanx::server
