// Conversion between core's Mutation (one scheduler-loop batch) and the HA
// log's LogBatch record (phalanx/storage/v1/log.proto, docs/ha.md). Uses the
// record conversions of convert.h, so the log holds exactly what the RocksDB
// store would write. Stateless functions; thread-safe.
#ifndef PHALANX_PROTO_LOG_CONVERT_H_
#define PHALANX_PROTO_LOG_CONVERT_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/state_store.h"
#include "google/protobuf/message.h"
#include "phalanx/storage/v1/log.pb.h"

namespace phalanx::convert {

// Fills `out` from `mutation`; seq and term are left to the caller.
void ToProto(const core::Mutation& mutation, storage::v1::LogBatch* out);
// The Mutation `batch` encodes. Fails with DataLoss when a record does not
// convert (a log entry core cannot represent).
absl::StatusOr<core::Mutation> MutationFromProto(
    const storage::v1::LogBatch& batch);

// `message`'s wire bytes with map fields in key order (not in the maps'
// hash order), so equal messages always encode to the same bytes: what a
// log entry is written as, so a retried append recognises its own entry.
std::string DeterministicBytes(const google::protobuf::Message& message);

}  // namespace phalanx::convert

#endif  // PHALANX_PROTO_LOG_CONVERT_H_
