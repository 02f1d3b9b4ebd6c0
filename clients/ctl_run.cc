#include "clients/ctl_run.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "clients/ctl_format.h"
#include "clients/ctl_requests.h"
#include "clients/ctl_views.h"
#include "clients/ctl_watch.h"
#include "grpcpp/grpcpp.h"
#include "phalanx/v1/fleet.grpc.pb.h"
#include "phalanx/v1/scheduler.grpc.pb.h"

extern char** environ;

namespace phalanx::ctl {
namespace {

// How long ranks get between SIGTERM and SIGKILL when phalanxctl stops them
// itself (Ctrl-C, a failed rank, the gang ended); a preemption uses the
// gang's grace deadline instead.
constexpr absl::Duration kStopGrace = absl::Seconds(10);
// How long to wait for killed ranks to be reaped before giving up on them.
constexpr absl::Duration kReapGrace = absl::Seconds(10);
// How often a pending gang's reason is asked for.
constexpr absl::Duration kExplainInterval = absl::Seconds(5);
// Longest sleep of the main loop (it wakes on every event anyway).
constexpr absl::Duration kMaxWait = absl::Seconds(5);

// The write end of the self-pipe: SIGINT, SIGTERM and SIGCHLD each write
// their number, and the main loop polls the read end.
int g_signal_write_fd = -1;

void OnSignal(int signal) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(signal);
  if (write(g_signal_write_fd, &byte, 1) < 0) {
    // Pipe full: a wake-up is already pending.
  }
  errno = saved;
}

absl::Time FromProto(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
}

// Follows one gang's events on a thread of its own (WatchGangBatches, or
// WatchGangs from a daemon that predates it): resumes after the
// last revision when the stream breaks, re-reads the gang on OUT_OF_RANGE,
// keeps the latest Gang and writes a byte to `notify_fd` on each change.
// Thread-safe.
class GangWatcher {
 public:
  GangWatcher(v1::Scheduler::Stub* stub, const Connection& connection,
              std::string gang_id, int64_t after_revision, int notify_fd)
      : stub_(stub),
        connection_(connection),
        gang_id_(std::move(gang_id)),
        revision_(after_revision),
        notify_fd_(notify_fd) {}
  ~GangWatcher() { Stop(); }

  void Start() {
    thread_ = std::thread([this] { Loop(); });
  }

  // Ends the stream and joins the thread.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
      if (context_ != nullptr) context_->TryCancel();
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // The latest state seen, if any since the last call.
  std::optional<v1::Gang> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    std::optional<v1::Gang> out = std::move(latest_);
    latest_.reset();
    return out;
  }

 private:
  void Publish(const v1::Gang& gang) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      latest_ = gang;
    }
    const char byte = 'g';
    if (write(notify_fd_, &byte, 1) < 0) {
      // Pipe full: a wake-up is already pending.
    }
  }

  // Registers the stream's context for Stop (null: the stream ended).
  bool Attach(grpc::ClientContext* context) {
    if (context != nullptr) connection_.Prepare(context);
    std::lock_guard<std::mutex> lock(mu_);
    // A stopped watcher publishes no context: Stop would cancel it after
    // the stream that owns it is gone.
    if (context != nullptr && stopped_) return false;
    context_ = context;
    return true;
  }

  void Loop() {
    bool batches = true;
    while (true) {
      v1::WatchGangsRequest request;
      request.set_after_revision(revision_);
      request.add_gang_ids(gang_id_);
      const grpc::Status status = ReadWatchStream(
          *stub_, request,
          [this](grpc::ClientContext* context) { return Attach(context); },
          [this](const v1::GangEvent& event) {
            revision_ = std::max(revision_, event.revision());
            if (event.type() != v1::EVENT_TYPE_BOOKMARK &&
                event.gang().id() == gang_id_) {
              Publish(event.gang());
            }
          },
          batches);
      std::unique_lock<std::mutex> lock(mu_);
      if (stopped_) return;
      if (status.error_code() == grpc::StatusCode::OUT_OF_RANGE) {
        lock.unlock();
        Relist();
        continue;
      }
      // The stream ended or broke (daemon restart): resume in a second.
      wake_.wait_for(lock, std::chrono::seconds(1),
                     [this] { return stopped_; });
      if (stopped_) return;
    }
  }

  // After OUT_OF_RANGE: the gang's current state and the revision it was
  // read at, to watch on from there.
  void Relist() {
    grpc::ClientContext context;
    connection_.Prepare(&context);
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::GetGangRequest request;
    request.set_gang_id(gang_id_);
    v1::GetGangResponse response;
    if (stub_->GetGang(&context, request, &response).ok()) {
      revision_ = response.revision();
      Publish(response.gang());
    }
  }

  v1::Scheduler::Stub* const stub_;
  const Connection& connection_;
  const std::string gang_id_;
  int64_t revision_;  // only the watcher thread touches it
  const int notify_fd_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopped_ = false;                    // guarded by mu_
  grpc::ClientContext* context_ = nullptr;  // guarded by mu_
  std::optional<v1::Gang> latest_;          // guarded by mu_
};

// One started rank.
struct RankProcess {
  RankPlan plan;
  pid_t pid = -1;  // also its process group
  bool exited = false;
  int exit_code = 0;  // 128+N after signal N
  // Stopped alone, its pod gone from the gang (--elastic-rendezvous): its
  // exit is no failure; SIGKILL at kill_at, given up kReapGrace later.
  bool retired = false;
  bool killed = false;
  absl::Time kill_at = absl::InfiniteFuture();
};

// Why every rank is being stopped: a failure, Ctrl-C, a whole preemption,
// the gang ended, or an elastic gang's resize (grown or shrunk: the ranks
// restart at the new size) or shrink request (acknowledged once they
// stopped).
enum class StopCause {
  kNone,
  kFailure,
  kInterrupt,
  kPreemption,
  kGangEnded,
  kResize,
  kShrink
};

