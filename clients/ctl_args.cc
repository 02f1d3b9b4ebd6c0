#include "clients/ctl_args.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "clients/ctl_format.h"

namespace phalanx::ctl {
namespace {

// max_args of a command that takes any number of arguments.
constexpr int kManyArgs = 1 << 20;

std::vector<FlagDef> SpecFlags() {
  return {
      {"file", 'f', "FILE", "GangSpec as proto3 JSON (\"-\" = stdin)"},
      {"queue", 0, "Q", "queue to charge"},
      {"pods", 0, "N", "number of pods (one pod set)"},
      {"gpus", 0, "G", "GPUs per pod"},
      {"level", 0, "L", "topology level, e.g. rack (default mode: required)"},
      {"mode",
       0,
       "MODE",
       "topology mode",
       false,
       false,
       "",
       {"required", "preferred", "unconstrained"}},
      {"priority", 0, "P", "higher is admitted first (default 0)"},
      {"priority-class", 0, "NAME",
       "a priority class of the config instead of --priority"},
      {"request-id", 0, "ID", "idempotency key"},
      {"name", 0, "NAME", "stored as the label name=NAME"},
      {"models", 0, "M1,M2", "acceptable GPU models, preferred first"},
      {"slice", 0, "SIZE@LEVEL",
       "every SIZE consecutive pods in one LEVEL domain, e.g. 18@nvl"},
      {"estimated-runtime", 0, "DUR", "e.g. 3600s, 90m, 2h"},
      {"max-runtime", 0, "DUR", "fail the gang after this run time"},
  };
}

// Flags of run: the spec's, then how the ranks start.
std::vector<FlagDef> RunFlags() {
  std::vector<FlagDef> flags = SpecFlags();
  flags.push_back({"exec", 0, "TEMPLATE",
                   "starts a rank: a command line with {host}, {node}, "
                   "{rank} (default \"ssh -o BatchMode=yes {host}\"), or "
                   "local"});
  flags.push_back(
      {"master-port", 0, "P", "MASTER_PORT of every rank (default 29500)"});
  flags.push_back(
      {"lease", 0, "DUR", "lease_duration of the gang; renewed every DUR/3"});
  flags.push_back({"requeue", 0, "",
                   "after a preemption, wait for re-admission and start "
                   "again (default: exit 75)"});
  flags.push_back({"hostfile", 0, "FILE",
                   "write the hostfile here (default: a temporary file)"});
  return flags;
}

FlagDef ReasonFlag() { return {"reason", 0, "R", "why (kept by the server)"}; }

std::vector<CommandDef> BuildCommandTable() {
  const FlagDef file{"file", 'f', "FILE", "proto3 JSON input (\"-\" = stdin)"};
  const FlagDef file_required{
      "file", 'f', "FILE", "proto3 JSON input (\"-\" = stdin)", false, true};
  return {
      {"submit", "submit (-f SPEC.json | --queue Q --pods N --gpus G [flags])",
       "submit a gang", 0, 0, SpecFlags()},
      {"run",
       "run (-f SPEC.json | --queue Q --pods N --gpus G [flags]) "
       "[--exec TEMPLATE|local] [--master-port P] [--lease DUR] [--requeue] "
       "-- COMMAND [ARG]...",
       "submit a gang, run COMMAND once per pod, report how it ends", 1,
       kManyArgs, RunFlags()},
      {"get", "get ID", "show a gang and its placement", 1, 1, {}},
      {"list",
       "list [--queue Q] [--state S1,S2] [--limit N]",
       "list gangs",
       0,
       0,
       {{"queue", 0, "Q", "only this queue"},
        {"state", 0, "S1,S2", "only these states, e.g. pending,admitted"},
        {"limit", 0, "N", "at most N gangs (default: all)"}}},
      {"cancel",
       "cancel ID [--reason R]",
       "cancel a gang",
       1,
       1,
       {ReasonFlag()}},
      {"watch",
       "watch [--after REV] [--queue Q]... [--gang ID]...",
       "stream gang events until Ctrl-C or the stream ends",
       0,
       0,
       {{"after", 0, "REV",
         "replay events after this revision (not one in the future)", false,
         false, "after-revision"},
        {"queue", 0, "Q", "only gangs of this queue", true},
        {"gang", 0, "ID", "only this gang", true}}},
      {"report",
       "report ID [--state running|succeeded|failed] [--checkpoint "
       "now|RFC3339] [--ack-preemption] [--message M]",
       "report a gang's progress (launchers)",
       1,
       1,
       {{"state",
         0,
         "STATE",
         "the gang's new state",
         false,
         false,
         "",
         {"running", "succeeded", "failed"}},
        {"checkpoint", 0, "TIME", "last checkpoint: now or RFC3339"},
        {"ack-preemption", 0, "", "the preempted pods have stopped"},
        {"message", 0, "M", "free-form message"}}},
      {"explain",
       "explain ID",
       "why a gang is pending, and its place in line",
       1,
       1,
       {}},
      {"dryrun", "dryrun (-f SPEC.json | --queue Q --pods N --gpus G [flags])",
       "where a spec would be placed now (nothing is stored)", 0, 0,
       SpecFlags()},
      {"nodes list",
       "nodes list [--state S] [--model M]",
       "list nodes and their usage",
       0,
       0,
       {{"state", 0, "S", "ready|cordoned|draining|unhealthy"},
        {"model", 0, "M", "only this GPU model"}}},
      {"nodes upsert",
       "nodes upsert -f FLEET.json",
       "add or update nodes (JSON of UpsertNodesRequest)",
       0,
       0,
       {file_required}},
      {"nodes cordon",
       "nodes cordon NODE [--reason R]",
       "admit nothing new on a node",
       1,
       1,
       {ReasonFlag()}},
      {"nodes drain",
       "nodes drain NODE [--reason R] [--deadline DURATION|RFC3339]",
       "cordon a node and report it as leaving; at the deadline its gangs "
       "are moved off (repaired elsewhere or evicted)",
       1,
       1,
       {ReasonFlag(),
        {"deadline", 0, "WHEN", "from now (90m) or an RFC3339 time"}}},
      {"nodes uncordon",
       "nodes uncordon NODE [--reason R]",
       "make a node READY again",
       1,
       1,
       {ReasonFlag()}},
      {"nodes unhealthy",
       "nodes unhealthy NODE [--reason R]",
       "mark a node broken (its gangs are repaired or evicted)",
       1,
       1,
       {ReasonFlag()}},
      {"nodes remove",
       "nodes remove NODE",
       "remove a node that holds no gang",
       1,
       1,
       {}},
      {"topology",
       "topology",
       "free capacity and fragmentation per domain",
       0,
       0,
       {}},
      {"queues list", "queues list", "list queues and their usage", 0, 0, {}},
      {"queues put",
       "queues put (-f QUEUE.json | --name Q [flags])",
       "create or replace a queue",
       0,
       0,
       {file,
        {"name", 0, "Q", "queue name"},
        {"parent", 0, "P", "parent queue or cohort"},
        {"weight", 0, "W", "fair-share weight (default 1)"},
        {"nominal", 0, "M=N,...", "guaranteed GPUs per model, e.g. H100=64"},
        {"held", 0, "true|false", "admit nothing new"},
        {"borrowing-limit", 0, "N", "GPUs above nominal (-1 = unlimited)"},
        {"lending-limit", 0, "N", "idle nominal GPUs lent (-1 = unlimited)"},
        {"max-priority", 0, "N",
         "highest priority its gangs may have (default: no limit)"}}},
      {"queues set",
       "queues set NAME [--held|--no-held] [--weight W]",
       "change only the given fields of an existing queue",
       1,
       1,
       {{"held", 0, "", "admit nothing new"},
        {"no-held", 0, "", "admit again"},
        {"weight", 0, "W", "fair-share weight (0 = after all others)"}}},
      {"queues delete",
       "queues delete NAME",
       "delete a queue without gangs",
       1,
       1,
       {}},
      {"config get", "config get", "print the configuration (JSON)", 0, 0, {}},
      {"config set",
       "config set -f CONFIG.json [--expected-version V]",
       "replace the configuration",
       0,
       0,
       {file_required,
        {"expected-version", 0, "V", "fail with ABORTED unless current"}}},
      {"audit",
       "audit [--page-size N] [--page-token T] [--all]",
       "list audit records, oldest first (admins)",
       0,
       0,
       {{"page-size", 0, "N",
         "records per call, 1-1000 (default: the server's; 1000 with --all)"},
        {"page-token", 0, "T", "start at this next_page_token"},
        {"all", 0, "", "follow next_page_token to the last record"}}},
      {"backup",
       "backup DIR",
       "write a consistent copy of the store to DIR, an absolute path on "
       "the daemon's machine that does not exist or is empty (admins)",
       1,
       1,
       {}},
  };
}

const std::vector<FlagDef>& GlobalFlags() {
  static const auto* flags = new std::vector<FlagDef>{
      {"server", 0, "HOST:PORT",
       "daemon address (default $PHALANX_SERVER, else 127.0.0.1:50051)"},
      {"output",
       'o',
       "FORMAT",
       "output format (default table)",
       false,
       false,
       "",
       {"table", "json", "yaml", "wide"}},
      {"timeout", 0, "SECONDS",
       "deadline of each call (default 10; not watch)"},
      {"token", 0, "TOKEN",
       "bearer token sent with every call (default $PHALANX_TOKEN; shows in "
       "ps: prefer --token-file)"},
      {"token-file", 0, "FILE",
       "read the bearer token from FILE (a trailing newline is dropped)"},
      {"tls-ca", 0, "FILE",
       "PEM roots that verify the server; turns TLS on (default: plain "
       "text)"},
      {"tls-cert", 0, "FILE", "client certificate (PEM) for mutual TLS"},
      {"tls-key", 0, "FILE", "private key (PEM) of --tls-cert"},
      {"tls-server-name", 0, "NAME",
       "name checked in the server's certificate (default: --server's host)"},
      {"insecure", 0, "",
       "allow sending a token in plain text to a server off loopback"},
      {"max-message-bytes", 0, "N",
       "largest reply accepted (default 4194304, as the daemon's)"},
      {"help", 'h', "", "show help"},
  };
  return *flags;
}

absl::StatusOr<bool> ParseBool(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "true" || lower == "yes" || lower == "1") return true;
  if (lower == "false" || lower == "no" || lower == "0") return false;
  return absl::InvalidArgumentError(
      absl::StrFormat("want true or false, got \"%s\"", text));
}

absl::StatusOr<absl::Duration> ParseTimeout(absl::string_view text) {
  double seconds = 0;
  absl::Duration timeout;
  if (absl::SimpleAtod(text, &seconds)) {
    timeout =
        std::isfinite(seconds) ? absl::Seconds(seconds) : absl::ZeroDuration();
  } else if (!absl::ParseDuration(text, &timeout)) {
    timeout = absl::ZeroDuration();
  }
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--timeout: want a positive number of seconds, got \"%s\"", text));
  }
  return timeout;
}

