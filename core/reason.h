// ReasonCode: why a gang waits, or why it ended, as a code a client can
// switch on. Gang::reason keeps the human detail ("NO_FIT at level rack:
// …"); the code says which kind of reason it is, and every decision core
// makes on a reason reads the code, never the text. docs/reasons.md lists
// what a user can do about each.
//
// Plain values; thread-compatible.
#ifndef PHALANX_CORE_REASON_H_
#define PHALANX_CORE_REASON_H_

#include "absl/strings/string_view.h"

namespace phalanx::core {

enum class ReasonCode {
  kNone = 0,  // no reason: admitted or running
  // Pending.
  kWaiting,               // in line; no cycle has tried it yet
  kStrictFifo,            // behind a strict-FIFO head that does not fit
  kNoFit,                 // the free capacity cannot hold it now
  kQuota,                 // admitting it would exceed its queue's quota
  kQueueHeld,             // its queue is held
  kReserved,              // nodes are held for it until others end
  kBlockedByReservation,  // it would fit on nodes reserved for a gang ahead
  kPreempting,            // it waits for the gangs it preempts to stop
  kNeverFits,             // it can never fit the fleet as built
  kRequeued,              // preempted, and back in line
  kStartTimeout,          // not reported RUNNING in time, back in line
  kEvicted,               // its node failed or was drained; back in line
  // PREEMPTING.
  kPreempted,  // a higher-priority gang preempts it
  // Final.
  kSucceeded,
  kFailed,
  kCancelled,
  kMaxRuntime,
  kLeaseExpired,
};
inline constexpr int kReasonCodeCount = 19;

// The code's upper-case name ("NO_FIT", …): the metrics' `reason` label and
// the API enum's suffix.
const char* ReasonCodeName(ReasonCode code);

// The code of a reason text stored without one, by its leading word; for
// records written before reason codes were stored. kNone when unknown.
ReasonCode ReasonCodeOfStoredText(absl::string_view reason);

}  // namespace phalanx::core

#endif  // PHALANX_CORE_REASON_H_