class Launcher {
 public:
  Launcher(const Invocation& inv, const Connection& connection,
           std::ostream& err)
      : inv_(inv),
        connection_(connection),
        err_(err),
        scheduler_(v1::Scheduler::NewStub(connection.channel())),
        fleet_(v1::Fleet::NewStub(connection.channel())) {}

  ~Launcher() {
    if (watcher_ != nullptr) watcher_->Stop();
    if (!temp_dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(temp_dir_, ignored);
    }
    for (int fd :
         {signal_pipe_[0], signal_pipe_[1], notify_pipe_[0], notify_pipe_[1]}) {
      if (fd >= 0) close(fd);
    }
  }

  int Run() {
    if (int code = ParseFlags(); code != kExitOk) return code;
    if (int code = SetUpSignals(); code != kExitOk) return code;
    if (int code = Submit(); code != kExitOk) return code;
    int next = kRunAgain;  // what to wait for before the ranks start
    while (true) {
      const int code = next == kRestart ? WaitForResize() : WaitForAdmission();
      if (code == kRunAgain) {
        next = kRunAgain;
        continue;
      }
      if (code != kExitOk) return code;
      next = RunOnce();
      if (next != kRunAgain && next != kRestart) return next;
    }
  }

 private:
  // Wait for the next admission (--requeue), then start the ranks.
  static constexpr int kRunAgain = -1;
  // Wait until the resized gang runs (a shrink done), then start the ranks.
  static constexpr int kRestart = -2;

  int UsageError(const absl::Status& status) {
    err_ << UsageErrorText(status, inv_.command);
    return kExitUsage;
  }

  int RpcError(absl::string_view what, const grpc::Status& status) {
    err_ << "phalanxctl: " << what << ": " << SafeText(status.error_message())
         << " (" << RpcErrorLine(status) << ")\n";
    return ExitCodeFor(status);
  }

  void Note(absl::string_view text) {
    err_ << "phalanxctl run: " << text << "\n" << std::flush;
  }

  void PrepareUnary(grpc::ClientContext* context) const {
    connection_.Prepare(context);
    context->set_deadline(
        absl::ToChronoTime(absl::Now() + inv_.global.timeout));
  }

  // A Scheduler call with the --timeout deadline, following an HA
  // follower's leader hint (CallFollowingLeader).
  template <typename Request, typename Response>
  grpc::Status Unary(grpc::Status (v1::Scheduler::Stub::*method)(
                         grpc::ClientContext*, const Request&, Response*),
                     const Request& request, Response* response) const {
    return CallFollowingLeader<v1::Scheduler::Stub>(
        connection_,
        [this](grpc::ClientContext* context) { PrepareUnary(context); }, method,
        request, response);
  }

  int ParseFlags() {
    const RunOptions& options = inv_.options.run;
    std::string file_text;
    if (options.spec.file.has_value()) {
      const std::string& path = *options.spec.file;
      std::ifstream file(path);
      if (!file.is_open()) {
        return UsageError(absl::InvalidArgumentError(
            absl::StrCat("cannot read ", path, ": ", std::strerror(errno))));
      }
      file_text.assign(std::istreambuf_iterator<char>(file), {});
    }
    absl::StatusOr<v1::GangSpec> spec = BuildSpec(options.spec, file_text);
    if (!spec.ok()) return UsageError(spec.status());
    spec_ = *std::move(spec);
    if (spec_.request_id().empty()) {
      // Unique per run, so a retried submit cannot create a second gang.
      spec_.set_request_id(absl::StrFormat("run-%d-%d",
                                           static_cast<int>(getpid()),
                                           absl::ToUnixMicros(absl::Now())));
    }
    if (options.lease.has_value()) {
      lease_ = *options.lease;
      const int64_t nanos = absl::ToInt64Nanoseconds(lease_);
      spec_.mutable_lease_duration()->set_seconds(nanos / 1000000000);
      spec_.mutable_lease_duration()->set_nanos(nanos % 1000000000);
    }
    exec_ = options.exec;
    if (exec_ != "local" && absl::StripAsciiWhitespace(exec_).empty()) {
      return UsageError(absl::InvalidArgumentError("--exec: empty template"));
    }
    master_port_ = options.master_port;
    requeue_ = options.requeue;
    rendezvous_ = options.elastic_rendezvous;
    if (rendezvous_ && ElasticPodSet(spec_) < 0) {
      return UsageError(absl::InvalidArgumentError(
          "--elastic-rendezvous: the gang is not elastic (give --min-pods "
          "below --pods, or a pod set's min_count below its count in -f's "
          "spec)"));
    }
    hostfile_ = options.hostfile;
    command_ = inv_.args;
    std::error_code error;
    workdir_ = std::filesystem::absolute(
                   options.workdir.empty() ? "." : options.workdir, error)
                   .lexically_normal()
                   .string();
    if (error) {
      return UsageError(absl::InvalidArgumentError(
          absl::StrCat("--workdir: ", error.message())));
    }
    if (workdir_.size() > 1 && workdir_.back() == '/') workdir_.pop_back();
    return kExitOk;
  }

  int SetUpSignals() {
    if (pipe2(signal_pipe_, O_CLOEXEC | O_NONBLOCK) != 0 ||
        pipe2(notify_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
      err_ << "phalanxctl: pipe: " << std::strerror(errno) << "\n";
      return kExitRpcError;
    }
    g_signal_write_fd = signal_pipe_[1];
    struct sigaction action {};
    action.sa_handler = &OnSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
    action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &action, nullptr);
    return kExitOk;
  }