absl::StatusOr<int> ParseMaxMessageBytes(absl::string_view text) {
  int64_t bytes = 0;
  if (!absl::SimpleAtoi(text, &bytes) || bytes <= 0 || bytes > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--max-message-bytes: want a positive number of bytes up to %d, got "
        "\"%s\"",
        INT_MAX, SafeCell(text)));
  }
  return static_cast<int>(bytes);
}

// Whether `host` (a name or an address, IPv6 with or without brackets) is
// this machine.
bool IsLoopbackHost(absl::string_view host) {
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) {
    return false;
  }
  const std::string text(host);
  in_addr v4;
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&v6) ||
           (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
  }
  return false;
}

// The host of "host:port", "[v6]:port", "host" or a bare IPv6 address.
absl::string_view HostOf(absl::string_view address) {
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    return close == absl::string_view::npos ? address
                                            : address.substr(0, close + 1);
  }
  const size_t colon = address.find(':');
  if (colon == absl::string_view::npos || address.rfind(':') != colon) {
    return address;  // no port, or a bare IPv6 address
  }
  return address.substr(0, colon);
}

// Subcommands of the group `prefix`, e.g. "list, upsert, ...".
std::string Subcommands(absl::string_view prefix) {
  std::vector<std::string> names;
  const std::string start = absl::StrCat(prefix, " ");
  for (const CommandDef& command : CommandTable()) {
    if (absl::StartsWith(command.path, start)) {
      names.emplace_back(command.path.substr(start.size()));
    }
  }
  return absl::StrJoin(names, ", ");
}

