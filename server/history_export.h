// The pages of Admin.ExportHistory (docs/history.md): the retained gangs of
// a published View as HistoryRecords, by submit time then id, with opaque
// page tokens that name the last record's position. A page is read from
// whichever view is current when it is asked for (no view is pinned), so
// the records of one export may come from different revisions; the order
// is stable because a gang's submit time and id never change. Stateless
// functions; thread-safe.
#ifndef PHALANX_SERVER_HISTORY_EXPORT_H_
#define PHALANX_SERVER_HISTORY_EXPORT_H_

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/model.h"
#include "phalanx/v1/admin.pb.h"
#include "server/scheduler_loop.h"

namespace phalanx::server {

// Records per page when the request says 0, and the most it may ask for.
inline constexpr int kDefaultHistoryPageSize = 1000;
inline constexpr int kMaxHistoryPageSize = 10000;

// Fills `response` with the page `request` asks for, read from `view`,
// running gangs' run time measured to `now`. InvalidArgument naming
// `since`, `page_size` or `page_token` for a bad request (a token must
// come from an export with the same `since`).
absl::Status ExportHistoryPage(const View& view,
                               const v1::ExportHistoryRequest& request,
                               absl::Time now,
                               v1::ExportHistoryResponse* response);

// Fills `out` with what a replay needs of `gang`: its shape, times, run
// time up to `now` and attempts; its labels and message only with
// `include_labels`; never its owner.
void ToHistoryRecord(const core::Gang& gang, absl::Time now,
                     bool include_labels, v1::HistoryRecord* out);

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_HISTORY_EXPORT_H_
