#include "core/reason.h"

#include <utility>

namespace phalanx::core {
namespace {

constexpr const char* kNames[kReasonCodeCount] = {
    "NONE",       "WAITING",       "STRICT_FIFO",  "NO_FIT",       "QUOTA",
    "QUEUE_HELD", "RESERVED",      "RESERVED_FOR", "PREEMPTING",   "NEVER_FITS",
    "REQUEUED",   "START_TIMEOUT", "EVICTED",      "PREEMPTED",    "SUCCEEDED",
    "FAILED",     "CANCELLED",     "MAX_RUNTIME",  "LEASE_EXPIRED"};

}  // namespace

const char* ReasonCodeName(ReasonCode code) {
  const int index = static_cast<int>(code);
  return index >= 0 && index < kReasonCodeCount ? kNames[index] : "NONE";
}

ReasonCode ReasonCodeOfStoredText(absl::string_view reason) {
  // The texts' leading words, most specific first.
  static constexpr std::pair<absl::string_view, ReasonCode> kLeads[] = {
      {"WAITING: strict FIFO", ReasonCode::kStrictFifo},
      {"WAITING", ReasonCode::kWaiting},
      {"NO_FIT", ReasonCode::kNoFit},
      {"QUOTA", ReasonCode::kQuota},
      {"QUEUE_HELD", ReasonCode::kQueueHeld},
      {"RESERVED_FOR", ReasonCode::kBlockedByReservation},
      {"RESERVED", ReasonCode::kReserved},
      {"PREEMPTING", ReasonCode::kPreempting},
      {"NEVER_FITS", ReasonCode::kNeverFits},
      {"REQUEUED: not reported RUNNING", ReasonCode::kStartTimeout},
      {"REQUEUED", ReasonCode::kRequeued},
      {"EVICTED", ReasonCode::kEvicted},
      {"PREEMPTED", ReasonCode::kPreempted},
      {"SUCCEEDED", ReasonCode::kSucceeded},
      {"FAILED", ReasonCode::kFailed},
      {"CANCELLED", ReasonCode::kCancelled},
      {"MAX_RUNTIME", ReasonCode::kMaxRuntime},
      {"LEASE_EXPIRED", ReasonCode::kLeaseExpired},
  };
  for (const auto& [lead, code] : kLeads) {
    if (reason.substr(0, lead.size()) == lead) return code;
  }
  return ReasonCode::kNone;
}

}  // namespace phalanx::core
