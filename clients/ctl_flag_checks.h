// The value checks of phalanxctl's flags: parsers from flag text to typed
// values, and the CLI11 validators built on them (CLI11 names the flag:
// "--pods: want an integer in [1, 2147483647], got \"0\""). A parser fails
// with InvalidArgument whose message is the problem alone ("want …, got
// \"…\""), without the flag. Every value echoed in a message is cut and
// escaped (SafeCell). Pure; thread-safe.
#ifndef PHALANX_CLIENTS_CTL_FLAG_CHECKS_H_
#define PHALANX_CLIENTS_CTL_FLAG_CHECKS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "clients/ctl_options.h"
#include "phalanx/v1/types.pb.h"

namespace phalanx::ctl {

// "3600s", "90m", "1h30m", or a bare number of seconds; positive and finite.
absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text);

// --timeout: a positive number of seconds or a duration ("2.5", "1m").
absl::StatusOr<absl::Duration> ParseTimeout(absl::string_view text);

// A switch's value: true, yes, 1, false, no or 0 (any case).
absl::StatusOr<bool> ParseSwitch(absl::string_view text);

// A gang state name ("pending" or "GANG_STATE_PENDING", any case).
absl::StatusOr<v1::GangState> ParseGangState(absl::string_view name);

// Gang state names, each as ParseGangState; fails at the first bad one.
absl::StatusOr<std::vector<v1::GangState>> ParseGangStates(
    const std::vector<std::string>& names);

// A node state name ("cordoned" or "NODE_STATE_CORDONED", any case).
absl::StatusOr<v1::NodeState> ParseNodeState(absl::string_view name);

// An RFC3339 time, e.g. "2024-05-01T12:00:03Z".
absl::StatusOr<absl::Time> ParseRfc3339(absl::string_view text);

// --slice SIZE@LEVEL with SIZE >= 1, e.g. "18@nvl".
absl::StatusOr<SpecOptions::Slice> ParseSlice(absl::string_view text);

// --nominal MODEL=GPUS,… with GPUS >= 0.
absl::StatusOr<std::map<std::string, int64_t>> ParseNominal(
    absl::string_view text);

// Returns `text` split at commas, each piece trimmed, empty pieces dropped.
std::vector<std::string> SplitList(absl::string_view text);

// A label selector: comma-separated KEY=VALUE, KEY==VALUE, KEY!=VALUE, KEY
// or !KEY (e.g. "team=a,tier!=batch"). Fails with InvalidArgument on an
// empty selector or key.
absl::StatusOr<LabelSelector> ParseLabelSelector(absl::string_view text);

// Returns "" when `token` can be sent as "authorization: Bearer TOKEN"
// (not empty, visible ASCII only), else the problem, never quoting it.
std::string TokenProblem(absl::string_view token);

// A CLI11 validator that accepts the values `parse` accepts and rejects the
// others with its status message. `description` shows in help after the
// placeholder ("" = nothing).
template <typename Parse>
CLI::Validator Accepting(Parse parse, std::string description = "") {
  return CLI::Validator(
      [parse](std::string& text) -> std::string {
        auto parsed = parse(text);
        return parsed.ok() ? std::string()
                           : std::string(parsed.status().message());
      },
      std::move(description));
}

// An integer in [min, max] (CLI::Range underneath). Rejects with "want
// WANT, got \"TEXT\"", WANT defaulting to "an integer in [MIN, MAX]".
CLI::Validator IntegerIn(int64_t min, int64_t max, std::string want = "");

// A finite number >= 0 (CLI::NonNegativeNumber underneath).
CLI::Validator NumberAtLeastZero();

// A switch value (ParseSwitch), rewritten to "true" or "false".
CLI::Validator SwitchWord();

// One of `choices` in any case (CLI::IsMember underneath),
// rewritten to its mapped value. Rejects with "want a, b or c, got \"x\"";
// help shows "a|b|c".
CLI::Validator OneOf(const std::vector<std::pair<std::string, int>>& choices);

}  // namespace phalanx::ctl

#endif  // PHALANX_CLIENTS_CTL_FLAG_CHECKS_H_