  // Sleeps until a signal, a gang event or `timeout`; then drains the pipes
  // and applies what came.
  void Wait(absl::Duration timeout) {
    timeout = std::clamp(timeout, absl::ZeroDuration(), kMaxWait);
    pollfd fds[2] = {{signal_pipe_[0], POLLIN, 0},
                     {notify_pipe_[0], POLLIN, 0}};
    poll(fds, 2, static_cast<int>(absl::ToInt64Milliseconds(timeout)) + 1);
    unsigned char buffer[64];
    ssize_t n;
    while ((n = read(signal_pipe_[0], buffer, sizeof(buffer))) > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        if (buffer[i] == SIGINT || buffer[i] == SIGTERM) {
          if (interrupt_ == 0) interrupt_ = buffer[i];
        }
      }
    }
    while (read(notify_pipe_[0], buffer, sizeof(buffer)) > 0) {
    }
    if (watcher_ != nullptr) {
      // Keep the newest: a reply (ReportGang) may be ahead of the stream.
      if (std::optional<v1::Gang> gang = watcher_->Take();
          gang.has_value() && gang->revision() >= gang_.revision()) {
        gang_ = *std::move(gang);
      }
    }
  }

  int Submit() {
    v1::SubmitGangRequest request;
    *request.mutable_spec() = spec_;
    v1::SubmitGangResponse response;
    const grpc::Status status =
        Unary(&v1::Scheduler::Stub::SubmitGang, request, &response);
    if (!status.ok()) {
      err_ << RpcErrorLine(status) << "\n";
      return ExitCodeFor(status);
    }
    gang_ = response.gang();
    // The lease to keep: --lease, or the one of a spec given with -f.
    const google::protobuf::Duration& lease = gang_.spec().lease_duration();
    lease_ = absl::Seconds(lease.seconds()) + absl::Nanoseconds(lease.nanos());
    Note(absl::StrCat("submitted ", SafeText(gang_.id()), " (",
                      GangStateName(gang_.state()), ")"));
    watcher_ =
        std::make_unique<GangWatcher>(scheduler_.get(), connection_, gang_.id(),
                                      response.revision(), notify_pipe_[1]);
    watcher_->Start();
    return kExitOk;
  }

  // Cancels the gang after SIGINT/SIGTERM; returns 128 + the signal.
  int CancelAndExit(absl::string_view why) {
    v1::CancelGangRequest request;
    request.set_gang_id(gang_.id());
    request.set_reason(absl::StrCat("phalanxctl run: ", why));
    v1::CancelGangResponse response;
    const grpc::Status status =
        Unary(&v1::Scheduler::Stub::CancelGang, request, &response);
    if (!status.ok()) {
      RpcError(absl::StrCat("cancel ", gang_.id()), status);
    } else {
      Note(absl::StrCat("cancelled ", SafeText(gang_.id()), " (", why, ")"));
    }
    return 128 + interrupt_;
  }

  // Until the gang is ADMITTED: prints its reason and position when they
  // change. Returns kExitOk once admitted, else the exit code.
  int WaitForAdmission() {
    std::string last_note;
    absl::Time next_explain = absl::InfinitePast();
    while (true) {
      if (interrupt_ != 0) {
        return CancelAndExit(InterruptWhy());
      }
      const v1::GangState state = gang_.state();
      if (state == v1::GANG_STATE_ADMITTED || state == v1::GANG_STATE_RUNNING) {
        Note(absl::StrCat(SafeText(gang_.id()), " admitted: ",
                          gang_.placement_size(), " pods", ElasticNote()));
        return kExitOk;
      }
      if (IsFinalState(state) || state == v1::GANG_STATE_PREEMPTING) {
        Note(absl::StrCat(SafeText(gang_.id()), " is ", GangStateName(state),
                          ": ", SafeText(gang_.reason())));
        return kExitRpcError;
      }
      if (absl::Now() >= next_explain) {
        next_explain = absl::Now() + kExplainInterval;
        std::string note = PendingNote();
        if (!note.empty() && note != last_note) Note(note);
        if (!note.empty()) last_note = std::move(note);
      }
      Wait(next_explain - absl::Now());
    }
  }

  // " (elastic: 2:8 pods)" for an elastic gang, else "".
  std::string ElasticNote() const {
    if (ElasticPodSet(gang_.spec()) < 0) return "";
    return absl::StrCat(" (elastic: ", NnodesRange(gang_.spec()), " pods)");
  }

  // After every rank stopped for a resize: until the gang runs at its new
  // size (a shrink ends with the acknowledgement or at the grace deadline).
  // Returns kExitOk then; kRunAgain when it went back to PENDING with
  // --requeue; else the exit code (a whole preemption is acknowledged).
  int WaitForResize() {
    absl::Time next_renewal = NextRenewal();
    while (true) {
      if (interrupt_ != 0) return CancelAndExit(InterruptWhy());
      const v1::GangState state = gang_.state();
      if (state == v1::GANG_STATE_ADMITTED || state == v1::GANG_STATE_RUNNING) {
        if (stop_cause_ == StopCause::kShrink) {
          Note(absl::StrCat(ResizeLine(), "; starting every rank"));
        }
        return kExitOk;
      }
      if (state == v1::GANG_STATE_PENDING) {
        return requeue_ ? kRunAgain : kExitPreempted;
      }
      if (state == v1::GANG_STATE_PREEMPTING && gang_.shrink_to_count() == 0) {
        return AcknowledgePreemption();
      }
      if (IsFinalState(state)) {
        Note(absl::StrCat(SafeText(gang_.id()), " is ", GangStateName(state),
                          ": ", SafeText(gang_.reason())));
        return kExitRpcError;
      }
      if (absl::Now() >= next_renewal) {
        RenewLease();
        next_renewal = NextRenewal();
      }
      Wait(next_renewal - absl::Now());
    }
  }

  // When the lease is next renewed: in lease/3, never without a lease.
  absl::Time NextRenewal() const {
    return lease_ > absl::ZeroDuration() ? absl::Now() + lease_ / 3
                                         : absl::InfiniteFuture();
  }

  std::string InterruptWhy() const {
    return interrupt_ == SIGINT ? "interrupted (SIGINT)"
                                : "terminated (SIGTERM)";
  }

  // "g-1 pending: REASON (position 3, 2 in queue a)", or "" on failure.
  std::string PendingNote() {
    v1::ExplainGangRequest request;
    request.set_gang_id(gang_.id());
    v1::ExplainGangResponse response;
    grpc::ClientContext context;
    PrepareUnary(&context);
    if (!scheduler_->ExplainGang(&context, request, &response).ok()) return "";
    return absl::StrCat(
        SafeText(gang_.id()), " pending: ", SafeText(response.reason()),
        " (position ", response.position(), ", ", response.position_in_queue(),
        " in queue ", SafeText(gang_.spec().queue()), ")");
  }

  // Node id -> Node.address, for the nodes of the placement.
  std::map<std::string, std::string> Addresses() {
    std::map<std::string, std::string> out;
    v1::ListNodesResponse response;
    grpc::ClientContext context;
    PrepareUnary(&context);
    const grpc::Status status =
        fleet_->ListNodes(&context, v1::ListNodesRequest(), &response);
    if (!status.ok()) {
      Note(absl::StrCat("cannot list nodes (", RpcErrorLine(status),
                        "): MASTER_ADDR and hosts are node ids"));
      return out;
    }
    for (const v1::Node& node : response.nodes()) {
      out[node.id()] = node.address();
    }
    return out;
  }

  // Writes the hostfile; returns its path, or "" after printing an error.
  std::string WriteHostfile(const std::vector<RankPlan>& ranks,
                            const std::string& path) {
    std::ofstream file(path, std::ios::trunc);
    file << HostfileText(ranks);
    file.close();
    if (!file) {
      err_ << "phalanxctl: cannot write " << path << ": "
           << std::strerror(errno) << "\n";
      return "";
    }
    return path;
  }

  std::string HostfilePath() {
    if (!hostfile_.empty()) return hostfile_;
    if (temp_dir_.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      std::string pattern = absl::StrCat(
          tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/phalanx-run-XXXXXX");
      if (mkdtemp(pattern.data()) == nullptr) return "";
      temp_dir_ = pattern;
    }
    return temp_dir_ + "/hostfile";
  }

  // Starts `plan`: its own process group, the environment (local) or the
  // remote argv. Returns the errno of a failed start, 0 on success.
  int Spawn(RankProcess& rank) {
    const bool local = exec_ == "local";
    const std::vector<std::string> argv =
        RankArgv(exec_, rank.plan, local ? "" : workdir_, command_);
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      const absl::string_view entry(*e);
      const absl::string_view key = entry.substr(0, entry.find('='));
      const bool ours =
          local && std::any_of(rank.plan.env.begin(), rank.plan.env.end(),
                               [&](const auto& kv) { return kv.first == key; });
      if (!ours) env.emplace_back(entry);
    }
    if (local) {
      for (const auto& [key, value] : rank.plan.env) {
        env.push_back(absl::StrCat(key, "=", value));
      }
    }
    std::vector<char*> c_argv, c_env;
    for (const std::string& arg : argv) {
      c_argv.push_back(const_cast<char*>(arg.c_str()));
    }
    c_argv.push_back(nullptr);
    for (const std::string& entry : env) {
      c_env.push_back(const_cast<char*>(entry.c_str()));
    }
    c_env.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (local) posix_spawn_file_actions_addchdir_np(&actions, workdir_.c_str());
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t defaults, empty;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGCHLD);
    sigaddset(&defaults, SIGPIPE);
    sigemptyset(&empty);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setsigmask(&attr, &empty);
    posix_spawnattr_setpgroup(&attr, 0);  // its own group, for kill(-pgid)
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP |
                                        POSIX_SPAWN_SETSIGDEF |
                                        POSIX_SPAWN_SETSIGMASK);
    pid_t pid = -1;
    const int error = posix_spawnp(&pid, c_argv[0], &actions, &attr,
                                   c_argv.data(), c_env.data());
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    if (error == 0) rank.pid = pid;
    return error;
  }

  // Reaps every exited rank; records the first failure (a retired rank's
  // exit is none).
  void Reap() {
    for (int i = 0; i < static_cast<int>(ranks_.size()); ++i) {
      RankProcess& rank = ranks_[i];
      if (rank.exited || rank.pid <= 0) continue;
      int status = 0;
      const pid_t pid = waitpid(rank.pid, &status, WNOHANG);
      if (pid != rank.pid) continue;
      rank.exited = true;
      rank.exit_code = WIFEXITED(status)     ? WEXITSTATUS(status)
                       : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                             : 1;
      // Stop the rest of its group (a shell's children).
      kill(-rank.pid, SIGKILL);
      if (rank.exit_code != 0 && !rank.retired && first_failure_ < 0 &&
          stop_cause_ == StopCause::kNone) {
        first_failure_ = i;
      }
    }
  }

  bool AllExited() const {
    return std::all_of(ranks_.begin(), ranks_.end(),
                       [](const RankProcess& r) { return r.exited; });
  }

  void SignalRanks(int signal) {
    for (const RankProcess& rank : ranks_) {
      if (!rank.exited && rank.pid > 0) kill(-rank.pid, signal);
    }
  }

  // Starts stopping the ranks: SIGTERM now, SIGKILL at `deadline`.
  void BeginStop(StopCause cause, absl::Time deadline) {
    if (stop_cause_ != StopCause::kNone) return;
    stop_cause_ = cause;
    stop_deadline_ = deadline;
    SignalRanks(SIGTERM);
  }

  grpc::Status Report(v1::GangState state, bool ack,
                      const std::string& message) {
    v1::ReportGangRequest request;
    request.set_gang_id(gang_.id());
    if (state != v1::GANG_STATE_UNSPECIFIED) request.set_state(state);
    request.set_preemption_acknowledged(ack);
    request.set_message(message);
    v1::ReportGangResponse response;
    const grpc::Status status =
        Unary(&v1::Scheduler::Stub::ReportGang, request, &response);
    if (status.ok()) gang_ = response.gang();
    return status;
  }

  void RenewLease() {
    v1::RenewGangLeaseRequest request;
    request.set_gang_id(gang_.id());
    v1::RenewGangLeaseResponse response;
    const grpc::Status status =
        Unary(&v1::Scheduler::Stub::RenewGangLease, request, &response);
    if (!status.ok()) {
      Note(absl::StrCat("lease renewal failed: ", RpcErrorLine(status)));
    }
  }

  // The ranks of the gang's current placement.
  std::vector<RankPlan> PlanCurrent(const v1::Gang& gang,
                                    const std::string& hostfile) {
    return PlanRanks(gang,
                     exec_ == "local" ? LocalAddresses(gang) : Addresses(),
                     master_port_, hostfile);
  }

  // Starts the ranks of the current placement and supervises them until
  // they all exited. Returns the exit code, kRunAgain to wait for the next
  // admission (--requeue), or kRestart to start again once the gang runs
  // at its new size.
  int RunOnce() {
    ranks_.clear();
    stop_cause_ = StopCause::kNone;
    first_failure_ = -1;
    killed_ = false;
    shrink_acknowledged_ = false;
    ranks_resizes_ = gang_.resizes();
    planned_pods_ = gang_.placement_size();
    shrink_stopped_.clear();
    const std::string path = HostfilePath();
    std::vector<RankPlan> plans = PlanCurrent(gang_, path);
    if (path.empty() || WriteHostfile(plans, path).empty()) {
      return kExitRpcError;
    }
    if (!plans.empty()) {
      if (const absl::Status status = CheckResolves(plans[0].host);
          !status.ok()) {
        return FailBeforeStart(status);
      }
    }
    for (RankPlan& plan : plans) {
      if (!StartRank(std::move(plan))) break;
    }
    if (stop_cause_ == StopCause::kNone) {
      const grpc::Status status = Report(v1::GANG_STATE_RUNNING, false, "");
      if (status.ok()) {
        Note(absl::StrCat(ranks_.size(), " ranks started; ",
                          SafeText(gang_.id()), " RUNNING"));
      } else {
        Note(absl::StrCat("report RUNNING: ", RpcErrorLine(status)));
      }
    }
    Supervise();
    return Outcome();
  }

  // Starts one rank; returns false (a failure: the others are being
  // stopped) when it cannot start.
  bool StartRank(RankPlan plan) {
    RankProcess& rank = ranks_.emplace_back();
    rank.plan = std::move(plan);
    const int error = Spawn(rank);
    if (error == 0) return true;
    Note(absl::StrCat("rank ", rank.plan.rank, ": cannot start ",
                      SafeText(command_.front()), ": ", std::strerror(error)));
    rank.exited = true;
    rank.exit_code = 127;
    first_failure_ = static_cast<int>(ranks_.size()) - 1;
    BeginStop(StopCause::kFailure, absl::Now() + kStopGrace);
    return false;
  }

  // Reports the gang FAILED with `why` (no rank was started) and returns
  // the exit code.
  int FailBeforeStart(const absl::Status& why) {
    Note(SafeText(why.message()));
    const std::string message =
        absl::StrCat("phalanxctl run: no rank started: ", why.message());
    const grpc::Status status = Report(v1::GANG_STATE_FAILED, false, message);
    if (!status.ok()) return RpcError("report FAILED", status);
    Note(absl::StrCat(SafeText(gang_.id()), " FAILED"));
    return kExitRpcError;
  }

  void Supervise() {
    absl::Time next_renewal = NextRenewal();
    absl::Time give_up = absl::InfiniteFuture();
    while (true) {
      Reap();
      if (AllExited()) return;
      const absl::Time now = absl::Now();
      if (first_failure_ >= 0) BeginStop(StopCause::kFailure, now + kStopGrace);
      if (interrupt_ != 0) BeginStop(StopCause::kInterrupt, now + kStopGrace);
      FollowGang(now);
      KillOverdueRetired(now);
      if (stop_cause_ != StopCause::kNone && !killed_ &&
          now >= stop_deadline_) {
        SignalRanks(SIGKILL);
        killed_ = true;
        give_up = now + kReapGrace;
      }
      if (now >= give_up) {
        Note("some ranks did not exit after SIGKILL; not waiting for them");
        return;
      }
      if (now >= next_renewal) {
        RenewLease();
        next_renewal = now + lease_ / 3;
      }
      absl::Time wake = std::min({next_renewal, give_up, NextRetiredKill()});
      if (stop_cause_ != StopCause::kNone && !killed_) {
        wake = std::min(wake, stop_deadline_);
      }
      Wait(wake - absl::Now());
    }
  }

  // Acts on the gang's latest state while its ranks run: a preemption or a
  // shrink request, an end, a resize.
  void FollowGang(absl::Time now) {
    const v1::GangState state = gang_.state();
    if (state == v1::GANG_STATE_PREEMPTING && gang_.shrink_to_count() > 0) {
      OnShrinkRequest(now);
    } else if (state == v1::GANG_STATE_PREEMPTING) {
      const absl::Time deadline = GraceDeadline(now);
      if (stop_cause_ == StopCause::kNone) {
        Note(absl::StrCat(SafeText(gang_.id()),
                          " is being preempted; stopping the ranks by ",
                          absl::FormatTime(deadline)));
      }
      BeginStop(StopCause::kPreemption, deadline);
    } else if (IsFinalState(state) || state == v1::GANG_STATE_PENDING) {
      if (stop_cause_ == StopCause::kNone) {
        Note(absl::StrCat(SafeText(gang_.id()), " is ", GangStateName(state),
                          ": ", SafeText(gang_.reason()),
                          "; stopping the ranks"));
      }
      BeginStop(StopCause::kGangEnded, now + kStopGrace);
    } else if (state == v1::GANG_STATE_RUNNING &&
               gang_.resizes() != ranks_resizes_) {
      OnResized(now);
    }
  }

  absl::Time GraceDeadline(absl::Time now) const {
    return gang_.has_grace_deadline() ? FromProto(gang_.grace_deadline())
                                      : now + kStopGrace;
  }

  // The ranks running for a pod the gang still has (not retired).
  std::vector<RankPlan> LiveRanks() const {
    std::vector<RankPlan> out;
    for (const RankProcess& rank : ranks_) {
      if (!rank.retired) out.push_back(rank.plan);
    }
    return out;
  }

  // "g-1 resized: 2 -> 4 pods" (from the plan the ranks run).
  std::string ResizeLine() const {
    return absl::StrCat(SafeText(gang_.id()), " resized: ", planned_pods_,
                        " -> ", gang_.placement_size(), " pods");
  }

  // The gang grew, or its shrink is done: restart every rank at the new
  // size, or (--elastic-rendezvous) start and stop only the ranks whose pods
  // came or went.
  void OnResized(absl::Time now) {
    if (stop_cause_ != StopCause::kNone) return;
    if (!rendezvous_) {
      Note(absl::StrCat(ResizeLine(), "; restarting every rank"));
      BeginStop(StopCause::kResize, now + kStopGrace);
      return;
    }
    ranks_resizes_ = gang_.resizes();
    shrink_acknowledged_ = false;
    const std::string path = HostfilePath();
    std::vector<RankPlan> next = PlanCurrent(gang_, path);
    WriteHostfile(next, path);
    const std::vector<RankPlan> live = LiveRanks();
    const RankDiff diff = DiffRanks(live, next);
    for (int i : diff.removed) shrink_stopped_.push_back(live[i].rank);
    Note(absl::StrCat(
        ResizeLine(), "; ranks started: ", RankList(next, diff.added),
        "; stopped: ",
        shrink_stopped_.empty() ? "none"
                                : absl::StrJoin(shrink_stopped_, ",")));
    shrink_stopped_.clear();
    planned_pods_ = gang_.placement_size();
    Retire(diff.removed, now + kStopGrace);
    for (int i : diff.added) {
      if (!StartRank(next[i])) return;
    }
  }

  // A shrink request: stop every rank (then acknowledge and restart), or
  // (--elastic-rendezvous) only those of the pods given up, acknowledging
  // once they exited.
  void OnShrinkRequest(absl::Time now) {
    const absl::Time deadline = GraceDeadline(now);
    const std::string line = absl::StrCat(
        SafeText(gang_.id()), " shrinks to ", gang_.shrink_to_count(),
        " pods of its elastic pod set; stopping ");
    if (!rendezvous_) {
      if (stop_cause_ == StopCause::kNone) {
        Note(absl::StrCat(line, "every rank by ", absl::FormatTime(deadline)));
      }
      BeginStop(StopCause::kShrink, deadline);
      return;
    }
    if (shrink_acknowledged_ || stop_cause_ != StopCause::kNone) return;
    const std::vector<RankPlan> live = LiveRanks();
    const RankDiff diff =
        DiffRanks(live, PlanRanks(AfterShrink(gang_), {}, master_port_, ""));
    if (!diff.removed.empty()) {
      Note(absl::StrCat(line, "ranks ", RankList(live, diff.removed), " by ",
                        absl::FormatTime(deadline)));
      Retire(diff.removed, deadline);
      for (int i : diff.removed) shrink_stopped_.push_back(live[i].rank);
    }
    if (std::all_of(ranks_.begin(), ranks_.end(), [](const RankProcess& r) {
          return !r.retired || r.exited;
        })) {
      AcknowledgeShrink();
    }
  }

  // "2,3" (the ranks at `indices` of `plans`), or "none".
  static std::string RankList(const std::vector<RankPlan>& plans,
                              const std::vector<int>& indices) {
    if (indices.empty()) return "none";
    std::vector<int> ranks;
    for (int i : indices) ranks.push_back(plans[i].rank);
    return absl::StrJoin(ranks, ",");
  }

  // SIGTERM to the live ranks at `indices` (of LiveRanks()), SIGKILL at
  // `deadline`.
  void Retire(const std::vector<int>& indices, absl::Time deadline) {
    int live = -1;
    size_t next = 0;
    for (RankProcess& rank : ranks_) {
      if (rank.retired) continue;
      ++live;
      if (next == indices.size() || indices[next] != live) continue;
      ++next;
      rank.retired = true;
      rank.kill_at = deadline;
      if (!rank.exited && rank.pid > 0) kill(-rank.pid, SIGTERM);
    }
  }

  // SIGKILL to retired ranks past their deadline; a rank that outlives its
  // SIGKILL by kReapGrace is given up.
  void KillOverdueRetired(absl::Time now) {
    for (RankProcess& rank : ranks_) {
      if (!rank.retired || rank.exited || now < rank.kill_at) continue;
      if (rank.killed) {
        Note(absl::StrCat("rank ", rank.plan.rank,
                          " did not exit after SIGKILL; not waiting for it"));
        rank.exited = true;
        rank.exit_code = 128 + SIGKILL;
        continue;
      }
      kill(-rank.pid, SIGKILL);
      rank.killed = true;
      rank.kill_at = now + kReapGrace;
    }
  }

  absl::Time NextRetiredKill() const {
    absl::Time out = absl::InfiniteFuture();
    for (const RankProcess& rank : ranks_) {
      if (rank.retired && !rank.exited) out = std::min(out, rank.kill_at);
    }
    return out;
  }

  // Acknowledges the shrink: the ranks of the pods given up stopped. The
  // reply carries the gang RUNNING at its new size (or, after a failure,
  // the daemon ends the shrink at the grace deadline).
  void AcknowledgeShrink() {
    shrink_acknowledged_ = true;
    const grpc::Status status =
        Report(v1::GANG_STATE_UNSPECIFIED, true,
               "phalanxctl run: ranks stopped for a shrink");
    if (!status.ok()) {
      Note(absl::StrCat("acknowledge shrink: ", RpcErrorLine(status)));
      return;
    }
    Note(absl::StrCat("shrink acknowledged; ", SafeText(gang_.id()), " is ",
                      GangStateName(gang_.state()), " with ",
                      gang_.placement_size(), " pods"));
  }

  // Acknowledges a whole preemption; returns kRunAgain (--requeue) or 75.
  int AcknowledgePreemption() {
    const grpc::Status status = Report(v1::GANG_STATE_UNSPECIFIED, true,
                                       "phalanxctl run: ranks stopped");
    if (!status.ok()) {
      Note(absl::StrCat("acknowledge preemption: ", RpcErrorLine(status)));
    } else {
      Note(absl::StrCat("preemption acknowledged; ", SafeText(gang_.id()),
                        " is ", GangStateName(gang_.state())));
    }
    return requeue_ ? kRunAgain : kExitPreempted;
  }

  // After every rank stopped for a resize or a shrink: acknowledges a
  // shrink (or a whole preemption that came meanwhile); returns kRestart,
  // or what a preemption returns.
  int AfterResizeStop() {
    if (gang_.state() != v1::GANG_STATE_PREEMPTING) return kRestart;
    if (gang_.shrink_to_count() == 0) return AcknowledgePreemption();
    AcknowledgeShrink();
    return kRestart;
  }

  // Reports how the ranks ended; returns the exit code, kRunAgain or
  // kRestart.
  int Outcome() {
    switch (stop_cause_) {
      case StopCause::kInterrupt:
        return CancelAndExit(InterruptWhy());
      case StopCause::kPreemption:
        return AcknowledgePreemption();
      case StopCause::kResize:
      case StopCause::kShrink:
        return AfterResizeStop();
      case StopCause::kGangEnded:
        if (gang_.state() == v1::GANG_STATE_PENDING) {
          return requeue_ ? kRunAgain : kExitPreempted;
        }
        return kExitRpcError;
      case StopCause::kFailure:
      case StopCause::kNone:
        break;
    }
    if (first_failure_ < 0) {
      const grpc::Status status = Report(v1::GANG_STATE_SUCCEEDED, false, "");
      if (!status.ok()) return RpcError("report SUCCEEDED", status);
      Note(absl::StrCat("every rank exited 0; ", SafeText(gang_.id()),
                        " SUCCEEDED"));
      return kExitOk;
    }
    const RankProcess& failed = ranks_[first_failure_];
    const std::string message =
        absl::StrFormat("rank %d (%s) exited with code %d", failed.plan.rank,
                        failed.plan.node, failed.exit_code);
    const grpc::Status status = Report(v1::GANG_STATE_FAILED, false, message);
    if (!status.ok()) RpcError("report FAILED", status);
    Note(
        absl::StrCat(SafeText(message), "; ", SafeText(gang_.id()), " FAILED"));
    return failed.exit_code;
  }

  const Invocation& inv_;
  const Connection& connection_;
  std::ostream& err_;
  std::unique_ptr<v1::Scheduler::Stub> scheduler_;
  std::unique_ptr<v1::Fleet::Stub> fleet_;

  v1::GangSpec spec_;
  std::string exec_;
  int master_port_ = kDefaultMasterPort;
  absl::Duration lease_ = absl::ZeroDuration();
  bool requeue_ = false;
  bool rendezvous_ = false;  // --elastic-rendezvous
  std::string hostfile_;
  std::string workdir_;  // absolute: where every rank starts
  std::vector<std::string> command_;

  int signal_pipe_[2] = {-1, -1};
  int notify_pipe_[2] = {-1, -1};
  int interrupt_ = 0;  // SIGINT or SIGTERM once received
  std::string temp_dir_;
  v1::Gang gang_;  // the latest state seen
  std::unique_ptr<GangWatcher> watcher_;

  std::vector<RankProcess> ranks_;
  StopCause stop_cause_ = StopCause::kNone;
  absl::Time stop_deadline_ = absl::InfiniteFuture();
  bool killed_ = false;
  int first_failure_ = -1;  // index into ranks_
  // Gang.resizes of the plan the live ranks run (a change: a resize).
  int32_t ranks_resizes_ = 0;
  int planned_pods_ = 0;  // the placement size of that plan
  // The shrink in progress was acknowledged (--elastic-rendezvous).
  bool shrink_acknowledged_ = false;
  // The ranks stopped for that shrink, for the line of its resize.
  std::vector<int> shrink_stopped_;
};

}  // namespace

