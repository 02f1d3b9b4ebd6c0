// The typed options of phalanxctl: one struct per command (and per flag group
// shared by several commands), each field the checked value of one flag.
// ParseCommandLine (ctl_args.h) fills them with CLI11; the request builders
// (ctl_requests.h) and the commands read them. A std::optional field is
// empty when its flag was not given; every other field holds its default
// until its flag is given. Plain data: copyable, thread-compatible.
#ifndef PHALANX_CLIENTS_CTL_OPTIONS_H_
#define PHALANX_CLIENTS_CTL_OPTIONS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/time/time.h"
#include "phalanx/v1/types.pb.h"

namespace phalanx::ctl {

inline constexpr char kDefaultServer[] = "127.0.0.1:50051";
// The daemon's default --max-message-bytes, and so the client's.
inline constexpr int kDefaultMaxMessageBytes = 4 << 20;
inline constexpr char kDefaultExec[] = "ssh -o BatchMode=yes {host}";
inline constexpr int kDefaultMasterPort = 29500;

// -o: a table; proto3 JSON; YAML (the same fields as JSON); a table with
// more columns; CSV (history export only).
enum class OutputFormat { kTable, kJson, kYaml, kWide, kCsv };

// How to reach the daemon and what to prove to it; ctl_channel.h turns it
// into a channel. The token is a secret: nothing prints it.
struct ConnectionOptions {
  std::string server = kDefaultServer;
  std::string token;            // --token, else $PHALANX_TOKEN; "" = none
  std::string token_file;       // --token-file: read when the command runs
  std::string tls_ca_file;      // PEM roots; set = TLS, unset = plain text
  std::string tls_cert_file;    // client certificate (PEM), with the key
  std::string tls_key_file;     // its private key (PEM)
  std::string tls_server_name;  // name checked in the server's certificate
  bool insecure = false;        // allow a token in plain text off loopback
  int max_message_bytes = kDefaultMaxMessageBytes;  // largest reply accepted
};

// Flags that apply to every command.
struct GlobalOptions {
  ConnectionOptions connection;
  std::string context;  // --context: a context of the client config file
  OutputFormat output = OutputFormat::kTable;
  absl::Duration timeout = absl::Seconds(10);
};

// The spec flags of submit, dryrun and run: -f FILE, or one pod set.
struct SpecOptions {
  std::optional<std::string> file;  // -f: a GangSpec in JSON ("-" = stdin)
  std::optional<std::string> queue;
  std::optional<int32_t> pods;  // >= 1
  // --min-pods: elastic, runs with min_pods..pods pods; <= pods.
  std::optional<int32_t> min_pods;  // >= 1
  std::optional<int32_t> gpus;      // >= 0
  std::optional<std::string> level;
  std::optional<v1::TopologyMode> mode;
  std::optional<int32_t> priority;
  std::optional<std::string> priority_class;
  std::optional<std::string> request_id;
  std::optional<std::string> name;  // stored as the label name=NAME
  std::optional<std::vector<std::string>> models;  // comma list, in order
  struct Slice {
    int32_t size = 0;  // >= 1
    std::string level;
  };
  std::optional<Slice> slice;  // --slice SIZE@LEVEL
  std::optional<absl::Duration> estimated_runtime;
  std::optional<absl::Duration> max_runtime;
};

// run: the spec, then how the ranks start (COMMAND is Invocation::args).
struct RunOptions {
  SpecOptions spec;
  std::string exec = kDefaultExec;  // a template with {host}..., or "local"
  int master_port = kDefaultMasterPort;
  std::optional<absl::Duration> lease;
  bool requeue = false;
  // On a resize of an elastic gang, start or stop only the ranks added or
  // removed (torchrun's --nnodes=MIN:MAX rendezvous) instead of restarting
  // every rank.
  bool elastic_rendezvous = false;
  std::string hostfile;  // "" = a temporary file
  std::string workdir;   // where ranks start; "" = the launching directory
};

// One requirement of a label selector (-l): KEY=VALUE (also KEY==VALUE),
// KEY!=VALUE (unset counts as different), KEY (the label is set), !KEY
// (it is not).
struct LabelRequirement {
  enum class Op { kEquals, kNotEquals, kExists, kNotExists };
  std::string key;
  Op op = Op::kEquals;
  std::string value;  // kEquals and kNotEquals only
};
// A label selector: every requirement must hold; empty matches everything.
using LabelSelector = std::vector<LabelRequirement>;

// list.
struct ListOptions {
  std::string queue;  // "" = every queue
  std::vector<v1::GangState> states;
  std::optional<int64_t> limit;  // >= 1
  std::string owner;             // "" = any owner
  LabelSelector labels;          // -l/--label
  bool no_headers = false;
};

// cancel (IDs are Invocation::args).
struct ReasonOptions {
  std::string reason;
  LabelSelector labels;  // -l: every unfinished gang that matches
};

// watch.
struct WatchOptions {
  std::optional<int64_t> after_revision;  // >= 0
  std::vector<std::string> queues;        // repeatable, comma lists
  std::vector<std::string> gangs;
};

// report ID.
struct ReportOptions {
  std::optional<v1::GangState> state;  // running, succeeded or failed
  // --checkpoint: "now" (the time the command starts) or an RFC3339 time.
  struct Now {};
  std::optional<std::variant<Now, absl::Time>> checkpoint;
  bool ack_preemption = false;
  std::string message;
};

// nodes list.
struct NodesListOptions {
  std::optional<v1::NodeState> state;
  std::string model;
};

// nodes cordon|drain|uncordon|unhealthy (only drain takes --deadline).
struct NodeStateOptions {
  std::string reason;
  // --deadline: a duration from when the command starts, or an RFC3339 time.
  std::optional<std::variant<absl::Duration, absl::Time>> deadline;
};

// nodes upsert, config set: a required -f FILE.
struct FileOptions {
  std::string file;
};

// queues put.
struct QueuePutOptions {
  std::optional<std::string> file;  // -f: a Queue in JSON
  std::optional<std::string> name;
  std::optional<std::string> parent;
  std::optional<double> weight;                           // >= 0
  std::optional<std::map<std::string, int64_t>> nominal;  // MODEL=GPUS,...
  std::optional<bool> held;
  std::optional<int64_t> borrowing_limit;  // >= -1 (-1 = unlimited)
  std::optional<int64_t> lending_limit;    // >= -1
  std::optional<int32_t> max_priority;
};

// queues set NAME.
struct QueueSetOptions {
  bool held = false;
  bool no_held = false;
  std::optional<double> weight;  // >= 0
};

// config set.
struct ConfigSetOptions {
  std::string file;
  std::optional<int64_t> expected_version;  // >= 0
  // --update-mask: change only these fields (proto names, dotted paths).
  std::optional<std::vector<std::string>> update_mask;
  bool merge = false;  // --merge: change only the fields the file names
};

// apply, diff: -f FILE|DIR.
struct DeclareOptions {
  std::string file;
  std::optional<int64_t> expected_version;  // >= 0
};

// audit.
struct AuditOptions {
  std::optional<int32_t> page_size;  // 1..1000
  std::string page_token;
  bool all = false;
};

// history export.
struct HistoryOptions {
  // --since: gangs submitted this long before the command starts, or at
  // or after this time; unset = every gang the daemon retains.
  std::optional<std::variant<absl::Duration, absl::Time>> since;
  bool include_labels = false;
};

// The options of every command; ParseCommandLine fills the member of the
// command it recognised, the others keep their defaults.
struct CommandOptions {
  SpecOptions spec;  // submit, dryrun
  RunOptions run;
  ListOptions list;
  ReasonOptions cancel;
  WatchOptions watch;
  ReportOptions report;
  NodesListOptions nodes_list;
  NodeStateOptions node_state;
  FileOptions file;  // nodes upsert
  QueuePutOptions queue_put;
  QueueSetOptions queue_set;
  ConfigSetOptions config_set;
  DeclareOptions declare;  // apply, diff
  AuditOptions audit;
  HistoryOptions history;
};

}  // namespace phalanx::ctl

#endif  // PHALANX_CLIENTS_CTL_OPTIONS_H_
