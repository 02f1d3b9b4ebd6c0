// phalanx::Mutex, MutexLock, ReaderMutexLock, WriterMutexLock and
// Notification: the locks of server/, storage/, clients/ and the tests'
// helpers, made visible to ThreadSanitizer. Each is thread-safe, like the
// Abseil type it stands for; conditions are plain `absl::Condition`s.
//
// In a normal build each is the Abseil type itself (an alias: no cost, no
// change of behaviour). Debian's Abseil is not built with ThreadSanitizer:
// absl::Mutex locks and unlocks inside libabsl_synchronization.so, where TSan
// sees no happens-before edge, so every ABSL_GUARDED_BY member touched by two
// threads would be reported as a race. When the translation unit is compiled
// with -fsanitize=thread (`PHALANX_TSAN`, which the top-level CMakeLists.txt
// defines in place of `__SANITIZE_THREAD__`; or `__SANITIZE_THREAD__`, or
// clang's `__has_feature(thread_sanitizer)`), each type here wraps the Abseil
// one and tells TSan about every lock, unlock, wait and notification through
// the annotation interface of <sanitizer/tsan_interface.h> — the annotations
// Abseil's own mutex.cc makes when Abseil itself is built with TSan. TSan then
// sees the happens-before edges, holds the lock sets its reports print, and
// checks lock order (its deadlock detector: a lock-order inversion is a
// report).
//
// Why annotations around absl::Mutex rather than a std::mutex /
// std::condition_variable_any stand-in under TSan: the TSan build then runs
// the same lock as production (Abseil's Await, whose conditions are
// re-evaluated by the unlocking thread; its timeouts; its reader/writer
// fairness), not a second implementation that would need a notify_all on
// every unlock to keep Await's meaning and whose own bugs TSan could not tell
// from ours. The price is speed under TSan only: two threads incrementing one
// counter 10^6 times each under the lock took 917 ms with this Mutex, 429 ms
// with std::mutex (a stand-in's floor) and 275 ms with plain absl::Mutex,
// which TSan reports as a data race on the counter (sync_lock_cost,
// storage/sync/README.md).
//
// What TSan does not see: a condition that absl::Mutex evaluates on another
// thread inside its Unlock (TSan ignores memory accesses between the pre- and
// post-annotations, as in Abseil's own TSan build). Await evaluates its
// condition once on the caller's thread first, under the lock, where TSan
// checks it.
#ifndef PHALANX_STORAGE_SYNC_MUTEX_H_
#define PHALANX_STORAGE_SYNC_MUTEX_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#if defined(PHALANX_TSAN) || defined(__SANITIZE_THREAD__)
#define PHALANX_TSAN_LOCKS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PHALANX_TSAN_LOCKS 1
#endif
#endif

#ifdef PHALANX_TSAN_LOCKS
#include <sanitizer/tsan_interface.h>
#endif

namespace phalanx {

#ifndef PHALANX_TSAN_LOCKS

using Mutex = absl::Mutex;
using MutexLock = absl::MutexLock;
using ReaderMutexLock = absl::ReaderMutexLock;
using WriterMutexLock = absl::WriterMutexLock;
using Notification = absl::Notification;

#else  // PHALANX_TSAN_LOCKS

// absl::Mutex with every transition announced to ThreadSanitizer. The subset
// of absl::Mutex's interface Phalanx uses; each method has absl's contract.
class ABSL_LOCKABLE Mutex {
 public:
  Mutex() { __tsan_mutex_create(this, __tsan_mutex_not_static); }
  ~Mutex() { __tsan_mutex_destroy(this, __tsan_mutex_not_static); }
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    __tsan_mutex_pre_lock(this, 0);
    mu_.Lock();
    __tsan_mutex_post_lock(this, 0, 0);
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    __tsan_mutex_pre_unlock(this, 0);
    mu_.Unlock();
    __tsan_mutex_post_unlock(this, 0);
  }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() {
    __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
    mu_.ReaderLock();
    __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
  }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() {
    __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
    mu_.ReaderUnlock();
    __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
  }
  void WriterLock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { Lock(); }
  void WriterUnlock() ABSL_UNLOCK_FUNCTION() { Unlock(); }

  // Waits, with the lock held exclusively, until `cond` holds.
  void Await(const absl::Condition& cond) {
    if (cond.Eval()) return;
    BeginWait();
    mu_.Await(cond);
    EndWait();
  }
  // As Await, for at most `timeout`; returns whether `cond` holds.
  bool AwaitWithTimeout(const absl::Condition& cond, absl::Duration timeout) {
    if (cond.Eval()) return true;
    BeginWait();
    const bool holds = mu_.AwaitWithTimeout(cond, timeout);
    EndWait();
    return holds;
  }
  // As Await, until at most `deadline`; returns whether `cond` holds.
  bool AwaitWithDeadline(const absl::Condition& cond, absl::Time deadline) {
    if (cond.Eval()) return true;
    BeginWait();
    const bool holds = mu_.AwaitWithDeadline(cond, deadline);
    EndWait();
    return holds;
  }

 private:
  // absl::Mutex::Await releases the lock while it waits and takes it again
  // before it returns: to TSan, an unlock, then one lock that lasts until
  // the wait ends (accesses inside are ignored), as in Abseil's own
  // annotated Await.
  void BeginWait() {
    __tsan_mutex_pre_unlock(this, 0);
    __tsan_mutex_post_unlock(this, 0);
    __tsan_mutex_pre_lock(this, 0);
  }
  void EndWait() { __tsan_mutex_post_lock(this, 0, 0); }

  absl::Mutex mu_;
};

// Holds `mu` exclusively for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// Holds `mu` shared for its scope.
class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(Mutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->ReaderLock();
  }
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// Holds `mu` exclusively for its scope.
class ABSL_SCOPED_LOCKABLE WriterMutexLock {
 public:
  explicit WriterMutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_->WriterLock();
  }
  ~WriterMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->WriterUnlock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// absl::Notification whose Notify happens before every wait that sees it.
class Notification {
 public:
  Notification() = default;
  Notification(const Notification&) = delete;
  Notification& operator=(const Notification&) = delete;

  void Notify() {
    __tsan_release(this);
    notification_.Notify();
  }
  bool HasBeenNotified() const {
    return Acquired(notification_.HasBeenNotified());
  }
  void WaitForNotification() const {
    notification_.WaitForNotification();
    Acquired(true);
  }
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    return Acquired(notification_.WaitForNotificationWithTimeout(timeout));
  }

 private:
  // Returns `notified`; when true, first acquires what Notify released.
  bool Acquired(bool notified) const {
    if (notified) __tsan_acquire(const_cast<Notification*>(this));
    return notified;
  }

  absl::Notification notification_;
};

#endif  // PHALANX_TSAN_LOCKS

}  // namespace phalanx

#endif  // PHALANX_STORAGE_SYNC_MUTEX_H_