std::vector<RankPlan> PlanRanks(
    const v1::Gang& gang, const std::map<std::string, std::string>& addresses,
    int master_port, const std::string& hostfile_path) {
  std::vector<RankPlan> ranks;
  auto host_of = [&](const std::string& node) {
    auto it = addresses.find(node);
    return it == addresses.end() || it->second.empty() ? node : it->second;
  };
  const std::string master =
      gang.placement().empty() ? "" : host_of(gang.placement(0).node());
  const bool elastic = ElasticPodSet(gang.spec()) >= 0;
  const std::string range = NnodesRange(gang.spec());
  for (int r = 0; r < gang.placement_size(); ++r) {
    const v1::PodPlacement& pod = gang.placement(r);
    RankPlan& rank = ranks.emplace_back();
    rank.rank = r;
    rank.pod_set = pod.pod_set();
    rank.pod_index = pod.index();
    rank.node = pod.node();
    rank.host = host_of(pod.node());
    rank.gpus.assign(pod.gpu_indices().begin(), pod.gpu_indices().end());
    const int nproc = std::max<int>(1, rank.gpus.size());
    rank.env = {
        {"PHALANX_GANG_ID", gang.id()},
        {"PHALANX_NODE", pod.node()},
        {"PHALANX_HOSTFILE", hostfile_path},
        {"MASTER_ADDR", master},
        {"MASTER_PORT", absl::StrCat(master_port)},
        {"NNODES", absl::StrCat(gang.placement_size())},
        {"NODE_RANK", absl::StrCat(r)},
        {"NPROC_PER_NODE", absl::StrCat(nproc)},
        {"CUDA_VISIBLE_DEVICES", absl::StrJoin(rank.gpus, ",")},
    };
    if (elastic) rank.env.emplace_back("PHALANX_NNODES_RANGE", range);
  }
  return ranks;
}

