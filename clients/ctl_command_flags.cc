#include "clients/ctl_command_flags.h"

#include <climits>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "clients/ctl_flag_checks.h"
#include "clients/ctl_format.h"
#include "clients/ctl_history.h"

namespace phalanx::ctl {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// A flag taking one value that CLI11 converts into `*target`.
template <typename T>
CLI::Option* AddValue(CLI::App* app, const std::string& names, T* target,
                      const std::string& placeholder, const std::string& help) {
  return app->add_option(names, *target, help)
      ->type_name(placeholder)
      ->multi_option_policy(CLI::MultiOptionPolicy::Throw);
}

// A flag whose text `parse` (text → absl::StatusOr) checks, as a CLI11
// validator, and then converts into `*target`.
template <typename Target, typename Parse>
CLI::Option* AddParsed(CLI::App* app, const std::string& names, Target* target,
                       Parse parse, const std::string& placeholder,
                       const std::string& help) {
  return app
      ->add_option_function<std::string>(
          names,
          [target, parse](const std::string& text) { *target = *parse(text); },
          help)
      ->type_name(placeholder)
      ->check(Accepting(parse))
      ->multi_option_policy(CLI::MultiOptionPolicy::Throw);
}

// A switch: alone it means true; "--flag=no" and the like are accepted.
CLI::Option* AddSwitch(CLI::App* app, const std::string& names, bool* target,
                       const std::string& help) {
  return app->add_flag(names, *target, help)
      ->transform(SwitchWord())
      ->multi_option_policy(CLI::MultiOptionPolicy::Throw);
}

// A repeatable flag whose values are comma lists, appended to `*target`.
CLI::Option* AddRepeatedList(CLI::App* app, const std::string& names,
                             std::vector<std::string>* target,
                             const std::string& placeholder,
                             const std::string& help) {
  return app
      ->add_option_function<std::vector<std::string>>(
          names,
          [target](const std::vector<std::string>& values) {
            for (const std::string& value : values) {
              for (std::string& piece : SplitList(value)) {
                target->push_back(std::move(piece));
              }
            }
          },
          absl::StrCat(help, " (repeatable)"))
      ->type_name(placeholder)
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

// The spec flags of submit, dryrun and run.
void BindSpec(CLI::App* app, SpecOptions* o) {
  AddValue(app, "-f,--file", &o->file, "FILE",
           "GangSpec as proto3 JSON (\"-\" = stdin)");
  AddValue(app, "--queue", &o->queue, "Q", "queue to charge");
  AddValue(app, "--pods", &o->pods, "N", "number of pods (one pod set)")
      ->check(IntegerIn(1, kInt32Max));
  AddValue(app, "--min-pods", &o->min_pods, "M",
           "elastic: run with M..N pods (admitted at the largest size that "
           "fits, grown and shrunk while running)")
      ->check(IntegerIn(1, kInt32Max));
  AddValue(app, "--gpus", &o->gpus, "G", "GPUs per pod")
      ->check(IntegerIn(0, kInt32Max));
  AddValue(app, "--level", &o->level, "L",
           "topology level, e.g. rack (default mode: required)");
  AddValue(app, "--mode", &o->mode, "MODE", "topology mode")
      ->transform(OneOf({{"required", v1::TOPOLOGY_MODE_REQUIRED},
                         {"preferred", v1::TOPOLOGY_MODE_PREFERRED},
                         {"unconstrained", v1::TOPOLOGY_MODE_UNCONSTRAINED}}));
  AddValue(app, "--priority", &o->priority, "P",
           "higher is admitted first (default 0)")
      ->check(IntegerIn(kInt32Min, kInt32Max));
  AddValue(app, "--priority-class", &o->priority_class, "NAME",
           "a priority class of the config instead of --priority");
  AddValue(app, "--request-id", &o->request_id, "ID", "idempotency key");
  AddValue(app, "--name", &o->name, "NAME", "stored as the label name=NAME");
  AddParsed(
      app, "--models", &o->models,
      [](absl::string_view text) -> absl::StatusOr<std::vector<std::string>> {
        return SplitList(text);
      },
      "M1,M2", "acceptable GPU models, preferred first");
  AddParsed(app, "--slice", &o->slice, &ParseSlice, "SIZE@LEVEL",
            "every SIZE consecutive pods in one LEVEL domain, e.g. 18@nvl");
  AddParsed(app, "--estimated-runtime", &o->estimated_runtime, &ParseDuration,
            "DUR", "e.g. 3600s, 90m, 2h");
  AddParsed(app, "--max-runtime", &o->max_runtime, &ParseDuration, "DUR",
            "fail the gang after this run time");
}

void BindSubmit(CLI::App* app, CommandOptions* o) { BindSpec(app, &o->spec); }

void BindRun(CLI::App* app, CommandOptions* o) {
  RunOptions* run = &o->run;
  BindSpec(app, &run->spec);
  AddValue(app, "--exec", &run->exec, "TEMPLATE",
           "starts a rank: a command line with {host}, {node}, {rank} "
           "(default \"ssh -o BatchMode=yes {host}\"), or local");
  AddValue(app, "--master-port", &run->master_port, "P",
           "MASTER_PORT of every rank (default 29500)")
      ->check(IntegerIn(1, 65535, "1..65535"));
  AddParsed(app, "--lease", &run->lease, &ParseDuration, "DUR",
            "lease_duration of the gang; renewed every DUR/3");
  AddSwitch(app, "--requeue", &run->requeue,
            "after a preemption, wait for re-admission and start again "
            "(default: exit 75)");
  AddSwitch(app, "--elastic-rendezvous", &run->elastic_rendezvous,
            "elastic gang: on a resize start or stop only the added or "
            "removed ranks (torchrun --nnodes=MIN:MAX; default: restart "
            "every rank)");
  AddValue(app, "--hostfile", &run->hostfile, "FILE",
           "write the hostfile here (default: a temporary file)");
  AddValue(app, "--workdir", &run->workdir, "DIR",
           "ranks start in DIR (default: the current directory; over ssh, "
           "the same path on each host)");
}

// -l/--label SELECTOR.
void BindLabelSelector(CLI::App* app, LabelSelector* selector,
                       const std::string& help) {
  AddParsed(app, "-l,--label", selector, &ParseLabelSelector, "SELECTOR",
            absl::StrCat(help, ", e.g. team=a,tier!=batch (also KEY, !KEY)"));
}

void BindList(CLI::App* app, CommandOptions* o) {
  ListOptions* list = &o->list;
  AddValue(app, "--queue", &list->queue, "Q", "only this queue");
  AddParsed(
      app, "--state", &list->states,
      [](absl::string_view text) { return ParseGangStates(SplitList(text)); },
      "S1,S2", "only these states, e.g. pending,admitted");
  AddValue(app, "--limit", &list->limit, "N", "at most N gangs (default: all)")
      ->check(IntegerIn(1, kInt64Max));
  AddValue(app, "--owner", &list->owner, "NAME",
           "only gangs this principal submitted");
  BindLabelSelector(app, &list->labels, "only gangs whose labels match");
  AddSwitch(app, "--no-headers", &list->no_headers,
            "leave out the table's header line");
}

void BindReason(CLI::App* app, std::string* reason) {
  AddValue(app, "--reason", reason, "R", "why (kept by the server)");
}

void BindCancel(CLI::App* app, CommandOptions* o) {
  BindReason(app, &o->cancel.reason);
  BindLabelSelector(app, &o->cancel.labels,
                    "cancel every gang not yet finished whose labels match");
}

void BindWatch(CLI::App* app, CommandOptions* o) {
  WatchOptions* watch = &o->watch;
  AddValue(app, "--after,--after-revision", &watch->after_revision, "REV",
           "replay events after this revision (not one in the future) "
           "(also --after-revision)")
      ->check(IntegerIn(0, kInt64Max));
  AddRepeatedList(app, "--queue", &watch->queues, "Q",
                  "only gangs of this queue");
  AddRepeatedList(app, "--gang", &watch->gangs, "ID", "only this gang");
}

// --checkpoint: "now" or an RFC3339 time.
absl::StatusOr<std::variant<ReportOptions::Now, absl::Time>> ParseCheckpoint(
    absl::string_view text) {
  if (absl::AsciiStrToLower(text) == "now") return ReportOptions::Now{};
  absl::StatusOr<absl::Time> time = ParseRfc3339(text);
  if (!time.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "want now or an RFC3339 time, got \"%s\"", SafeCell(text)));
  }
  return *time;
}

