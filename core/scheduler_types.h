// The values Scheduler commands take and return, and the reasons it gives a
// gang that no attempt has decided yet. Plain data; no behaviour.
#ifndef PHALANX_CORE_SCHEDULER_TYPES_H_
#define PHALANX_CORE_SCHEDULER_TYPES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "core/model.h"
#include "core/plan.h"
#include "core/reservation.h"

namespace phalanx::core {

// The reason of a gang no admission cycle has looked at yet.
inline constexpr char kWaitingReason[] = "WAITING: in line for admission";
// The reason of a gang a cycle stopped before reaching because no GPU was
// free (and neither preemption nor a new reservation could change that).
inline constexpr char kNoFreeGpuReason[] =
    "NO_FIT: no GPU is free in the fleet; tried again when capacity changes";
// Prefix of the reason of a gang accepted with admission.accept_unfit_gangs
// that can never fit the fleet as built.
inline constexpr char kNeverFitsPrefix[] = "NEVER_FITS: ";

// What UpsertNodes does with the state of a node that already exists.
enum class ExistingNodeState {
  kKeep,    // ignore the given state (the --fleet file at start-up)
  kRefuse,  // InvalidArgument when it differs (the UpsertNodes RPC)
};

struct SubmitResult {
  GangPtr gang;
  bool created = false;  // false: an earlier submit with the same request_id
};

// A launcher's report (ReportGang).
struct GangReport {
  GangId gang_id;
  std::optional<GangState> state;  // RUNNING, SUCCEEDED or FAILED
  std::optional<absl::Time> last_checkpoint_time;
  bool preemption_acknowledged = false;
  std::string message;
};

// A node agent's health report (ReportNodeHealth).
struct NodeHealthReport {
  NodeId node_id;
  // Whether the node as a whole passed its health check.
  bool healthy = true;
  // GPU indices that failed; replaces the node's previous set.
  std::vector<int> unhealthy_gpus;
  std::string reason;
};

struct Explanation {
  GangPtr gang;
  ReasonCode reason_code = ReasonCode::kNone;  // while pending
  std::string reason;
  int position = 0;           // among all pending gangs, 1-based; 0 = n/a
  int position_in_queue = 0;  // among its queue's pending gangs
  std::optional<Reservation> reservation;  // when the gang holds one
  PlannedStart plan;                       // its place in the plan
};

// Live figures of a queue.
struct QueueUsage {
  std::map<std::string, int64_t> held_gpus;  // by GPU model
  int pending = 0;
  int active = 0;
};

}  // namespace phalanx::core

#endif  // PHALANX_CORE_SCHEDULER_TYPES_H_
