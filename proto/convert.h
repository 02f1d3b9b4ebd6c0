// Conversion between the protobuf messages of proto/ and core's values. The
// one place this mapping is written; used by server/ and storage/.
// Stateless functions; thread-safe.
//
// *FromProto functions reject what core cannot represent (unknown enum
// values, out-of-range numbers) with InvalidArgument naming the field by its
// path, which the caller passes in ("spec", "nodes[3]").
#ifndef PHALANX_PROTO_CONVERT_H_
#define PHALANX_PROTO_CONVERT_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/model.h"
#include "core/plan.h"
#include "core/state_store.h"
#include "phalanx/storage/v1/records.pb.h"
#include "phalanx/v1/admin.pb.h"
#include "phalanx/v1/types.pb.h"

namespace phalanx::convert {

namespace pb = ::phalanx::v1;

// Time. The plain FromProto forms trust their input (stored records, which
// ToProto wrote); what clients send goes through the checked forms.
absl::Time FromProto(const google::protobuf::Timestamp& ts);
void ToProto(absl::Time time, google::protobuf::Timestamp* out);
absl::Duration FromProto(const google::protobuf::Duration& d);
void ToProto(absl::Duration duration, google::protobuf::Duration* out);
// InvalidArgument naming `field` unless `ts` is a valid Timestamp: seconds
// within 0001-01-01..9999-12-31 UTC, nanos in 0..999999999.
absl::StatusOr<absl::Time> TimestampFromProto(
    const google::protobuf::Timestamp& ts, absl::string_view field);
// InvalidArgument naming `field` unless `d` is a valid, normalised Duration:
// |seconds| <= 315576000000 (10000 years), |nanos| <= 999999999, and nanos
// zero or of the sign of seconds.
absl::StatusOr<absl::Duration> DurationFromProto(
    const google::protobuf::Duration& d, absl::string_view field);

// Enums. FromProto fails for UNSPECIFIED (where meaningless) and unknown
// values.
absl::StatusOr<core::GangState> GangStateFromProto(int value,
                                                   absl::string_view field);
pb::GangState ToProto(core::GangState state);
absl::StatusOr<core::NodeState> NodeStateFromProto(int value,
                                                   absl::string_view field);
pb::NodeState ToProto(core::NodeState state);
pb::EventType ToProto(core::EventType type);
// Reason codes share their numbering with the API's; an unknown stored
// value (from a newer binary) reads as kNone, the detail text still there.
pb::ReasonCode ToProto(core::ReasonCode code);
core::ReasonCode ReasonCodeFromProto(int value);

// Gang specs and gangs.
absl::StatusOr<core::GangSpec> GangSpecFromProto(const pb::GangSpec& in,
                                                 absl::string_view field);
void ToProto(const core::GangSpec& in, pb::GangSpec* out);
void ToProto(const core::PodPlacement& in, pb::PodPlacement* out);
// Fills every field of `out` but the plan's four (output only, never
// stored; see the PlannedStart form below).
void ToProto(const core::Gang& in, pb::Gang* out);
// Reads a stored gang; the plan's fields, if any, are ignored.
absl::StatusOr<core::Gang> GangFromProto(const pb::Gang& in);

// The plan. Statuses share their names with the API's enum
// (core::PlanStatusName after "PLAN_STATUS_"). The PlannedStart form sets
// `out`'s plan_status, and for a planned gang its estimated_start,
// planned_domain ("/" for the whole fleet) and plan_rank.
pb::PlanStatus ToProto(core::PlanStatus status);
void ToProto(const core::PlannedStart& in, pb::Gang* out);

// Events.
void ToProto(const core::Event& in, pb::GangEvent* out);
absl::StatusOr<core::Event> EventFromProto(const pb::GangEvent& in);

// Who set a node's state; UNSPECIFIED and unknown values are OPERATOR.
core::NodeStateSource NodeStateSourceFromProto(int value);
pb::NodeStateSource ToProto(core::NodeStateSource source);

// Nodes, queues, configuration.
absl::StatusOr<core::Node> NodeFromProto(const pb::Node& in,
                                         absl::string_view field);
void ToProto(const core::Node& in, pb::Node* out);
core::Queue QueueFromProto(const pb::Queue& in);
void ToProto(const core::Queue& in, pb::Queue* out);
absl::StatusOr<core::Config> ConfigFromProto(const pb::Config& in,
                                             absl::string_view field);
void ToProto(const core::Config& in, pb::Config* out);

// Storage records.
core::RequestRecord RequestFromProto(const storage::v1::RequestRecord& in,
                                     const core::QueueName& queue,
                                     const std::string& request_id);
void ToProto(const core::RequestRecord& in, storage::v1::RequestRecord* out);
core::LedgerEntry LedgerFromProto(const storage::v1::LedgerRecord& in);
void ToProto(const core::LedgerEntry& in, storage::v1::LedgerRecord* out);
core::Meta MetaFromProto(const storage::v1::MetaRecord& in);
void ToProto(const core::Meta& in, storage::v1::MetaRecord* out);
core::StartupFileHashes StartupFilesFromProto(
    const storage::v1::StartupFilesRecord& in);
void ToProto(const core::StartupFileHashes& in,
             storage::v1::StartupFilesRecord* out);

// Audit records (stored as the API's message).
void ToProto(const core::AuditRecord& in, pb::AuditRecord* out);
core::AuditRecord AuditFromProto(const pb::AuditRecord& in);

}  // namespace phalanx::convert

#endif  // PHALANX_PROTO_CONVERT_H_