// argv as CLI11 reads it, up to "--" (what follows is positional, kept
// apart: CLI11 would hand it back to a parent command's flags). CLI11 takes
// neither "-o=json" nor an empty inline value ("--token="), both of which
// phalanxctl accepts: each becomes two tokens.
std::vector<std::string> NormalizeArgv(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  for (const std::string& token : argv) {
    if (token == "--") break;
    if (token.size() > 2 && token[0] == '-' && token[1] != '-' &&
        token[2] == '=') {
      out.push_back(token.substr(0, 2));
      out.push_back(token.substr(3));
    } else if (absl::StartsWith(token, "--") && token.size() > 3 &&
               token.find('=') == token.size() - 1) {
      out.push_back(token.substr(0, token.size() - 1));
      out.emplace_back();
    } else {
      out.push_back(token);
    }
  }
  return out;
}

// What follows the first "--" of argv.
std::vector<std::string> AfterDoubleDash(const std::vector<std::string>& argv) {
  auto it = std::find(argv.begin(), argv.end(), "--");
  return it == argv.end() ? std::vector<std::string>()
                          : std::vector<std::string>(it + 1, argv.end());
}

bool IsSwitch(const FlagDef& flag) { return flag.value.empty(); }

// "--output, -o" as CLI11 names it: "-o,--output,--alias".
std::string CliNames(const FlagDef& flag) {
  std::string names = absl::StrCat("--", flag.name);
  if (flag.short_name != 0) {
    names = absl::StrCat("-", std::string(1, flag.short_name), ",", names);
  }
  if (!flag.alias.empty()) absl::StrAppend(&names, ",--", flag.alias);
  return names;
}

