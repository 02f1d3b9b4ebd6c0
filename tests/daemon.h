// DaemonProcess: runs the real phalanxd binary for integration tests (a
// ChildProcess, its output in phalanxd.log beside the data directory), on an
// ephemeral loopback port with a temporary data directory, and hands out
// stubs. Not thread-safe; one per test.
#ifndef PHALANX_TESTS_DAEMON_H_
#define PHALANX_TESTS_DAEMON_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "phalanx/v1/admin.grpc.pb.h"
#include "phalanx/v1/fleet.grpc.pb.h"
#include "phalanx/v1/scheduler.grpc.pb.h"
#include "tests/child_process.h"
#include "tests/health_probe.h"  // HealthStatus (-5: unknown service, -14: unreachable)

namespace phalanx::testing {

class DaemonProcess {
 public:
  // Creates a temporary data directory; `extra_args` go to every start.
  explicit DaemonProcess(std::vector<std::string> extra_args = {});
  ~DaemonProcess();  // kills the daemon, removes the directory
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  // Adds arguments for every later start.
  void AddArgs(const std::vector<std::string>& args) {
    extra_args_.insert(extra_args_.end(), args.begin(), args.end());
  }
  // Runs later starts through `exec_prefix` (for example {"/usr/sbin/ip",
  // "netns", "exec", NS}) and has the daemon listen on `listen` instead of
  // 127.0.0.1:0.
  void Place(std::vector<std::string> exec_prefix, std::string listen) {
    exec_prefix_ = std::move(exec_prefix);
    listen_ = std::move(listen);
  }
  // Starts phalanxd and waits until it prints its addresses. Returns false
  // if it exits first (its output is kept in output()).
  bool Start();
  // SIGKILL, then reap.
  void Kill9();
  // SIGTERM, then reap; returns the exit status (or -1 if killed).
  int Terminate();
  // Waits up to `timeout` for the daemon to exit by itself; returns its
  // exit code, or -1 when it still runs (or a signal ended it).
  int WaitForExit(absl::Duration timeout);
  // Sends `signal` (SIGHUP) to the running daemon.
  void Signal(int signal);
  // Stops the daemon with SIGSTOP and returns once every one of its threads
  // is stopped (the kernel stops them asynchronously: without the wait, a
  // request sent right after the signal may still be served).
  void Pause();
  // Reads what the daemon printed since the last read (waits up to
  // `wait_ms` for more); appends it to output(). A ThreadSanitizer report
  // in it (a TSan build of phalanxd: scripts/tsan.sh) fails the test, with
  // the report. Every start, stop and kill reads.
  void ReadOutput(int wait_ms = 100);

  // `phalanxd --check-store` on this daemon's data dir (which it refuses
  // while the daemon runs): its exit code (-1 when it ran over 30 s and was
  // killed) and its output.
  struct CheckedStore {
    int exit_code = -1;
    std::string output;
  };
  CheckedStore CheckStore();

  const std::string& data_dir() const { return data_dir_; }
  pid_t pid() const { return process_.pid(); }
  const std::string& address() const { return address_; }
  int metrics_port() const { return metrics_port_; }
  const std::string& output() const { return output_; }
  // Writes `text` to a file in the data directory's parent; returns its path.
  std::string WriteFile(const std::string& name, const std::string& text);

  std::unique_ptr<v1::Scheduler::Stub> Scheduler() const;
  std::unique_ptr<v1::Fleet::Stub> Fleet() const;
  std::unique_ptr<v1::Admin::Stub> Admin() const;
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }

 private:
  std::vector<std::string> extra_args_;
  std::vector<std::string> exec_prefix_;
  std::string listen_ = "127.0.0.1:0";
  std::string root_;
  std::string data_dir_;
  ChildProcess process_;
  std::string address_;
  int metrics_port_ = 0;
  std::string output_;
  std::shared_ptr<grpc::Channel> channel_;
};

// Files the tests share: 2 blocks x 2 racks x 2 nodes of 8 H100 GPUs, levels
// block/rack, and queues "a" and "b".
std::string DemoFleetJson();
std::string DemoQueuesJson();
std::string DemoConfigJson();

// Starts a daemon with the demo fleet, queues and config.
std::unique_ptr<DaemonProcess> StartDemoDaemon(
    std::vector<std::string> extra_args = {});

// A pod set of `count` pods of `gpus` GPUs, REQUIRED at `level` (or
// unconstrained when empty), in queue `queue`.
v1::SubmitGangRequest SubmitRequest(const std::string& queue, int count,
                                    int gpus, const std::string& level = "",
                                    const std::string& request_id = "");

// SubmitGang, expecting OK; returns the gang in the reply.
v1::Gang SubmitOk(v1::Scheduler::Stub& stub,
                  const v1::SubmitGangRequest& request);
// GetGang, expecting OK; returns the gang.
v1::Gang GetOk(v1::Scheduler::Stub& stub, const std::string& id);

// The first WatchGangs event of `type` after revision `after` (others
// skipped), reading for at most `timeout`; an empty event when none came.
v1::GangEvent WaitForEvent(
    v1::Scheduler::Stub& stub, v1::EventType type, int64_t after,
    std::chrono::seconds timeout = std::chrono::seconds(30));

// What is wrong with the GPUs the gangs hold: a GPU held by two gangs, a
// node's used GPU no gang holds, a count that disagrees; one line each,
// none when all agree. Fails (ADD_FAILURE) when a listing fails.
std::vector<std::string> GpuHoldingProblems(v1::Scheduler::Stub& scheduler,
                                            v1::Fleet::Stub& fleet);

// An HTTP GET of http://127.0.0.1:port/path; returns the body ("" on error).
std::string HttpGet(int port, const std::string& path);

// Fails the test (ADD_FAILURE), with the report, when `output` of `program`
// holds a ThreadSanitizer report (a TSan build: scripts/tsan.sh).
void ExpectNoTsanReport(const std::string& program, std::string_view output);

// What a shell command printed and how it ended.
struct ShellResult {
  // The exit code; -1 when a signal ended it or it could not start.
  int exit_code = -1;
  // stdout and stderr.
  std::string output;
};
// Runs `command` through /bin/sh (popen) and waits for it to end; a
// ThreadSanitizer report in its output (a TSan build of phalanxctl) fails
// the test (ExpectNoTsanReport). Bound the command's own time (phalanxctl's
// --timeout): the wait has no bound of its own.
ShellResult RunShell(const std::string& command);

}  // namespace phalanx::testing

#endif  // PHALANX_TESTS_DAEMON_H_
