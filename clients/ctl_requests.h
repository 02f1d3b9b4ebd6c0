// Builds phalanx.v1 requests from phalanxctl's typed options (ctl_options.h,
// each value already checked by its flag's validator) and JSON input. What
// is left to check here is how flags combine (-f with spec flags, --mode
// without --level, …) and the JSON. Pure: no I/O and no clock (the caller
// passes the input file's text and the current time). Every error is
// InvalidArgument naming the flag or the input, which phalanxctl reports as
// a usage error. Thread-safe.
#ifndef PHALANX_CLIENTS_CTL_REQUESTS_H_
#define PHALANX_CLIENTS_CTL_REQUESTS_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "clients/ctl_options.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/message.h"
#include "google/protobuf/timestamp.pb.h"
#include "phalanx/v1/admin.pb.h"
#include "phalanx/v1/fleet.pb.h"
#include "phalanx/v1/scheduler.pb.h"
#include "phalanx/v1/types.pb.h"

namespace phalanx::ctl {

// Most gangs ListGangs returns per page.
inline constexpr int32_t kMaxPageSize = 1000;

// Parses proto3 JSON `text` into `message` (unknown fields are errors).
// Fails with InvalidArgument mentioning `what` (e.g. the file name).
absl::Status ParseJsonInto(absl::string_view text, absl::string_view what,
                           google::protobuf::Message* message);

// ParseJsonInto for a fresh message of type T.
template <typename T>
absl::StatusOr<T> ParseJson(absl::string_view text, absl::string_view what) {
  T message;
  absl::Status status = ParseJsonInto(text, what, &message);
  if (!status.ok()) return status;
  return message;
}

// The spec of `submit`/`dryrun`: the JSON GangSpec `file_text` when --file
// was given (no other spec flag allowed then), else SpecFromFlags.
absl::StatusOr<v1::GangSpec> BuildSpec(const SpecOptions& options,
                                       absl::string_view file_text);

// A one-pod-set GangSpec from --queue, --pods, --gpus (required) and the
// optional --level, --mode, --priority, --priority-class, --request-id,
// --name (label "name"),
// --models, --estimated-runtime and --max-runtime. The pod set is named
// "workers"; --level without --mode means REQUIRED.
absl::StatusOr<v1::GangSpec> SpecFromFlags(const SpecOptions& options);

// Returns whether `labels` meet every requirement of `selector`.
bool MatchesLabels(
    const LabelSelector& selector,
    const google::protobuf::Map<std::string, std::string>& labels);

// `list`: the first page's request, the total limit (0 = all) and the
// filters the daemon has no field for (applied to each page as it comes,
// before the limit).
struct ListQuery {
  v1::ListGangsRequest request;
  int64_t limit = 0;
  std::string owner;     // "" = any
  LabelSelector labels;  // empty = any
  // Returns whether `gang` passes the owner and label filters.
  bool Matches(const v1::Gang& gang) const;
};
ListQuery BuildListQuery(const ListOptions& options);

// `cancel -l SELECTOR`: every gang not yet final whose labels match.
ListQuery BuildCancelQuery(const LabelSelector& labels);

// Page size for the next ListGangs call after `fetched` gangs.
int32_t NextPageSize(int64_t limit, int64_t fetched);

// `watch`: --after, --queue..., --gang...
v1::WatchGangsRequest BuildWatchRequest(const WatchOptions& options);

// `report ID`: at least one of --state, --checkpoint ("now" = `now`, else
// RFC3339) and --ack-preemption.
absl::StatusOr<v1::ReportGangRequest> BuildReportRequest(
    absl::string_view gang_id, const ReportOptions& options, absl::Time now);

// `nodes list`: --state, --model.
v1::ListNodesRequest BuildListNodesRequest(const NodesListOptions& options);

// `nodes cordon|drain|uncordon|unhealthy NODE`; drain takes --deadline, a
// duration from `now` or an RFC3339 time. Fails for another verb.
absl::StatusOr<v1::SetNodeStateRequest> BuildSetNodeStateRequest(
    absl::string_view verb, absl::string_view node_id,
    const NodeStateOptions& options, absl::Time now);

// `queues put`: the JSON Queue `file_text` when --file was given, else a
// queue from --name (required), --parent, --weight, --nominal, --held,
// --borrowing-limit, --lending-limit and --max-priority (left unset, i.e. no
// limit, when not given). PutQueue replaces the whole queue: what is not
// given takes its default.
absl::StatusOr<v1::Queue> BuildQueue(const QueuePutOptions& options,
                                     absl::string_view file_text);

// `queues set NAME`: a PutQueue of only the fields given (--held or
// --no-held, --weight), named in its update_mask. Fails when none is
// given, or both --held and --no-held.
absl::StatusOr<v1::PutQueueRequest> BuildQueueUpdate(
    absl::string_view name, const QueueSetOptions& options);

// `config set`: the JSON Config `file_text`, --expected-version, and the
// update_mask of --update-mask (its paths as given; the daemon checks
// them) or of --merge (the top-level fields the file names, but
// "version"). Fails with both, or with --merge on a file naming nothing.
absl::StatusOr<v1::UpdateConfigRequest> BuildUpdateConfigRequest(
    const ConfigSetOptions& options, absl::string_view file_text);

// Most audit records ListAuditRecords returns per page, and the most pages
// `audit --all` fetches.
inline constexpr int32_t kMaxAuditPageSize = 1000;
inline constexpr int kMaxAuditPages = 10000;

// `audit`: the first page's request and whether to follow next_page_token.
struct AuditQuery {
  v1::ListAuditRecordsRequest request;
  bool all = false;  // --all
};
// --page-size (1..1000; default: the server's, or 1000 with --all),
// --page-token and --all.
AuditQuery BuildAuditQuery(const AuditOptions& options);

// Decides, page after page, whether a paged listing goes on, so that a
// server that repeats a token (or returns empty pages with tokens) cannot
// make the client loop. Thread-compatible.
class PageFollower {
 public:
  enum class Next {
    kDone,        // the last page: next_page_token is empty
    kFetch,       // fetch the page of next_page_token
    kNoProgress,  // the token was seen before, or came with an empty page
    kPageLimit,   // `max_pages` pages were fetched; more remain
  };
  explicit PageFollower(int max_pages = kMaxAuditPages);
  // Call once per page fetched, with its next_page_token and whether it held
  // no record.
  Next After(const std::string& next_page_token, bool page_empty);
  // Pages seen so far.
  int pages() const { return pages_; }

 private:
  const int max_pages_;
  int pages_ = 0;
  std::set<std::string> seen_;
};

}  // namespace phalanx::ctl

#endif  // PHALANX_CLIENTS_CTL_REQUESTS_H_