// The check of an enum flag: one of its choices, in any case.
CLI::Validator ChoiceValidator(const FlagDef& flag) {
  std::vector<std::string> choices(flag.choices.begin(), flag.choices.end());
  // "a, b or c", as the other flag errors phrase it.
  std::string list = choices.back();
  if (choices.size() > 1) {
    list = absl::StrCat(absl::StrJoin(choices.begin(), choices.end() - 1, ", "),
                        " or ", list);
  }
  return CLI::Validator(
      [choices, list](std::string& value) -> std::string {
        for (const std::string& choice : choices) {
          if (absl::EqualsIgnoreCase(choice, value)) {
            value = choice;
            return "";
          }
        }
        return absl::StrFormat("want %s, got \"%s\"", list, SafeCell(value));
      },
      absl::StrJoin(choices, "|"));
}

// Declares `flag` on `app`. Every value is kept, in order (the parser below
// decides what a repeat means); a switch without "=VALUE" reads "true".
CLI::Option* Declare(CLI::App* app, const FlagDef& flag) {
  CLI::Option* option =
      IsSwitch(flag) ? app->add_flag(absl::StrCat(CliNames(flag), "{true}"))
                     : app->add_option(CliNames(flag))
                           ->expected(1)
                           ->type_name(std::string(flag.value));
  option->description(std::string(flag.help));
  option->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  if (!flag.choices.empty()) option->check(ChoiceValidator(flag));
  return option;
}

// Parses argv with CLI11: the command table becomes a tree of subcommands
// ("nodes" → "cordon"), each flag of the table one CLI11 option, the global
// flags options of the root that every subcommand lets fall through (so they
// go anywhere). CLI11 finds the command, splits flags from values and checks
// the enum flags; this class turns what it found into an Invocation and
// phrases the usage errors.
class Parser {
 public:
  Parser(const std::vector<std::string>& argv, const Environment& env)
      : argv_(NormalizeArgv(argv)),
        after_dash_(AfterDoubleDash(argv)),
        env_token_(env.token) {
    if (!env.server.empty()) inv_.global.connection.server = env.server;
  }

  Invocation Run() && {
    inv_.error = Parse();
    return std::move(inv_);
  }

 private:
  struct Bound {
    const FlagDef* def;
    CLI::Option* option;
  };
  struct Leaf {
    const CommandDef* command;
    CLI::Option* args;
    std::vector<Bound> flags;
  };

  void DeclareAll() {
    root_.set_help_flag();  // -h/--help is one of GlobalFlags()
    root_.allow_extras();   // unknown tokens are phrased below
    for (const FlagDef& flag : GlobalFlags()) {
      globals_.push_back({&flag, Declare(&root_, flag)});
    }
    std::map<std::string, CLI::App*> apps;  // by path prefix
    for (const CommandDef& command : CommandTable()) {
      CLI::App* app = &root_;
      std::string path;
      for (absl::string_view word : absl::StrSplit(command.path, ' ')) {
        path = path.empty() ? std::string(word) : absl::StrCat(path, " ", word);
        CLI::App*& sub = apps[path];
        if (sub == nullptr) {
          sub = app->add_subcommand(std::string(word),
                                    std::string(command.summary));
          sub->fallthrough();
          sub->allow_extras();
          groups_[sub] = path;
        }
        app = sub;
      }
      Leaf& leaf = leaves_[app];
      leaf.command = &command;
      leaf.args = app->add_option("args")
                      ->expected(1, 1 << 20)
                      ->allow_extra_args()
                      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
      for (const FlagDef& flag : command.flags) {
        leaf.flags.push_back({&flag, Declare(app, flag)});
      }
    }
  }

