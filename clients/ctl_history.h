// `phalanxctl history export`: the request from its flags, and its CSV — a
// superset of the simulator's trace format (bench/sim/trace.h), so
// `phalanx-sim --trace` reads it unchanged (docs/history.md). Pure
// functions over values; thread-compatible.
#ifndef PHALANX_CLIENTS_CTL_HISTORY_H_
#define PHALANX_CLIENTS_CTL_HISTORY_H_

#include <cstdint>
#include <string>
#include <variant>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "clients/ctl_options.h"
#include "phalanx/v1/admin.pb.h"

namespace phalanx::ctl {

// The largest page Admin.ExportHistory serves, and the most pages one
// export follows (a billion gangs).
inline constexpr int32_t kMaxHistoryPageSize = 10000;
inline constexpr int kMaxHistoryPages = 100000;

// --since: an RFC3339 time, or how long ago ("7d", "36h", "90m", "3600s",
// a bare number of seconds); InvalidArgument otherwise.
absl::StatusOr<std::variant<absl::Duration, absl::Time>> ParseSince(
    absl::string_view text);

// The first page's request: `since` resolved against `now`, the largest
// page the server allows.
v1::ExportHistoryRequest BuildHistoryRequest(const HistoryOptions& options,
                                             absl::Time now);

// The header line: timestamp,duration,num_gpus,cluster,priority,
// checkpoint_interval_s,complete,gang_id,state,pods,gpus_per_pod,gpu_model,
// topology,start,finish,attempts,preemptions,estimated_runtime_s,
// max_runtime_s (and with `labels`, labels) — then a newline.
std::string HistoryCsvHeader(bool labels);

// One record as a CSV line (with its newline), fields quoted where CSV
// needs it; the shape columns (pods, gpus_per_pod, gpu_model, topology)
// hold one value per pod set, joined by ';'. Times are seconds since the epoch
// and durations seconds, as decimals; a gang never started has an empty
// duration and start, and complete=0. With `labels`, a last field of KEY=VALUE
// pairs joined by
// ';'.
std::string HistoryCsvRow(const v1::HistoryRecord& record, bool labels);

}  // namespace phalanx::ctl

#endif  // PHALANX_CLIENTS_CTL_HISTORY_H_
