// Checks of user input that need no state: every error is InvalidArgument and
// names the field by its path in the request ("spec.pod_sets[1].count: must
// be > 0"). Checks that need the fleet or the queues live in the Scheduler.
// Limits that the configuration sets come in as a LimitsConfig; the rest are
// fixed. Client input quoted in an error goes through QuoteForError.
// Stateless functions; thread-safe.
#ifndef PHALANX_CORE_VALIDATE_H_
#define PHALANX_CORE_VALIDATE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/model.h"

namespace phalanx::core {

// Limits on what one request may ask for.
inline constexpr int kMaxPodSets = 16;
inline constexpr int kMaxPodsPerSet = 100000;
inline constexpr int kMaxGpusPerNode = 64;
inline constexpr int kMaxNameBytes = 63;
inline constexpr size_t kMaxGpuModels = 16;  // per pod set
// GangSpec::lease_duration, when set: long enough to renew over a slow
// network, short enough that a dead launcher's GPUs come back the same day.
inline constexpr absl::Duration kMinLeaseDuration = absl::Seconds(1);
inline constexpr absl::Duration kMaxLeaseDuration = absl::Hours(24);
// The largest quota a configuration may allow (limits.max_quota_gpus): sums
// of a million such quotas still fit in an int64_t.
inline constexpr int64_t kMaxQuotaGpus = int64_t{1} << 40;
// At most this many bytes of client input appear in an error message.
inline constexpr size_t kMaxQuotedBytes = 64;

// Returns `value` in double quotes for an error message: at most
// kMaxQuotedBytes of it (cut at a UTF-8 character boundary), with control
// characters, '"' and '\' escaped; a cut value is followed by
// `... (N bytes)`.
std::string QuoteForError(absl::string_view value);

// Gives every unnamed pod set a name ("set-<index>").
void NormalizeGangSpec(GangSpec& spec);
// Checks a gang spec; `field` is its path ("spec").
absl::Status ValidateGangSpec(const GangSpec& spec, const LimitsConfig& limits,
                              absl::string_view field);
// Checks a node; `field` is its path ("nodes[3]").
absl::Status ValidateNodeSpec(const NodeSpec& spec, const LimitsConfig& limits,
                              absl::string_view field);
// Checks a queue; `field` is its path ("queue").
absl::Status ValidateQueue(const Queue& queue, const LimitsConfig& limits,
                           absl::string_view field);
// Checks a configuration (its limits included); `field` is its path
// ("config").
absl::Status ValidateConfig(const Config& config, absl::string_view field);
// Checks a name of a level, model, pod set or group: [A-Za-z0-9._-],
// 1..63 bytes.
absl::Status ValidateName(absl::string_view name, absl::string_view field);
// Checks a queue name (the API's pattern): [a-z0-9._-], 1..63 bytes.
absl::Status ValidateQueueName(absl::string_view name, absl::string_view field);
// Checks an id (gang, node, request): 1..limits.max_id_bytes of printable
// ASCII without spaces.
absl::Status ValidateId(absl::string_view id, const LimitsConfig& limits,
                        absl::string_view field);
// Returns the mask (bit i = GPU i) of `gpus`, GPU indices of a node with
// `gpu_count` GPUs. InvalidArgument naming `field`[i] when an index is
// outside 0..gpu_count-1 (or 0..63) or named twice.
absl::StatusOr<uint64_t> GpuIndexMask(const std::vector<int>& gpus,
                                      int gpu_count, absl::string_view field);
// Checks a free-form reason or message: at most limits.max_message_bytes.
absl::Status ValidateMessage(absl::string_view message,
                             const LimitsConfig& limits,
                             absl::string_view field);
// Checks labels: at most limits.max_labels; keys of 1..max_label_key_bytes of
// [A-Za-z0-9._/-]; values of at most max_label_value_bytes.
absl::Status ValidateLabels(const std::map<std::string, std::string>& labels,
                            const LimitsConfig& limits,
                            absl::string_view field);

}  // namespace phalanx::core

#endif  // PHALANX_CORE_VALIDATE_H_
