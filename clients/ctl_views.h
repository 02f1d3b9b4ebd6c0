// Human-readable (table) renderings of phalanx.v1 messages for phalanxctl.
// Pure: ages are computed against the `now` passed in. Thread-safe.
#ifndef PHALANX_CLIENTS_CTL_VIEWS_H_
#define PHALANX_CLIENTS_CTL_VIEWS_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/repeated_field.h"
#include "phalanx/v1/admin.pb.h"
#include "phalanx/v1/fleet.pb.h"
#include "phalanx/v1/scheduler.pb.h"
#include "phalanx/v1/types.pb.h"

namespace phalanx::ctl {

// "PENDING", "ADMITTED", ...
std::string GangStateName(v1::GangState state);
// SUCCEEDED, FAILED or CANCELLED: the gang holds nothing and never will.
bool IsFinalState(v1::GangState state);
// "READY", "CORDONED", ...
std::string NodeStateName(v1::NodeState state);
// "NO_FIT", "QUOTA", … (the API enum without its prefix).
std::string ReasonCodeName(v1::ReasonCode code);

// The START cell of a gang: its estimated start relative to `now` ("in
// 2h10m", or "now" once it has passed) when planned, "beyond-depth",
// "beyond-window" or "never-fits" when the plan leaves it out, else "-"
// (not pending, not planned yet, or read from an HA follower).
std::string StartCell(const v1::Gang& gang, absl::Time now);

// The gang's place in the plan in words: "planned, rank 3", "not planned:
// more than 500 gangs are ahead of it", …; "" when it carries none (not
// pending, or read from an HA follower). The depth and window come from
// `planning` when given (else they are left out of the words).
std::string PlanText(const v1::Gang& gang, const v1::PlanningConfig* planning);

// One row per gang: ID QUEUE OWNER STATE PRIO PODS GPUS AGE REASON (OWNER
// "-" when the daemon runs without --auth). `wide` (-o wide) adds
// ATTEMPTS, NODES (the placement's nodes, in rank order, each once), CODE
// (the reason code) and START (StartCell) before REASON.
std::string GangsTable(
    const google::protobuf::RepeatedPtrField<v1::Gang>& gangs, absl::Time now,
    bool wide = false);

// GangsTable of one gang.
std::string GangTable(const v1::Gang& gang, absl::Time now, bool wide = false);

// Every field of a gang as "Key: value" lines (its place in the plan in
// words with PlanText's `planning`), then its pod sets and its placement.
std::string GangDetails(const v1::Gang& gang, absl::Time now,
                        const v1::PlanningConfig* planning = nullptr);

// One row per pod: POD SET INDEX NODE GPUS.
std::string PlacementTable(
    const google::protobuf::RepeatedPtrField<v1::PodPlacement>& placement);

// The answer of ExplainGang (its place in the plan in words with
// PlanText's `planning`).
std::string ExplainText(const v1::ExplainGangResponse& response, absl::Time now,
                        const v1::PlanningConfig* planning = nullptr);

// The answer of DryRunGang: fits or not, why, and the placement.
std::string DryRunText(const v1::DryRunGangResponse& response);

// One row per node: NODE ADDRESS MODEL USED/GPUS STATE LABELS GANGS
// HEARTBEAT REASON; `wide` adds CPU (millicores) and MEMORY (bytes) after
// USED/GPUS. ADDRESS is "-" for a node without one (the daemon sends the
// node id then).
std::string NodesTable(
    const google::protobuf::RepeatedPtrField<v1::Node>& nodes, absl::Time now,
    bool wide = false);

// Levels, fragmentation, then one row per domain and per level.
std::string TopologyText(const v1::GetTopologyResponse& response);

// One row per queue: NAME PARENT WEIGHT NOMINAL USED BORROWED PENDING ACTIVE
// SCORE MAX PRIO ("-" when unset) HELD.
std::string QueuesTable(
    const google::protobuf::RepeatedPtrField<v1::Queue>& queues);

// The short name of an audited gRPC method: "/phalanx.v1.Admin/PutQueue"
// -> "PutQueue"; any other form is returned whole (still to be escaped).
std::string AuditMethodName(absl::string_view method);

// One row per audit record, in the order given: TIME PRINCIPAL ("-" when
// unauthenticated) METHOD TARGET OUTCOME SUMMARY.
std::string AuditTable(
    const google::protobuf::RepeatedPtrField<v1::AuditRecord>& records);

// AuditTable of the response's records (nothing when there are none), then
// "dropped: N (...)" when the server dropped N records.
std::string AuditText(const v1::ListAuditRecordsResponse& response);

// The header line of `watch`, then one line per event (fixed-width columns,
// since a stream cannot be aligned after the fact). Both end in '\n'.
std::string WatchHeader();
std::string WatchLine(const v1::GangEvent& event);

}  // namespace phalanx::ctl

#endif  // PHALANX_CLIENTS_CTL_VIEWS_H_