int ElasticPodSet(const v1::GangSpec& spec) {
  for (int i = 0; i < spec.pod_sets_size(); ++i) {
    const v1::PodSet& set = spec.pod_sets(i);
    if (set.min_count() > 0 && set.min_count() < set.count()) return i;
  }
  return -1;
}

std::string NnodesRange(const v1::GangSpec& spec) {
  int64_t fewest = 0;
  int64_t most = 0;
  const int elastic = ElasticPodSet(spec);
  for (int i = 0; i < spec.pod_sets_size(); ++i) {
    const v1::PodSet& set = spec.pod_sets(i);
    fewest += i == elastic ? set.min_count() : set.count();
    most += set.count();
  }
  return absl::StrCat(fewest, ":", most);
}

v1::Gang AfterShrink(v1::Gang gang) {
  const int elastic = ElasticPodSet(gang.spec());
  if (gang.shrink_to_count() <= 0 || elastic < 0) return gang;
  const std::string& name = gang.spec().pod_sets(elastic).name();
  auto* pods = gang.mutable_placement();
  pods->erase(std::remove_if(pods->begin(), pods->end(),
                             [&](const v1::PodPlacement& pod) {
                               return pod.pod_set() == name &&
                                      pod.index() >= gang.shrink_to_count();
                             }),
              pods->end());
  return gang;
}

