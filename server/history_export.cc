#include "server/history_export.h"

#include <algorithm>
#include <climits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/status_macros.h"
#include "proto/convert.h"
#include "server/gang_snapshot.h"

namespace phalanx::server {
namespace {

// Where a gang stands in the export's order; a view of the gang's (or the
// token's) id, so the sort copies no string.
struct Position {
  absl::Time submit_time;
  absl::string_view id;
};

bool Before(const Position& a, const Position& b) {
  if (a.submit_time != b.submit_time) return a.submit_time < b.submit_time;
  return GangIdOrder()(a.id, b.id);
}

Position PositionOf(const core::Gang& gang) {
  return {gang.submit_time, gang.id.value()};
}

// A time in a token: RFC 3339 with nanoseconds, exact both ways.
std::string TimeText(absl::Time time) {
  return absl::FormatTime(absl::RFC3339_full, time, absl::UTCTimeZone());
}

std::optional<absl::Time> ParseTimeText(absl::string_view text) {
  absl::Time time;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, text, &time, &error)) {
    return std::nullopt;
  }
  return time;
}

// What a token carries: the export's `since` ("" when unset) and the last
// record's position, web-safe base64 of "since|submit_time|id".
struct PageToken {
  std::string since;
  absl::Time after_time;
  std::string after_id;
};

std::string EncodeToken(absl::string_view since, const Position& after) {
  return absl::WebSafeBase64Escape(
      absl::StrCat(since, "|", TimeText(after.submit_time), "|", after.id));
}

absl::StatusOr<PageToken> DecodeToken(absl::string_view text) {
  const absl::Status bad = absl::InvalidArgumentError(
      "page_token: not a token of ExportHistory; pass next_page_token as it "
      "came");
  std::string raw;
  if (!absl::WebSafeBase64Unescape(text, &raw)) return bad;
  std::vector<std::string> parts = absl::StrSplit(raw, absl::MaxSplits('|', 2));
  if (parts.size() != 3 || parts[2].empty()) return bad;
  std::optional<absl::Time> submit = ParseTimeText(parts[1]);
  if (!submit) return bad;
  if (!parts[0].empty() && !ParseTimeText(parts[0])) return bad;
  return PageToken{parts[0], *submit, parts[2]};
}

// The checked request: the first submit time it keeps, the page size and
// where the page starts.
struct PageRequest {
  absl::Time since = absl::InfinitePast();
  std::string since_text;  // "" when unset
  int limit = kDefaultHistoryPageSize;
  std::optional<PageToken> token;  // the page starts after its position

  bool Keeps(const core::Gang& gang) const {
    return gang.submit_time >= since &&
           (!token ||
            Before({token->after_time, token->after_id}, PositionOf(gang)));
  }
};

absl::StatusOr<PageRequest> CheckRequest(
    const v1::ExportHistoryRequest& request) {
  PageRequest page;
  if (request.has_since()) {
    ASSIGN_OR_RETURN(page.since,
                     convert::TimestampFromProto(request.since(), "since"));
    page.since_text = TimeText(page.since);
  }
  if (request.page_size() < 0 || request.page_size() > kMaxHistoryPageSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_size: must be in 0..", kMaxHistoryPageSize,
        " (0 = ", kDefaultHistoryPageSize, "), not ", request.page_size()));
  }
  if (request.page_size() > 0) page.limit = request.page_size();
  if (!request.page_token().empty()) {
    ASSIGN_OR_RETURN(PageToken token, DecodeToken(request.page_token()));
    if (token.since != page.since_text) {
      return absl::InvalidArgumentError(
          "page_token: made for another `since`; pass the first page's");
    }
    page.token = std::move(token);
  }
  return page;
}

// The first admission; a gang stored before first_admit_time was kept
// that was admitted once has it in admit_time.
std::optional<absl::Time> FirstAdmitOf(const core::Gang& gang) {
  if (gang.first_admit_time) return gang.first_admit_time;
  if (gang.attempts == 1) return gang.admit_time;
  return std::nullopt;
}

