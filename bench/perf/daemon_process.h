// PhalanxdProcess: runs the real phalanxd binary for the load generator (a
// ChildProcess, its output in <data_dir>.log), on ephemeral loopback ports, and
// reports how long it took to answer, its resident memory and its metrics. Not
// thread-safe; one owner.
#ifndef PHALANX_BENCH_PERF_DAEMON_PROCESS_H_
#define PHALANX_BENCH_PERF_DAEMON_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "tests/child_process.h"

namespace phalanx::perf {

class PhalanxdProcess {
 public:
  // `binary` is phalanxd; `args` are added after the listen and data-dir
  // flags.
  PhalanxdProcess(std::string binary, std::string data_dir,
                  std::vector<std::string> args);
  ~PhalanxdProcess();  // SIGKILL if still running
  PhalanxdProcess(const PhalanxdProcess&) = delete;
  PhalanxdProcess& operator=(const PhalanxdProcess&) = delete;

  // With --auth: the bearer token every call of the load generator sends
  // (set before Start; "" = none).
  void set_token(const std::string& token) {
    authorization_ = token.empty() ? "" : "Bearer " + token;
  }
  // Adds the token's `authorization` metadata to `context` (nothing without
  // a token). Loopback without TLS: gRPC sends no call credentials on an
  // insecure channel, so the header goes in the call's metadata.
  void Authorize(grpc::ClientContext& context) const;
  // Whether the server answers: by default an Admin.GetConfig through the
  // scheduler loop; another server (the empty-RPC baseline) sets its own.
  using ReadyProbe =
      std::function<bool(const std::shared_ptr<grpc::Channel>& channel)>;
  void set_ready_probe(ReadyProbe probe) { ready_probe_ = std::move(probe); }

  // Starts the binary, waits for its printed addresses and then for the
  // ready probe to succeed, at most `timeout_seconds`. Returns false when it
  // exits or times out (output() tells why).
  bool Start(double timeout_seconds = 60);
  // Seconds from fork to the printed gRPC address, and to the first answered
  // RPC.
  double seconds_to_address() const { return seconds_to_address_; }
  double seconds_to_serving() const { return seconds_to_serving_; }
  // SIGTERM and reap (SIGKILL after 30 s); returns the exit code or -1.
  int Terminate();

  // VmRSS of the process in bytes (0 when unknown).
  int64_t RssBytes() const;
  // The sum of the samples of `metric` on /metrics whose labels contain
  // `label_filter` (for example `state="PENDING"`); -1 when none.
  double Metric(const std::string& metric,
                const std::string& label_filter = "") const;

  const std::string& address() const { return address_; }
  // What it printed so far (stdout and stderr, in <data_dir>.log).
  std::string output() const { return process_.Output(); }
  pid_t pid() const { return process_.pid(); }
  // A new channel; distinct `shard` values get distinct TCP connections.
  std::shared_ptr<grpc::Channel> NewChannel(int shard = 0) const;

 private:
  // Waits for both printed addresses; false when it exits or times out.
  bool WaitForAddresses(absl::Duration timeout);
  // Whether the server answers the ready probe now.
  bool Answers(const std::shared_ptr<grpc::Channel>& channel);

  std::string binary_;
  std::string data_dir_;
  std::vector<std::string> args_;
  std::string authorization_;  // "Bearer TOKEN" or ""
  ReadyProbe ready_probe_;
  ::phalanx::testing::ChildProcess process_;
  std::string address_;
  int metrics_port_ = 0;
  double seconds_to_address_ = 0;
  double seconds_to_serving_ = 0;
};

// Body of http://127.0.0.1:port/path ("" on error); waits at most 5 s.
std::string HttpGet(int port, const std::string& path);

// VmRSS of process `pid` in bytes from /proc (0 when unknown).
int64_t RssBytesOf(pid_t pid);

// CPU time (user + system) process `pid` has used, in seconds, from /proc
// (0 when unknown).
double CpuSecondsOf(pid_t pid);

}  // namespace phalanx::perf

#endif  // PHALANX_BENCH_PERF_DAEMON_PROCESS_H_