RankDiff DiffRanks(const std::vector<RankPlan>& running,
                   const std::vector<RankPlan>& next) {
  auto same_pod = [](const RankPlan& a, const RankPlan& b) {
    return a.pod_set == b.pod_set && a.pod_index == b.pod_index &&
           a.node == b.node && a.gpus == b.gpus;
  };
  auto absent_from = [&](const std::vector<RankPlan>& plans,
                         const RankPlan& rank) {
    return std::none_of(plans.begin(), plans.end(),
                        [&](const RankPlan& p) { return same_pod(p, rank); });
  };
  RankDiff diff;
  for (int i = 0; i < static_cast<int>(next.size()); ++i) {
    if (absent_from(running, next[i])) diff.added.push_back(i);
  }
  for (int i = 0; i < static_cast<int>(running.size()); ++i) {
    if (absent_from(next, running[i])) diff.removed.push_back(i);
  }
  return diff;
}

std::map<std::string, std::string> LocalAddresses(const v1::Gang& gang) {
  std::map<std::string, std::string> out;
  for (const v1::PodPlacement& pod : gang.placement()) {
    out[pod.node()] = kLocalRankHost;
  }
  return out;
}

absl::Status CheckResolves(absl::string_view host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int error =
      getaddrinfo(std::string(host).c_str(), nullptr, &hints, &found);
  if (found != nullptr) freeaddrinfo(found);
  if (error == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "MASTER_ADDR ", SafeCell(host), " does not resolve on this machine (",
      gai_strerror(error),
      "): set the node's address in the fleet (nodes upsert), or run every "
      "rank here with --exec local"));
}