// Held time over every attempt, the current one up to `now`. A finished
// gang stored before previous_run_time was kept, admitted once, ran from
// admit_time to finish_time.
absl::Duration RunTimeOf(const core::Gang& gang, absl::Time now) {
  absl::Duration run = gang.previous_run_time;
  if (core::HoldsCapacity(gang.state) && gang.admit_time) {
    run += std::max(absl::ZeroDuration(), now - *gang.admit_time);
  } else if (!gang.first_admit_time && gang.attempts == 1 &&
             run == absl::ZeroDuration() && gang.admit_time &&
             gang.finish_time) {
    run = std::max(absl::ZeroDuration(), *gang.finish_time - *gang.admit_time);
  }
  return run;
}

void SetTime(const std::optional<absl::Time>& time,
             google::protobuf::Timestamp* (v1::HistoryRecord::*field)(),
             v1::HistoryRecord* out) {
  if (time) convert::ToProto(*time, (out->*field)());
}

}  // namespace

void ToHistoryRecord(const core::Gang& gang, absl::Time now,
                     bool include_labels, v1::HistoryRecord* out) {
  out->set_gang_id(gang.id.value());
  out->set_queue(gang.spec.queue.value());
  out->set_priority(gang.spec.priority);
  out->set_state(convert::ToProto(gang.state));
  out->set_reason_code(convert::ToProto(gang.reason_code));
  v1::GangSpec spec;
  convert::ToProto(gang.spec, &spec);
  out->mutable_pod_sets()->Swap(spec.mutable_pod_sets());
  out->set_allow_mixed_models(gang.spec.allow_mixed_models);
  convert::ToProto(gang.submit_time, out->mutable_submit_time());
  SetTime(FirstAdmitOf(gang), &v1::HistoryRecord::mutable_first_admit_time,
          out);
  SetTime(gang.finish_time, &v1::HistoryRecord::mutable_finish_time, out);
  convert::ToProto(RunTimeOf(gang, now), out->mutable_run_time());
  out->set_attempts(gang.attempts);
  out->set_preemptions(gang.preemptions);
  if (spec.has_estimated_runtime()) {
    out->mutable_estimated_runtime()->Swap(spec.mutable_estimated_runtime());
  }
  if (spec.has_max_runtime()) {
    out->mutable_max_runtime()->Swap(spec.mutable_max_runtime());
  }
  SetTime(gang.last_checkpoint_time,
          &v1::HistoryRecord::mutable_last_checkpoint_time, out);
  if (!include_labels) return;
  out->mutable_labels()->insert(gang.spec.labels.begin(),
                                gang.spec.labels.end());
  out->set_message(gang.message);
}

absl::Status ExportHistoryPage(const View& view,
                               const v1::ExportHistoryRequest& request,
                               absl::Time now,
                               v1::ExportHistoryResponse* response) {
  ASSIGN_OR_RETURN(const PageRequest page, CheckRequest(request));
  std::vector<core::GangPtr> gangs = view.gangs.List(
      "", INT_MAX,
      [&page](const core::Gang& gang) { return page.Keeps(gang); });
  // One more than the page, to know whether another follows.
  const size_t wanted =
      std::min(gangs.size(), static_cast<size_t>(page.limit) + 1);
  std::partial_sort(gangs.begin(), gangs.begin() + wanted, gangs.end(),
                    [](const core::GangPtr& a, const core::GangPtr& b) {
                      return Before(PositionOf(*a), PositionOf(*b));
                    });
  gangs.resize(wanted);
  if (static_cast<int>(gangs.size()) > page.limit) {
    gangs.resize(page.limit);
    response->set_next_page_token(
        EncodeToken(page.since_text, PositionOf(*gangs.back())));
  }
  for (const core::GangPtr& gang : gangs) {
    ToHistoryRecord(*gang, now, request.include_labels(),
                    response->add_records());
  }
  response->set_revision(view.revision);
  convert::ToProto(now, response->mutable_read_time());
  return absl::OkStatus();
}

}  // namespace phalanx::server
