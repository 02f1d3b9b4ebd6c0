#include "clients/ctl_flag_checks.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "clients/ctl_format.h"

namespace phalanx::ctl {
namespace {

absl::Status Want(absl::string_view what, absl::string_view text) {
  return absl::InvalidArgumentError(
      absl::StrFormat("want %s, got \"%s\"", what, SafeCell(text)));
}

// Parses "NAME" or "PREFIX_NAME" (any case) with the enum's Parse function;
// the zero value (UNSPECIFIED) is not a state.
template <typename Enum, typename ParseFn>
absl::StatusOr<Enum> ParseEnumName(absl::string_view text,
                                   absl::string_view prefix, ParseFn parse) {
  std::string upper = absl::AsciiStrToUpper(text);
  if (!absl::StartsWith(upper, prefix)) upper = absl::StrCat(prefix, upper);
  Enum value{};
  if (!parse(upper, &value) || static_cast<int>(value) == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown state \"%s\"", SafeCell(text)));
  }
  return value;
}

// "a, b or c".
std::string Alternatives(const std::vector<std::string>& names) {
  if (names.size() < 2) return absl::StrJoin(names, "");
  return absl::StrCat(absl::StrJoin(names.begin(), names.end() - 1, ", "),
                      " or ", names.back());
}

}  // namespace

absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text) {
  absl::Duration duration = absl::ZeroDuration();
  double seconds = 0;
  if (absl::SimpleAtod(text, &seconds)) {
    if (std::isfinite(seconds)) duration = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(text, &duration)) {
    duration = absl::ZeroDuration();
  }
  if (duration <= absl::ZeroDuration() ||
      duration == absl::InfiniteDuration()) {
    return Want("a positive duration such as 3600s or 90m", text);
  }
  return duration;
}

absl::StatusOr<absl::Duration> ParseTimeout(absl::string_view text) {
  absl::StatusOr<absl::Duration> timeout = ParseDuration(text);
  if (!timeout.ok()) return Want("a positive number of seconds", text);
  return timeout;
}

absl::StatusOr<bool> ParseSwitch(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "true" || lower == "yes" || lower == "1") return true;
  if (lower == "false" || lower == "no" || lower == "0") return false;
  return Want("true or false", text);
}

absl::StatusOr<v1::GangState> ParseGangState(absl::string_view name) {
  return ParseEnumName<v1::GangState>(name, "GANG_STATE_",
                                      &v1::GangState_Parse);
}

absl::StatusOr<std::vector<v1::GangState>> ParseGangStates(
    const std::vector<std::string>& names) {
  std::vector<v1::GangState> states;
  for (const std::string& name : names) {
    absl::StatusOr<v1::GangState> state = ParseGangState(name);
    if (!state.ok()) return state.status();
    states.push_back(*state);
  }
  return states;
}

absl::StatusOr<v1::NodeState> ParseNodeState(absl::string_view name) {
  return ParseEnumName<v1::NodeState>(name, "NODE_STATE_",
                                      &v1::NodeState_Parse);
}

absl::StatusOr<absl::Time> ParseRfc3339(absl::string_view text) {
  absl::Time time;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, text, &time, &error)) {
    return Want("an RFC3339 time", text);
  }
  return time;
}

absl::StatusOr<SpecOptions::Slice> ParseSlice(absl::string_view text) {
  const std::vector<std::string> parts = absl::StrSplit(text, '@');
  SpecOptions::Slice slice;
  if (parts.size() != 2 || parts[1].empty() ||
      !absl::SimpleAtoi(parts[0], &slice.size) || slice.size < 1) {
    return Want("SIZE@LEVEL with SIZE >= 1, e.g. 18@nvl", text);
  }
  slice.level = parts[1];
  return slice;
}

absl::StatusOr<std::map<std::string, int64_t>> ParseNominal(
    absl::string_view text) {
  std::map<std::string, int64_t> out;
  for (const std::string& item : SplitList(text)) {
    std::vector<std::string> parts = absl::StrSplit(item, '=');
    int64_t gpus = 0;
    if (parts.size() != 2 || parts[0].empty() ||
        !absl::SimpleAtoi(parts[1], &gpus) || gpus < 0) {
      return Want("MODEL=GPUS", item);
    }
    out[parts[0]] = gpus;
  }
  return out;
}

