// What every fuzz target of tests/fuzz/ shares: the small fleet, queues and
// configuration a target starts from (applied through the daemon's own
// start-up path), and the storage round-trip checks. Test-only; not
// thread-safe (libFuzzer runs one input at a time).
#ifndef PHALANX_TESTS_FUZZ_FIXTURE_H_
#define PHALANX_TESTS_FUZZ_FIXTURE_H_

#include <concepts>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/check.h"
#include "core/scheduler.h"
#include "core/state_store.h"
#include "google/protobuf/message.h"
#include "proto/convert.h"
#include "proto/startup_files.h"

namespace phalanx::fuzz {

// Time the targets start at (a fixed instant, so every run is the same).
absl::Time StartTime();

// The base start-up files as proto3 JSON (also the JSON targets' seeds):
// levels block and rack, preemption on; 12 nodes (8 H100 nodes in 2 blocks
// of 2 racks, 4 H200 nodes in a third block); queues research (root),
// llm-pretrain and eval under it, and solo without a parent.
extern const char kBaseConfigJson[];
extern const char kBaseFleetJson[];
extern const char kBaseQueuesJson[];

// The base files parsed (once; later calls return the same files).
const convert::StartupFiles& BaseFiles();

// A scheduler recovered from an empty store with the base files applied, as
// phalanxd starts on a fresh data directory. Aborts if the base is rejected.
std::unique_ptr<core::Scheduler> BaseScheduler(absl::Time now);

// Deterministic wire bytes (map fields sorted), so equal messages compare
// equal as bytes — NaN included.
std::string Bytes(const google::protobuf::Message& message);

template <typename T>
absl::StatusOr<T> Ok(T value) {
  return value;
}

// Encodes `value` to a Record, the record to bytes and back, decodes it with
// `decode` and encodes it again: the two records must be the same bytes.
// kSameValue also requires the decoded value to equal `value` (for values
// the scheduler made; a corrupt record may hold what core cannot represent,
// e.g. a time past year 2262). Aborts, printing the record, on a mismatch.
template <bool kSameValue, typename Record, typename Value, typename Decode>
void RoundTrip(const char* what, const Value& value, Decode decode) {
  Record record;
  convert::ToProto(value, &record);
  const std::string bytes = Bytes(record);
  Record parsed;
  PHALANX_CHECK(parsed.ParseFromString(bytes));
  auto decoded = decode(parsed);
  if (!decoded.ok()) {
    std::fprintf(stderr, "fuzz: %s does not decode again: %s\n%s\n", what,
                 decoded.status().ToString().c_str(),
                 record.DebugString().c_str());
    std::abort();
  }
  if constexpr (kSameValue && std::equality_comparable<Value>) {
    if (!(*decoded == value)) {
      std::fprintf(stderr, "fuzz: %s reads back as another value:\n%s\n", what,
                   record.DebugString().c_str());
      std::abort();
    }
  }
  Record again;
  convert::ToProto(*decoded, &again);
  if (Bytes(again) != bytes) {
    std::fprintf(stderr, "fuzz: %s does not round-trip:\n%s\nvs\n%s\n", what,
                 record.DebugString().c_str(), again.DebugString().c_str());
    std::abort();
  }
}

// Checks that every record `mutation` writes reads back as the same value
// through the storage encoding (proto/convert.h, then the wire format):
// what the store commits is what recovery gets. Aborts on a mismatch.
void CheckStorageRoundTrip(const core::Mutation& mutation);

}  // namespace phalanx::fuzz

#endif  // PHALANX_TESTS_FUZZ_FIXTURE_H_