  absl::Status Parse() {
    DeclareAll();
    std::vector<std::string> reversed(argv_.rbegin(), argv_.rend());
    std::string parse_error;
    try {
      root_.parse(reversed);
    } catch (const CLI::ParseError& error) {
      parse_error = PhraseParseError(error);
    }
    const Leaf* leaf = FindLeaf();
    if (leaf != nullptr) inv_.command = leaf->command;
    for (const Bound& bound : globals_) {
      if (bound.def->name == "help" && bound.option->count() > 0) {
        absl::StatusOr<bool> on = ParseBool(bound.option->results().back());
        inv_.help = on.ok() && *on;
      }
    }
    if (inv_.help) return absl::OkStatus();
    if (!parse_error.empty()) return absl::InvalidArgumentError(parse_error);
    if (absl::Status status = CheckExtras(); !status.ok()) return status;
    if (leaf == nullptr) {
      if (words_.empty()) return absl::InvalidArgumentError("missing command");
      return absl::InvalidArgumentError(absl::StrFormat(
          "\"%s\" needs a subcommand: %s", words_, Subcommands(words_)));
    }
    inv_.args = leaf->args->results();
    inv_.args.insert(inv_.args.end(), after_dash_.begin(), after_dash_.end());
    for (const Bound& bound : globals_) {
      for (const std::string& value : bound.option->results()) {
        absl::StatusOr<std::string> checked = SwitchValue(*bound.def, value);
        if (!checked.ok()) return checked.status();
        if (absl::Status status = SetGlobal(*bound.def, *checked);
            !status.ok()) {
          return status;
        }
      }
    }
    for (const Bound& bound : leaf->flags) {
      if (absl::Status status = SetCommandFlag(bound); !status.ok()) {
        return status;
      }
    }
    if (absl::Status status = CheckArgCount(); !status.ok()) return status;
    for (const FlagDef& flag : inv_.command->flags) {
      if (flag.required && !inv_.flags.Has(flag.name)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("flag --%s is required", flag.name));
      }
    }
    return FinishConnection();
  }

  // The deepest command CLI11 entered; sets words_ to its path.
  const Leaf* FindLeaf() {
    const CLI::App* app = &root_;
    while (true) {
      std::vector<const CLI::App*> parsed = app->get_subcommands(
          [](const CLI::App* sub) { return sub->parsed(); });
      if (parsed.empty()) break;
      app = parsed.front();
    }
    auto group = groups_.find(app);
    if (group != groups_.end()) words_ = group->second;
    auto leaf = leaves_.find(app);
    return leaf == leaves_.end() ? nullptr : &leaf->second;
  }

  // The flag declared under `name` ("--queue", "-o"), or null.
  const FlagDef* FlagByCliName(absl::string_view name) const {
    std::vector<const std::vector<Bound>*> scopes;
    for (const auto& [app, leaf] : leaves_) scopes.push_back(&leaf.flags);
    scopes.push_back(&globals_);
    for (const std::vector<Bound>* scope : scopes) {
      for (const Bound& bound : *scope) {
        if (bound.option->check_name(std::string(name))) return bound.def;
      }
    }
    return nullptr;
  }

  std::string PhraseParseError(const CLI::ParseError& error) const {
    const std::string what = error.what();
    if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr) {
      const FlagDef* def = FlagByCliName(what.substr(0, what.find(':')));
      if (def != nullptr) {
        return absl::StrFormat("flag --%s needs a value (%s)", def->name,
                               def->value);
      }
    }
    return SafeCell(what);
  }

  // Unknown flags, and words that name no command.
  absl::Status CheckExtras() {
    const std::vector<std::string> extras = root_.remaining(true);
    for (const std::string& extra : extras) {
      if (extra.size() < 2 || extra[0] != '-') continue;
      const std::string display = extra.substr(0, extra.find('='));
      if (inv_.command == nullptr || BeforeCommand(extra)) {
        inv_.command = nullptr;
        return absl::InvalidArgumentError(absl::StrFormat(
            "unknown flag %s (command flags go after the command)", display));
      }
      return absl::InvalidArgumentError(absl::StrFormat(
          "unknown flag %s for \"%s\"", display, inv_.command->path));
    }
    if (extras.empty()) return absl::OkStatus();
    inv_.command = nullptr;
    const std::string path =
        words_.empty() ? extras.front() : absl::StrCat(words_, " ", extras[0]);
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown command \"%s\"", path));
  }

  // Whether `token` comes before the command's first word on the line.
  bool BeforeCommand(absl::string_view token) const {
    const absl::string_view first =
        inv_.command->path.substr(0, inv_.command->path.find(' '));
    for (const std::string& arg : argv_) {
      if (arg == token) return true;
      if (arg == first) return false;
    }
    return false;
  }

  // A switch's value as "true"/"false"; any other flag's as given.
  static absl::StatusOr<std::string> SwitchValue(const FlagDef& def,
                                                 const std::string& value) {
    if (!IsSwitch(def)) return value;
    absl::StatusOr<bool> on = ParseBool(value);
    if (!on.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", def.name, ": ", on.status().message()));
    }
    return std::string(*on ? "true" : "false");
  }

  absl::Status SetCommandFlag(const Bound& bound) {
    const std::vector<std::string>& values = bound.option->results();
    if (!bound.def->repeated && values.size() > 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("flag --%s given more than once", bound.def->name));
    }
    for (const std::string& value : values) {
      absl::StatusOr<std::string> checked = SwitchValue(*bound.def, value);
      if (!checked.ok()) return checked.status();
      inv_.flags.Add(bound.def->name, *checked);
    }
    return absl::OkStatus();
  }

  absl::Status SetGlobal(const FlagDef& def, const std::string& value) {
    if (def.name == "help") {
      inv_.help = value == "true";
    } else if (def.name == "server") {
      if (value.empty()) return absl::InvalidArgumentError("--server is empty");
      inv_.global.connection.server = value;
    } else if (def.name == "output") {
      const std::string format = absl::AsciiStrToLower(value);
      inv_.global.output = format == "json"   ? OutputFormat::kJson
                           : format == "yaml" ? OutputFormat::kYaml
                           : format == "wide" ? OutputFormat::kWide
                                              : OutputFormat::kTable;
    } else if (def.name == "timeout") {
      absl::StatusOr<absl::Duration> timeout = ParseTimeout(value);
      if (!timeout.ok()) return timeout.status();
      inv_.global.timeout = *timeout;
    } else {
      return SetConnectionFlag(def, value);
    }
    return absl::OkStatus();
  }

  absl::Status SetConnectionFlag(const FlagDef& def, const std::string& value) {
    ConnectionOptions& connection = inv_.global.connection;
    if (def.name == "token") {
      if (absl::Status status = CheckToken(value, "--token"); !status.ok()) {
        return status;
      }
      connection.token = value;
      token_flag_ = true;
      return absl::OkStatus();
    }
    if (def.name == "insecure") {
      connection.insecure = value == "true";
      return absl::OkStatus();
    }
    if (def.name == "max-message-bytes") {
      absl::StatusOr<int> bytes = ParseMaxMessageBytes(value);
      if (!bytes.ok()) return bytes.status();
      connection.max_message_bytes = *bytes;
      return absl::OkStatus();
    }
    std::string* target = def.name == "token-file" ? &connection.token_file
                          : def.name == "tls-ca"   ? &connection.tls_ca_file
                          : def.name == "tls-cert" ? &connection.tls_cert_file
                          : def.name == "tls-key"  ? &connection.tls_key_file
                          : def.name == "tls-server-name"
                              ? &connection.tls_server_name
                              : nullptr;
    if (target == nullptr) return absl::OkStatus();  // not a connection flag
    if (value.empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--%s is empty", def.name));
    }
    *target = value;
    return absl::OkStatus();
  }

  // Settles where the token comes from and checks the connection flags
  // against each other. No message quotes the token.
  absl::Status FinishConnection() {
    ConnectionOptions& connection = inv_.global.connection;
    if (token_flag_ && !connection.token_file.empty()) {
      return absl::InvalidArgumentError(
          "give --token or --token-file, not both");
    }
    if (!token_flag_ && connection.token_file.empty() && !env_token_.empty()) {
      if (absl::Status status = CheckToken(env_token_, "$PHALANX_TOKEN");
          !status.ok()) {
        return status;
      }
      connection.token = env_token_;
    }
    const bool tls = !connection.tls_ca_file.empty();
    if (connection.tls_cert_file.empty() != connection.tls_key_file.empty()) {
      return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
    }
    if (!tls && (!connection.tls_cert_file.empty() ||
                 !connection.tls_server_name.empty())) {
      return absl::InvalidArgumentError(absl::StrCat(
          connection.tls_cert_file.empty() ? "--tls-server-name" : "--tls-cert",
          " needs --tls-ca (the roots that verify the server)"));
    }
    if (tls && connection.insecure) {
      return absl::InvalidArgumentError(
          "--insecure contradicts --tls-ca (TLS is on)");
    }
    const bool has_token =
        !connection.token.empty() || !connection.token_file.empty();
    if (has_token && !tls && !connection.insecure &&
        !IsLoopbackTarget(connection.server)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--server %s is not loopback: the token would cross the network in "
          "plain text; give --tls-ca FILE for TLS, or --insecure to send it "
          "anyway",
          SafeCell(connection.server)));
    }
    return absl::OkStatus();
  }

  absl::Status CheckArgCount() const {
    const CommandDef& command = *inv_.command;
    const int given = static_cast<int>(inv_.args.size());
    if (given > command.max_args && command.max_args == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "\"%s\" takes no arguments, got \"%s\"", command.path, inv_.args[0]));
    }
    if (command.max_args == kManyArgs && given < command.min_args) {
      return absl::InvalidArgumentError(
          absl::StrFormat("\"%s\" needs a COMMAND (after --)", command.path));
    }
    if (given < command.min_args || given > command.max_args) {
      return absl::InvalidArgumentError(
          absl::StrFormat("\"%s\" takes %d argument(s), got %d", command.path,
                          command.max_args, given));
    }
    return absl::OkStatus();
  }

  const std::vector<std::string> argv_;        // up to "--"
  const std::vector<std::string> after_dash_;  // after "--"
  const std::string env_token_;  // $PHALANX_TOKEN, used unless a flag wins
  bool token_flag_ = false;      // --token was given
  CLI::App root_{"", "phalanxctl"};
  std::vector<Bound> globals_;
  std::map<const CLI::App*, Leaf> leaves_;         // the commands
  std::map<const CLI::App*, std::string> groups_;  // every app by path
  std::string words_;  // the path of the deepest command or group entered
  Invocation inv_;
};