void BindReport(CLI::App* app, CommandOptions* o) {
  ReportOptions* report = &o->report;
  AddValue(app, "--state", &report->state, "STATE", "the gang's new state")
      ->transform(OneOf({{"running", v1::GANG_STATE_RUNNING},
                         {"succeeded", v1::GANG_STATE_SUCCEEDED},
                         {"failed", v1::GANG_STATE_FAILED}}));
  AddParsed(app, "--checkpoint", &report->checkpoint, &ParseCheckpoint, "TIME",
            "last checkpoint: now or RFC3339");
  AddSwitch(app, "--ack-preemption", &report->ack_preemption,
            "the preempted pods have stopped");
  AddValue(app, "--message", &report->message, "M", "free-form message");
}

void BindNodesList(CLI::App* app, CommandOptions* o) {
  AddParsed(app, "--state", &o->nodes_list.state, &ParseNodeState, "S",
            "ready|cordoned|draining|unhealthy");
  AddValue(app, "--model", &o->nodes_list.model, "M", "only this GPU model");
}

void BindRequiredFile(CLI::App* app, std::string* file) {
  AddValue(app, "-f,--file", file, "FILE", "proto3 JSON input (\"-\" = stdin)")
      ->required();
}

void BindNodesUpsert(CLI::App* app, CommandOptions* o) {
  BindRequiredFile(app, &o->file.file);
}

