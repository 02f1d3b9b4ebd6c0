// HandoffRelease and HandoffAcquire: a happens-before edge, for
// ThreadSanitizer, across a handoff that a library orders where TSan cannot
// see it. Thread-safe; stateless.
//
// Debian's gRPC is not built with TSan: when a handler returns a reactor, or
// a reaction returns, gRPC hands the call to another of its threads through
// its completion queues and callback executor, which synchronize inside
// uninstrumented libgrpc (absl::Mutex, atomics). TSan sees none of that, so
// the next reaction's reads of what the handler wrote look like races. The
// side that hands an object over calls HandoffRelease(object) last; the side
// that receives it calls HandoffAcquire(object) first; every use says which
// ordering of the library it stands for. They add an edge that the library
// already guarantees, and nothing else: an access not ordered by that
// guarantee (for instance two reactions gRPC may run at once, like OnCancel
// and OnWriteDone) is still reported.
//
// Without ThreadSanitizer both compile to nothing.
#ifndef PHALANX_STORAGE_SYNC_HANDOFF_H_
#define PHALANX_STORAGE_SYNC_HANDOFF_H_

#include "storage/sync/mutex.h"  // PHALANX_TSAN_LOCKS, tsan_interface.h

namespace phalanx {

#ifdef PHALANX_TSAN_LOCKS

// Everything this thread did so far happens before whatever a later
// HandoffAcquire(object) on any thread does after it.
inline void HandoffRelease(const void* object) {
  __tsan_release(const_cast<void*>(object));
}
// Sees everything done before each earlier HandoffRelease(object).
inline void HandoffAcquire(const void* object) {
  __tsan_acquire(const_cast<void*>(object));
}

#else

inline void HandoffRelease(const void*) {}
inline void HandoffAcquire(const void*) {}

#endif  // PHALANX_TSAN_LOCKS

// HandoffAcquire(object) now, HandoffRelease(object) when the scope ends: a
// callback the library runs after the previous handoff of `object` and
// before the next one (a reactor's reaction).
class HandoffScope {
 public:
  explicit HandoffScope(const void* object) : object_(object) {
    HandoffAcquire(object_);
  }
  ~HandoffScope() { HandoffRelease(object_); }
  HandoffScope(const HandoffScope&) = delete;
  HandoffScope& operator=(const HandoffScope&) = delete;

 private:
  const void* const object_;
};

}  // namespace phalanx

#endif  // PHALANX_STORAGE_SYNC_HANDOFF_H_