// "  -f, --file FILE" padded, then the help text.
std::string FlagHelpLine(const FlagDef& flag) {
  std::string left = flag.short_name != 0
                         ? absl::StrCat("-", std::string(1, flag.short_name),
                                        ", --", flag.name)
                         : absl::StrCat("    --", flag.name);
  if (!flag.value.empty()) absl::StrAppend(&left, " ", flag.value);
  std::string help(flag.help);
  if (flag.repeated) absl::StrAppend(&help, " (repeatable)");
  if (flag.required) absl::StrAppend(&help, " (required)");
  if (!flag.choices.empty()) {
    absl::StrAppend(&help, ": ", absl::StrJoin(flag.choices, "|"));
  }
  if (!flag.alias.empty()) absl::StrAppend(&help, " (also --", flag.alias, ")");
  return absl::StrFormat("  %-30s %s\n", left, help);
}

constexpr char kExitCodesHelp[] =
    "Exit codes:\n"
    "  0  success\n"
    "  1  the server returned an error, printed as \"phalanxctl: CODE: "
    "message\"\n"
    "  2  usage error: bad command, flag, argument, input file, or token or\n"
    "     TLS file\n"
    "  3  the server could not be reached (UNAVAILABLE)\n";

}  // namespace

const std::vector<CommandDef>& CommandTable() {
  static const auto* table = new std::vector<CommandDef>(BuildCommandTable());
  return *table;
}

