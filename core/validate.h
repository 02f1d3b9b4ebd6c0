// Checks of user input that need no state: every error is InvalidArgument and
// names the field by its path in the request ("spec.pod_sets[1].count: must
// be > 0"). Checks that need the fleet or the queues live in the Scheduler.
// Stateless functions; thread-safe.
#ifndef PHALANX_CORE_VALIDATE_H_
#define PHALANX_CORE_VALIDATE_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/model.h"

namespace phalanx::core {

// Limits on what one request may ask for.
inline constexpr int kMaxPodSets = 16;
inline constexpr int kMaxPodsPerSet = 100000;
inline constexpr int kMaxGpusPerNode = 64;
inline constexpr int kMaxRequestIdBytes = 128;
inline constexpr int kMaxLabels = 64;
inline constexpr int kMaxNameBytes = 63;

// Gives every unnamed pod set a name ("set-<index>").
void NormalizeGangSpec(GangSpec& spec);
// Checks a gang spec; `field` is its path ("spec").
absl::Status ValidateGangSpec(const GangSpec& spec, absl::string_view field);
// Checks a node; `field` is its path ("nodes[3]").
absl::Status ValidateNodeSpec(const NodeSpec& spec, absl::string_view field);
// Checks a queue; `field` is its path ("queue").
absl::Status ValidateQueue(const Queue& queue, absl::string_view field);
// Checks a configuration; `field` is its path ("config").
absl::Status ValidateConfig(const Config& config, absl::string_view field);
// Checks a name of a queue, level or model: [A-Za-z0-9._-], 1..63 bytes.
absl::Status ValidateName(absl::string_view name, absl::string_view field);

}  // namespace phalanx::core

#endif  // PHALANX_CORE_VALIDATE_H_