std::vector<std::string> SplitList(absl::string_view text) {
  std::vector<std::string> out;
  for (absl::string_view piece : absl::StrSplit(text, ',')) {
    piece = absl::StripAsciiWhitespace(piece);
    if (!piece.empty()) out.emplace_back(piece);
  }
  return out;
}

absl::StatusOr<LabelSelector> ParseLabelSelector(absl::string_view text) {
  LabelSelector selector;
  for (const std::string& piece : SplitList(text)) {
    LabelRequirement requirement;
    absl::string_view key = piece;
    if (const size_t at = piece.find("!="); at != std::string::npos) {
      requirement.op = LabelRequirement::Op::kNotEquals;
      key = absl::string_view(piece).substr(0, at);
      requirement.value = piece.substr(at + 2);
    } else if (const size_t eq = piece.find('='); eq != std::string::npos) {
      requirement.op = LabelRequirement::Op::kEquals;
      key = absl::string_view(piece).substr(0, eq);
      absl::string_view value = absl::string_view(piece).substr(eq + 1);
      absl::ConsumePrefix(&value, "=");
      requirement.value = std::string(value);
    } else if (absl::ConsumePrefix(&key, "!")) {
      requirement.op = LabelRequirement::Op::kNotExists;
    } else {
      requirement.op = LabelRequirement::Op::kExists;
    }
    requirement.key = std::string(absl::StripAsciiWhitespace(key));
    requirement.value =
        std::string(absl::StripAsciiWhitespace(requirement.value));
    if (requirement.key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("want KEY=VALUE, KEY!=VALUE, KEY or !KEY, got \"%s\"",
                          SafeCell(piece)));
    }
    selector.push_back(std::move(requirement));
  }
  if (selector.empty()) {
    return absl::InvalidArgumentError("empty label selector");
  }
  return selector;
}

std::string TokenProblem(absl::string_view token) {
  if (token.empty()) return "empty token";
  for (char c : token) {
    if (c < 0x21 || c > 0x7e) {
      return "the token may hold only visible ASCII characters (not shown)";
    }
  }
  return "";
}

CLI::Validator IntegerIn(int64_t min, int64_t max, std::string want) {
  if (want.empty()) want = absl::StrFormat("an integer in [%d, %d]", min, max);
  const CLI::Validator range = CLI::Range(min, max);
  return CLI::Validator(
      [range, want](std::string& text) -> std::string {
        std::string copy = text;
        if (range(copy).empty()) return "";
        return std::string(Want(want, text).message());
      },
      "");
}

CLI::Validator NumberAtLeastZero() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::string copy = text;
        double value = 0;
        if (CLI::NonNegativeNumber(copy).empty() &&
            absl::SimpleAtod(text, &value) && std::isfinite(value)) {
          return "";
        }
        return std::string(Want("a number >= 0", text).message());
      },
      "");
}

CLI::Validator SwitchWord() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        absl::StatusOr<bool> on = ParseSwitch(text);
        if (!on.ok()) return std::string(on.status().message());
        text = *on ? "true" : "false";
        return "";
      },
      "");
}

CLI::Validator OneOf(const std::vector<std::pair<std::string, int>>& choices) {
  std::vector<std::string> names;
  std::map<std::string, int> values;
  for (const auto& [name, value] : choices) {
    names.push_back(name);
    values[name] = value;
  }
  const CLI::Validator member = CLI::IsMember(names, CLI::ignore_case);
  const std::string want = Alternatives(names);
  return CLI::Validator(
      [member, values, want](std::string& text) -> std::string {
        std::string name = text;  // IsMember rewrites it to the member
        if (!member(name).empty()) {
          return std::string(Want(want, text).message());
        }
        text = absl::StrCat(values.at(name));
        return "";
      },
      absl::StrJoin(names, "|"));
}

}  // namespace phalanx::ctl