const CommandDef* FindCommand(absl::string_view path) {
  for (const CommandDef& command : CommandTable()) {
    if (command.path == path) return &command;
  }
  return nullptr;
}

void FlagValues::Add(absl::string_view name, absl::string_view value) {
  values_[std::string(name)].emplace_back(value);
}

bool FlagValues::Has(absl::string_view name) const {
  return values_.find(name) != values_.end();
}

std::string FlagValues::Get(absl::string_view name,
                            absl::string_view fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::string(fallback) : it->second.back();
}

std::vector<std::string> FlagValues::GetList(absl::string_view name) const {
  std::vector<std::string> out;
  auto it = values_.find(name);
  if (it == values_.end()) return out;
  for (const std::string& value : it->second) {
    for (absl::string_view piece : absl::StrSplit(value, ',')) {
      piece = absl::StripAsciiWhitespace(piece);
      if (!piece.empty()) out.emplace_back(piece);
    }
  }
  return out;
}

Invocation ParseCommandLine(const std::vector<std::string>& argv,
                            const Environment& env) {
  return Parser(argv, env).Run();
}

absl::Status CheckToken(absl::string_view token, absl::string_view source) {
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": empty token"));
  }
  for (char c : token) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(absl::StrCat(
          source,
          ": the token may hold only visible ASCII characters (not shown)"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> SplitEndpoints(absl::string_view server) {
  // A gRPC target with a scheme ("ipv4:a,b", "dns:///h:p") is one target.
  if (absl::StrContains(server, ":/") || absl::StartsWith(server, "ipv4:") ||
      absl::StartsWith(server, "ipv6:") || absl::StartsWith(server, "unix")) {
    return {std::string(server)};
  }
  std::vector<std::string> out;
  for (absl::string_view one : absl::StrSplit(server, ',', absl::SkipEmpty())) {
    out.emplace_back(one);
  }
  if (out.empty()) out.emplace_back(server);
  return out;
}

bool IsLoopbackTarget(absl::string_view server) {
  if (std::vector<std::string> list = SplitEndpoints(server); list.size() > 1) {
    return std::all_of(list.begin(), list.end(), [](const std::string& one) {
      return IsLoopbackTarget(one);
    });
  }
  if (absl::StartsWith(server, "unix:") ||
      absl::StartsWith(server, "unix-abstract:")) {
    return true;
  }
  if (absl::ConsumePrefix(&server, "ipv4:") ||
      absl::ConsumePrefix(&server, "ipv6:")) {
    bool any = false;
    for (absl::string_view address : absl::StrSplit(server, ',')) {
      if (!IsLoopbackHost(HostOf(address))) return false;
      any = true;
    }
    return any;
  }
  if (absl::ConsumePrefix(&server, "dns:") &&
      absl::ConsumePrefix(&server, "//")) {
    // dns://AUTHORITY/host:port asks that DNS server: only "dns:///" is
    // resolved locally.
    if (!absl::ConsumePrefix(&server, "/")) return false;
  }
  return IsLoopbackHost(HostOf(server));
}

std::string UsageLine(const CommandDef* command) {
  if (command == nullptr) {
    return "usage: phalanxctl [global flags] COMMAND [ARGS] [FLAGS]";
  }
  return absl::StrCat("usage: phalanxctl ", command->synopsis);
}

std::string UsageErrorText(const absl::Status& error,
                           const CommandDef* command) {
  const std::string help =
      command == nullptr
          ? "phalanxctl --help"
          : absl::StrCat("phalanxctl ", command->path, " --help");
  return absl::StrCat("phalanxctl: ", SafeText(error.message()), "\n",
                      UsageLine(command), "\nRun \"", help, "\" for more.\n");
}

std::string GlobalHelp() {
  std::string out =
      "phalanxctl: command-line client of the Phalanx gang scheduler.\n\n";
  absl::StrAppend(&out, UsageLine(nullptr), "\n\nCommands:\n");
  for (const CommandDef& command : CommandTable()) {
    absl::StrAppend(
        &out, absl::StrFormat("  %-18s %s\n", command.path, command.summary));
  }
  absl::StrAppend(&out, "\nGlobal flags (anywhere on the line):\n");
  for (const FlagDef& flag : GlobalFlags()) {
    absl::StrAppend(&out, FlagHelpLine(flag));
  }
  absl::StrAppend(&out, "\n", kExitCodesHelp,
                  "\nRun \"phalanxctl COMMAND --help\" for its flags.\n");
  return out;
}

std::string CommandHelp(const CommandDef& command) {
  std::string out =
      absl::StrCat(UsageLine(&command), "\n\n", command.summary, "\n");
  if (!command.flags.empty()) absl::StrAppend(&out, "\nFlags:\n");
  for (const FlagDef& flag : command.flags) {
    absl::StrAppend(&out, FlagHelpLine(flag));
  }
  absl::StrAppend(&out, "\nGlobal flags:\n");
  for (const FlagDef& flag : GlobalFlags()) {
    absl::StrAppend(&out, FlagHelpLine(flag));
  }
  absl::StrAppend(&out, "\n", kExitCodesHelp);
  return out;
}

}  // namespace phalanx::ctl