// --deadline: an RFC3339 time, or a duration from now.
absl::StatusOr<std::variant<absl::Duration, absl::Time>> ParseDeadline(
    absl::string_view text) {
  if (absl::StatusOr<absl::Time> time = ParseRfc3339(text); time.ok()) {
    return *time;
  }
  absl::StatusOr<absl::Duration> after = ParseDuration(text);
  if (!after.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "want a duration such as 90m or an RFC3339 time, got \"%s\"",
        SafeCell(text)));
  }
  return *after;
}

void BindDrain(CLI::App* app, CommandOptions* o) {
  BindReason(app, &o->node_state.reason);
  AddParsed(app, "--deadline", &o->node_state.deadline, &ParseDeadline, "WHEN",
            "from now (90m) or an RFC3339 time");
}

void BindNodeVerb(CLI::App* app, CommandOptions* o) {
  BindReason(app, &o->node_state.reason);
}

void BindQueuesPut(CLI::App* app, CommandOptions* o) {
  QueuePutOptions* put = &o->queue_put;
  AddValue(app, "-f,--file", &put->file, "FILE",
           "proto3 JSON input (\"-\" = stdin)");
  AddValue(app, "--name", &put->name, "Q", "queue name");
  AddValue(app, "--parent", &put->parent, "P", "parent queue or cohort");
  AddValue(app, "--weight", &put->weight, "W", "fair-share weight (default 1)")
      ->check(NumberAtLeastZero());
  AddParsed(app, "--nominal", &put->nominal, &ParseNominal, "M=N,...",
            "guaranteed GPUs per model, e.g. H100=64");
  AddValue(app, "--held", &put->held, "true|false", "admit nothing new")
      ->transform(SwitchWord());
  AddValue(app, "--borrowing-limit", &put->borrowing_limit, "N",
           "GPUs above nominal (-1 = unlimited)")
      ->check(IntegerIn(-1, kInt64Max));
  AddValue(app, "--lending-limit", &put->lending_limit, "N",
           "idle nominal GPUs lent (-1 = unlimited)")
      ->check(IntegerIn(-1, kInt64Max));
  AddValue(app, "--max-priority", &put->max_priority, "N",
           "highest priority its gangs may have (default: no limit)")
      ->check(IntegerIn(kInt32Min, kInt32Max));
}