std::string HostfileText(const std::vector<RankPlan>& ranks) {
  std::string out;
  for (const RankPlan& rank : ranks) {
    absl::StrAppend(&out, rank.host,
                    " slots=", std::max<int>(1, rank.gpus.size()), "\n");
  }
  return out;
}

std::string ShellQuote(absl::string_view word) {
  const bool plain =
      !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
        return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
               absl::string_view("_@%+=:,./-").find(c) !=
                   absl::string_view::npos;
      });
  if (plain) return std::string(word);
  return absl::StrCat("'", absl::StrReplaceAll(word, {{"'", "'\\''"}}), "'");
}

std::vector<std::string> RankArgv(absl::string_view exec, const RankPlan& rank,
                                  absl::string_view workdir,
                                  const std::vector<std::string>& command) {
  if (exec == "local") return command;
  std::vector<std::string> argv;
  const std::string rank_text = absl::StrCat(rank.rank);
  for (absl::string_view word :
       absl::StrSplit(exec, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
    argv.push_back(absl::StrReplaceAll(
        word,
        {{"{host}", rank.host}, {"{node}", rank.node}, {"{rank}", rank_text}}));
  }
  if (!workdir.empty()) {
    argv.insert(argv.end(), {"cd", ShellQuote(workdir), "&&"});
  }
  argv.emplace_back("env");
  for (const auto& [key, value] : rank.env) {
    argv.push_back(ShellQuote(absl::StrCat(key, "=", value)));
  }
  for (const std::string& word : command) argv.push_back(ShellQuote(word));
  return argv;
}

int RunGang(const Invocation& invocation, const Connection& connection,
            std::ostream& /*out: the ranks own stdout*/, std::ostream& err) {
  Launcher launcher(invocation, connection, err);
  return launcher.Run();
}

}  // namespace phalanx::ctl
