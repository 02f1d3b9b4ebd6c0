#include "clients/ctl_args.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "clients/ctl_command_flags.h"
#include "clients/ctl_contexts.h"
#include "clients/ctl_flag_checks.h"
#include "clients/ctl_format.h"

namespace phalanx::ctl {
namespace {

// max_args of a command that takes any number of arguments.
constexpr int kManyArgs = 1 << 20;
constexpr char kGlobalGroup[] = "Global flags";
constexpr char kCommandGroup[] = "Flags";

std::vector<CommandDef> BuildCommandTable() {
  return {
      {"submit", "submit (-f SPEC.json | --queue Q --pods N --gpus G [flags])",
       "submit a gang", 0, 0},
      {"run",
       "run (-f SPEC.json | --queue Q --pods N --gpus G [flags]) "
       "[--exec TEMPLATE|local] [--master-port P] [--lease DUR] [--requeue] "
       "-- COMMAND [ARG]...",
       "submit a gang, run COMMAND once per pod, report how it ends", 1,
       kManyArgs},
      {"get", "get ID", "show a gang and its placement", 1, 1},
      {"list",
       "list [--queue Q] [--state S1,S2] [--owner NAME] [-l SELECTOR] "
       "[--limit N] [--no-headers]",
       "list gangs", 0, 0},
      {"cancel", "cancel (ID... | -l SELECTOR) [--reason R]",
       "cancel gangs, by id or by label", 0, kManyArgs},
      {"watch", "watch [--after REV] [--queue Q]... [--gang ID]...",
       "stream gang events until Ctrl-C or the stream ends", 0, 0},
      {"report",
       "report ID [--state running|succeeded|failed] [--checkpoint "
       "now|RFC3339] [--ack-preemption] [--message M]",
       "report a gang's progress (launchers)", 1, 1},
      {"explain", "explain ID", "why a gang is pending, and its place in line",
       1, 1},
      {"dryrun", "dryrun (-f SPEC.json | --queue Q --pods N --gpus G [flags])",
       "where a spec would be placed now (nothing is stored)", 0, 0},
      {"nodes list", "nodes list [--state S] [--model M]",
       "list nodes and their usage", 0, 0},
      {"nodes upsert", "nodes upsert -f FLEET.json",
       "add or update nodes (JSON of UpsertNodesRequest)", 0, 0},
      {"nodes cordon", "nodes cordon NODE [--reason R]",
       "admit nothing new on a node", 1, 1},
      {"nodes drain",
       "nodes drain NODE [--reason R] [--deadline DURATION|RFC3339]",
       "cordon a node and report it as leaving; at the deadline its gangs "
       "are moved off (repaired elsewhere or evicted)",
       1, 1},
      {"nodes uncordon", "nodes uncordon NODE [--reason R]",
       "make a node READY again", 1, 1},
      {"nodes unhealthy", "nodes unhealthy NODE [--reason R]",
       "mark a node broken (its gangs are repaired or evicted)", 1, 1},
      {"nodes remove", "nodes remove NODE", "remove a node that holds no gang",
       1, 1},
      {"topology", "topology", "free capacity and fragmentation per domain", 0,
       0},
      {"queues list", "queues list", "list queues and their usage", 0, 0},
      {"queues put", "queues put (-f QUEUE.json | --name Q [flags])",
       "create or replace a queue", 0, 0},
      {"queues set", "queues set NAME [--held|--no-held] [--weight W]",
       "change only the given fields of an existing queue", 1, 1},
      {"queues delete", "queues delete NAME", "delete a queue without gangs", 1,
       1},
      {"config get", "config get", "print the configuration (JSON)", 0, 0},
      {"config set",
       "config set -f CONFIG.json [--expected-version V] "
       "[--update-mask PATHS | --merge]",
       "replace the configuration, or only some of its fields", 0, 0},
      {"diff", "diff -f FILE|DIR [--expected-version V]",
       "what apply would change: config, fleet and queues files against "
       "the daemon",
       0, 0},
      {"apply", "apply -f FILE|DIR [--expected-version V]",
       "make the daemon's config, nodes and queues say what the files say "
       "(only the fields that differ)",
       0, 0},
      {"audit", "audit [--page-size N] [--page-token T] [--all]",
       "list audit records, oldest first (admins)", 0, 0},
      {"history export",
       "history export [--since 7d|RFC3339] [-o csv|json] [--include-labels]",
       "write the retained gangs as a trace phalanx-sim replays: CSV, or "
       "JSON lines (admins)",
       0, 0},
      {"backup", "backup DIR",
       "write a consistent copy of the store to DIR, an absolute path on "
       "the daemon's machine that does not exist or is empty (admins)",
       1, 1},
  };
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

constexpr char kExitCodesHelp[] =
    "Exit codes:\n"
    "  0  success\n"
    "  1  the server returned an error, printed as \"phalanxctl: CODE: "
    "message\"\n"
    "  2  usage error: bad command, flag, argument, input file, or token or\n"
    "     TLS file\n"
    "  3  the server could not be reached (UNAVAILABLE)\n";

// Help as CLI11 formats it, with phalanxctl's usage lines ("usage:
// phalanxctl nodes cordon NODE [--reason R]").
class HelpFormatter : public CLI::Formatter {
 public:
  void SetCommand(const CLI::App* app, const CommandDef* command) {
    commands_[app] = command;
  }
  std::string make_usage(const CLI::App* app,
                         std::string /*name*/) const override {
    auto it = commands_.find(app);
    return UsageLine(it == commands_.end() ? nullptr : it->second) + "\n";
  }

 private:
  std::map<const CLI::App*, const CommandDef*> commands_;
};

// The command list, exit codes and a pointer to each command's help: the
// footer of the global help.
std::string CommandsFooter() {
  std::string out = "Commands:\n";
  for (const CommandDef& command : CommandTable()) {
    absl::StrAppend(
        &out, absl::StrFormat("  %-18s %s\n", command.path, command.summary));
  }
  absl::StrAppend(&out, "\n", kExitCodesHelp,
                  "\nRun \"phalanxctl COMMAND --help\" for its flags.");
  return out;
}

// The command line of phalanxctl as a tree of CLI11 apps: the command table
// becomes subcommands ("nodes" → "cordon"), each command's flags bound to its
// member of CommandOptions, the global flags options of the root that every
// subcommand lets fall through (so they go anywhere). CLI11 finds the
// command, splits flags from values, checks and converts every value; this
// class adds the checks across flags and phrases the usage errors.
class CommandLine {
 public:
  CommandLine(const Environment& env, const ConfigFile& config_file)
      : env_token_(env.token), env_(env), config_file_(config_file) {
    if (!env.server.empty()) inv_.global.connection.server = env.server;
    Declare();
  }
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  Invocation Parse(const std::vector<std::string>& argv) && {
    inv_.error = ParseAndCheck(argv);
    return std::move(inv_);
  }

  // The help of `command`, or the global help when it is null.
  std::string Help(const CommandDef* command) const {
    if (command == nullptr) return root_.help();
    for (const auto& [app, leaf] : leaves_) {
      if (leaf.command == command) return app->help();
    }
    return root_.help();
  }

 private:
  struct Leaf {
    const CommandDef* command;
    CLI::Option* args;
  };

  void Declare() {
    root_.formatter(formatter_);
    root_.set_help_flag("-h,--help", "show help");
    root_.allow_extras();  // unknown tokens are phrased below
    root_.option_defaults()->group(kGlobalGroup);
    root_.get_help_ptr()->group(kGlobalGroup);
    global_flags_ = BindGlobalFlags(&root_, &inv_.global);
    root_.option_defaults()->group(kCommandGroup);
    std::map<std::string, CLI::App*> apps;  // by path prefix
    for (const CommandDef& command : CommandTable()) {
      CLI::App* app = &root_;
      std::string path;
      for (absl::string_view word : absl::StrSplit(command.path, ' ')) {
        path = path.empty() ? std::string(word) : absl::StrCat(path, " ", word);
        CLI::App*& sub = apps[path];
        if (sub == nullptr) sub = AddApp(app, word, command.summary, path);
        app = sub;
      }
      DeclareCommand(app, command);
    }
    root_.footer(CommandsFooter());  // set last: subcommands copy the footer
  }

  CLI::App* AddApp(CLI::App* parent, absl::string_view word,
                   absl::string_view summary, const std::string& path) {
    CLI::App* sub =
        parent->add_subcommand(std::string(word), std::string(summary));
    sub->group("");  // the global help lists commands in its footer
    sub->fallthrough();
    sub->allow_extras();
    sub->get_help_ptr()->group(kCommandGroup);
    groups_[sub] = path;
    all_apps_.push_back(sub);
    return sub;
  }

  void DeclareCommand(CLI::App* app, const CommandDef& command) {
    Leaf& leaf = leaves_[app];
    leaf.command = &command;
    leaf.args = app->add_option("args")
                    ->expected(1, kManyArgs)
                    ->allow_extra_args()
                    ->group("")
                    ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    BindCommandFlags(command.path, app, &inv_.options);
    formatter_->SetCommand(app, &command);
    app->footer([this] { return CommandFooter(); });
  }

  // A command's help ends with the global flags (but -h, which it has too)
  // and the exit codes.
  std::string CommandFooter() const {
    const CLI::Option* help = root_.get_help_ptr();
    const std::string globals = formatter_->make_group(
        kGlobalGroup, false,
        root_.get_options([help](const CLI::Option* option) {
          return option->get_group() == kGlobalGroup && option != help;
        }));
    return absl::StrCat(absl::StripPrefix(globals, "\n"), "\n", kExitCodesHelp);
  }

  absl::Status ParseAndCheck(const std::vector<std::string>& argv) {
    argv_ = NormalizeArgv(argv);
    std::vector<std::string> reversed(argv_.rbegin(), argv_.rend());
    std::string parse_error;
    try {
      root_.parse(reversed);
    } catch (const CLI::ParseError& error) {
      parse_error = PhraseParseError(error);
    }
    const Leaf* leaf = FindLeaf();
    if (leaf != nullptr) inv_.command = leaf->command;
    inv_.help = HelpGiven();
    if (inv_.help) return absl::OkStatus();
    if (!parse_error.empty()) return absl::InvalidArgumentError(parse_error);
    if (absl::Status status = CheckExtras(); !status.ok()) return status;
    if (leaf == nullptr) {
      if (words_.empty()) return absl::InvalidArgumentError("missing command");
      return absl::InvalidArgumentError(absl::StrFormat(
          "\"%s\" needs a subcommand: %s", words_, Subcommands(words_)));
    }
    inv_.args = leaf->args->results();
    const std::vector<std::string> after_dash = AfterDoubleDash(argv);
    inv_.args.insert(inv_.args.end(), after_dash.begin(), after_dash.end());
    if (absl::Status status = CheckArgCount(); !status.ok()) return status;
    if (absl::Status status = CheckOutput(); !status.ok()) return status;
    for (const auto& [option, value] : global_flags_.not_empty) {
      if (option->count() > 0 && value->empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(option->get_name(), " is empty"));
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

  // Whether -h/--help was given to the root or to a command entered.
  bool HelpGiven() const {
    if (root_.get_help_ptr()->count() > 0) return true;
    return std::any_of(all_apps_.begin(), all_apps_.end(), [](CLI::App* app) {
      return app->parsed() && app->get_help_ptr()->count() > 0;
    });
  }

  // The flag CLI11 names `name` ("--queue"), on any command, or null.
  const CLI::Option* OptionNamed(const std::string& name) const {
    if (const CLI::Option* option = root_.get_option_no_throw(name)) {
      return option;
    }
    for (const CLI::App* app : all_apps_) {
      if (const CLI::Option* option = app->get_option_no_throw(name)) {
        return option;
      }
    }
    return nullptr;
  }

  std::string PhraseParseError(const CLI::ParseError& error) const {
    const std::string what = error.what();
    if (dynamic_cast<const CLI::ValidationError*>(&error) != nullptr ||
        dynamic_cast<const CLI::RequiredError*>(&error) != nullptr) {
      return what;  // "--flag: problem": the values in it are already cut
    }
    if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr) {
      const std::string name = what.substr(0, what.find(':'));
      if (const CLI::Option* option = OptionNamed(name)) {
        if (absl::StrContains(what, "At Most")) {
          return absl::StrFormat("flag %s given more than once", name);
        }
        const std::string type = option->get_type_name();
        return absl::StrFormat("flag %s needs a value (%s)", name,
                               type.substr(0, type.find(':')));
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

  // -o csv is history export's alone; history export writes CSV or JSON.
  absl::Status CheckOutput() const {
    const OutputFormat output = inv_.global.output;
    const bool history = inv_.command->path == "history export";
    if (output == OutputFormat::kCsv && !history) {
      return absl::InvalidArgumentError(
          "-o csv: only \"history export\" writes CSV");
    }
    if (history &&
        (output == OutputFormat::kYaml || output == OutputFormat::kWide)) {
      return absl::InvalidArgumentError(
          "-o: \"history export\" writes csv (the default) or json");
    }
    return absl::OkStatus();
  }

  // Settles where the token comes from and checks the connection flags
  // against each other. No message quotes the token.
  absl::Status FinishConnection() {
    if (absl::Status status = ApplyConfigFile(); !status.ok()) return status;
    ConnectionOptions& connection = inv_.global.connection;
    const bool token_flag = global_flags_.token->count() > 0;
    if (token_flag && !connection.token_file.empty()) {
      return absl::InvalidArgumentError(
          "give --token or --token-file, not both");
    }
    if (!token_flag && connection.token_file.empty() && !env_token_.empty()) {
      if (absl::Status status = CheckToken(env_token_, "$PHALANX_TOKEN");
          !status.ok()) {
        return status;
      }
      connection.token = env_token_;
    }
    if (absl::Status status = CheckTls(connection); !status.ok()) {
      return status;
    }
    const bool has_token =
        !connection.token.empty() || !connection.token_file.empty();
    if (has_token && connection.tls_ca_file.empty() && !connection.insecure &&
        !IsLoopbackTarget(connection.server)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--server %s is not loopback: the token would cross the network in "
          "plain text; give --tls-ca FILE for TLS, or --insecure to send it "
          "anyway",
          SafeCell(connection.server)));
    }
    return absl::OkStatus();
  }

  // Fills the connection flags not given (nor set by the environment) from
  // the client config file's context.
  absl::Status ApplyConfigFile() {
    const std::string& name = inv_.global.context;
    if (!config_file_.text.has_value()) {
      if (name.empty()) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrFormat(
          "--context %s: no client config file (%s)", SafeCell(name),
          config_file_.path.empty() ? "set $PHALANX_CONFIG"
                                    : SafeCell(config_file_.path)));
    }
    absl::StatusOr<ClientConfig> config = ParseClientConfig(
        *config_file_.text, config_file_.path, config_file_.home);
    if (!config.ok()) return config.status();
    absl::StatusOr<const ClientContext*> context = SelectContext(*config, name);
    if (!context.ok()) return context.status();
    if (*context == nullptr) return absl::OkStatus();
    std::set<std::string> given;
    for (const CLI::Option* option : root_.get_options()) {
      if (option->count() > 0) given.insert(option->get_name());
    }
    if (!env_.server.empty()) given.insert("--server");
    if (!env_token_.empty()) given.insert("--token");
    ApplyContext(**context, given, &inv_.global.connection);
    return absl::OkStatus();
  }

  static absl::Status CheckTls(const ConnectionOptions& connection) {
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
    return absl::OkStatus();
  }

  const std::string env_token_;  // $PHALANX_TOKEN, used unless a flag wins
  const Environment env_;
  const ConfigFile config_file_;
  Invocation inv_;  // the flags are bound to its fields
  std::shared_ptr<HelpFormatter> formatter_ = std::make_shared<HelpFormatter>();
  CLI::App root_{
      "phalanxctl: command-line client of the Phalanx gang "
      "scheduler.",
      "phalanxctl"};
  GlobalFlags global_flags_;
  std::vector<CLI::App*> all_apps_;                // every subcommand
  std::map<const CLI::App*, Leaf> leaves_;         // the commands
  std::map<const CLI::App*, std::string> groups_;  // every app by path
  std::vector<std::string> argv_;                  // up to "--"
  std::string words_;  // the path of the deepest command or group entered
};

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

Invocation ParseCommandLine(const std::vector<std::string>& argv,
                            const Environment& env,
                            const ConfigFile& config_file) {
  return CommandLine(env, config_file).Parse(argv);
}

Invocation ParseCommandLine(const std::vector<std::string>& argv,
                            const Environment& env) {
  return ParseCommandLine(argv, env, ConfigFile());
}

absl::Status CheckToken(absl::string_view token, absl::string_view source) {
  const std::string problem = TokenProblem(token);
  if (problem.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", problem));
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
  return CommandLine(Environment(), ConfigFile()).Help(nullptr);
}

std::string CommandHelp(const CommandDef& command) {
  return CommandLine(Environment(), ConfigFile()).Help(&command);
}

}  // namespace phalanx::ctl