void BindQueuesSet(CLI::App* app, CommandOptions* o) {
  QueueSetOptions* set = &o->queue_set;
  AddSwitch(app, "--held", &set->held, "admit nothing new");
  AddSwitch(app, "--no-held", &set->no_held, "admit again");
  AddValue(app, "--weight", &set->weight, "W",
           "fair-share weight (0 = after all others)")
      ->check(NumberAtLeastZero());
}

void BindConfigSet(CLI::App* app, CommandOptions* o) {
  BindRequiredFile(app, &o->config_set.file);
  AddValue(app, "--expected-version", &o->config_set.expected_version, "V",
           "fail with ABORTED unless current")
      ->check(IntegerIn(0, kInt64Max));
  AddParsed(
      app, "--update-mask", &o->config_set.update_mask,
      [](absl::string_view text) -> absl::StatusOr<std::vector<std::string>> {
        return SplitList(text);
      },
      "PATHS", "change only these fields, e.g. preemption.enabled,limits");
  AddSwitch(app, "--merge", &o->config_set.merge,
            "change only the fields the file names");
}

void BindDeclare(CLI::App* app, CommandOptions* o) {
  AddValue(app, "-f,--file", &o->declare.file, "FILE|DIR",
           "a config, fleet or queues file (proto3 JSON), or a directory of "
           "them (*.json)")
      ->required();
  AddValue(app, "--expected-version", &o->declare.expected_version, "V",
           "fail with ABORTED unless the config in force has version V")
      ->check(IntegerIn(0, kInt64Max));
}

void BindAudit(CLI::App* app, CommandOptions* o) {
  AuditOptions* audit = &o->audit;
  AddValue(app, "--page-size", &audit->page_size, "N",
           "records per call, 1-1000 (default: the server's; 1000 with --all)")
      ->check(IntegerIn(1, 1000));
  AddValue(app, "--page-token", &audit->page_token, "T",
           "start at this next_page_token");
  AddSwitch(app, "--all", &audit->all,
            "follow next_page_token to the last record");
}

void BindHistoryExport(CLI::App* app, CommandOptions* o) {
  AddParsed(app, "--since", &o->history.since, &ParseSince, "WHEN",
            "gangs submitted since: how long ago (7d, 36h) or an RFC3339 "
            "time (default: all the daemon retains)");
  AddSwitch(app, "--include-labels", &o->history.include_labels,
            "add each gang's labels (a labels column; with -o json also its "
            "last message)");
}

void BindNothing(CLI::App* /*app*/, CommandOptions* /*options*/) {}

using Binder = void (*)(CLI::App*, CommandOptions*);

// The flags of the command at `path`.
Binder BinderFor(absl::string_view path) {
  static const auto* binders = new std::map<std::string, Binder, std::less<>>{
      {"submit", &BindSubmit},
      {"dryrun", &BindSubmit},
      {"run", &BindRun},
      {"list", &BindList},
      {"cancel", &BindCancel},
      {"watch", &BindWatch},
      {"report", &BindReport},
      {"nodes list", &BindNodesList},
      {"nodes upsert", &BindNodesUpsert},
      {"nodes cordon", &BindNodeVerb},
      {"nodes drain", &BindDrain},
      {"nodes uncordon", &BindNodeVerb},
      {"nodes unhealthy", &BindNodeVerb},
      {"queues put", &BindQueuesPut},
      {"queues set", &BindQueuesSet},
      {"config set", &BindConfigSet},
      {"diff", &BindDeclare},
      {"apply", &BindDeclare},
      {"audit", &BindAudit},
      {"history export", &BindHistoryExport},
  };
  auto it = binders->find(path);
  return it == binders->end() ? &BindNothing : it->second;
}

// Records that `option` may not be given an empty value.
CLI::Option* NotEmpty(GlobalFlags* flags, CLI::Option* option,
                      const std::string* value) {
  flags->not_empty.push_back({option, value});
  return option;
}

void BindConnectionFiles(CLI::App* root, ConnectionOptions* c,
                         GlobalFlags* flags) {
  NotEmpty(flags,
           AddValue(root, "--token-file", &c->token_file, "FILE",
                    "read the bearer token from FILE (a trailing newline is "
                    "dropped)"),
           &c->token_file);
  NotEmpty(flags,
           AddValue(root, "--tls-ca", &c->tls_ca_file, "FILE",
                    "PEM roots that verify the server; turns TLS on "
                    "(default: plain text)"),
           &c->tls_ca_file);
  NotEmpty(flags,
           AddValue(root, "--tls-cert", &c->tls_cert_file, "FILE",
                    "client certificate (PEM) for mutual TLS"),
           &c->tls_cert_file);
  NotEmpty(flags,
           AddValue(root, "--tls-key", &c->tls_key_file, "FILE",
                    "private key (PEM) of --tls-cert"),
           &c->tls_key_file);
  NotEmpty(flags,
           AddValue(root, "--tls-server-name", &c->tls_server_name, "NAME",
                    "name checked in the server's certificate (default: "
                    "--server's host)"),
           &c->tls_server_name);
}

}  // namespace

GlobalFlags BindGlobalFlags(CLI::App* root, GlobalOptions* global_options) {
  GlobalFlags flags;
  GlobalOptions& global = *global_options;
  ConnectionOptions& c = global.connection;
  NotEmpty(&flags,
           AddValue(root, "--server", &c.server, "HOST:PORT",
                    "daemon address (default $PHALANX_SERVER, else "
                    "127.0.0.1:50051)"),
           &c.server);
  AddValue(root, "-o,--output", &global.output, "FORMAT",
           "output format (default table)")
      ->transform(OneOf({{"table", static_cast<int>(OutputFormat::kTable)},
                         {"json", static_cast<int>(OutputFormat::kJson)},
                         {"yaml", static_cast<int>(OutputFormat::kYaml)},
                         {"wide", static_cast<int>(OutputFormat::kWide)},
                         {"csv", static_cast<int>(OutputFormat::kCsv)}}));
  AddParsed(root, "--timeout", &global.timeout, &ParseTimeout, "SECONDS",
            "deadline of each call (default 10; not watch)");
  flags.token =
      AddValue(root, "--token", &c.token, "TOKEN",
               "bearer token sent with every call (default "
               "$PHALANX_TOKEN; shows in ps: prefer --token-file)")
          ->check(CLI::Validator(
              [](std::string& token) { return TokenProblem(token); }, ""));
  BindConnectionFiles(root, &c, &flags);
  NotEmpty(&flags,
           AddValue(root, "--context", &global.context, "NAME",
                    "use this context of the client config file (default: "
                    "its currentContext)"),
           &global.context);
  AddSwitch(root, "--insecure", &c.insecure,
            "allow sending a token in plain text to a server off loopback");
  AddValue(root, "--max-message-bytes", &c.max_message_bytes, "N",
           "largest reply accepted (default 4194304, as the daemon's)")
      ->check(IntegerIn(
          1, INT_MAX,
          absl::StrCat("a positive number of bytes up to ", INT_MAX)));
  // A global flag may be repeated (a wrapper script's flags, then the
  // user's): every value is checked, the last one wins.
  for (CLI::Option* option : root->get_options()) {
    option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
  return flags;
}

void BindCommandFlags(absl::string_view path, CLI::App* app,
                      CommandOptions* options) {
  BinderFor(path)(app, options);
}

}  // namespace phalanx::ctl
