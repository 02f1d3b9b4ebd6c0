// EtcdCluster: a real etcd cluster for tests — N members of /usr/bin/etcd on
// free loopback ports (each a ChildProcess, its log appended to
// <root>/<name>.log), with data in a temporary directory — that a test can
// kill and restart member by member (quorum and fail-over tests). Only the
// processes it started are ever signalled. Not thread-safe; one per test.
#ifndef PHALANX_TESTS_ETCD_CLUSTER_H_
#define PHALANX_TESTS_ETCD_CLUSTER_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "tests/child_process.h"

namespace phalanx::testing {

// Returns a free loopback port P whose neighbour P+1 is free too, neither
// in `taken` (both are added to it), or 0 after 200 tries. Picked in
// 20000..32000, below Linux's ephemeral range, so that a port found free
// and released is not handed to another test's port-0 bind before its user
// (etcd, a torch rendezvous) binds it.
int FreePortPair(std::set<int>& taken);

// Serves the client URLs over TLS with this certificate when set (the
// peers keep plain HTTP); `ca_file` signs it, for the health checks.
struct EtcdClusterTls {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

// Where a member runs, for clusters spread over network namespaces
// (tests/network_lab.h): its own address (its ports are then etcd's
// usual 2379 and 2380 there) and the command prefix that starts it in its
// namespace ({"/usr/sbin/ip", "netns", "exec", NS}).
struct EtcdMemberPlace {
  std::string host;
  std::vector<std::string> exec_prefix;
};

class EtcdCluster {
 public:
  // Where the etcd binary is looked for.
  static constexpr const char* kEtcdPath = "/usr/bin/etcd";
  // True when kEtcdPath exists (tests skip otherwise).
  static bool Available();

  // `extra_flags` go to every member's command line, at every start (for
  // example "--quota-backend-bytes=N").
  explicit EtcdCluster(int members = 3, EtcdClusterTls tls = {},
                       std::vector<std::string> extra_flags = {});
  // One member at each place (plain HTTP).
  explicit EtcdCluster(const std::vector<EtcdMemberPlace>& places);
  ~EtcdCluster();  // kills the members it started, removes the directory
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  // Starts every member and waits (at most 30 s) until a linearizable read
  // succeeds on each. Returns false otherwise (logs() says why).
  bool Start();
  // SIGKILLs member `i` (its data stays).
  void Kill(int i);
  // SIGSTOPs member `i`: its sockets stay open and nothing answers, as
  // when the network drops its packets. Resume sends SIGCONT.
  void Pause(int i);
  void Resume(int i);
  // Starts member `i` again on its data and waits (at most 30 s) until it
  // serves a linearizable read. Returns false otherwise.
  bool Restart(int i);
  // True while member `i` answers a linearizable read within `timeout_ms`.
  bool Healthy(int i, int timeout_ms = 1000) const;

  // The alarms the cluster has raised, as member `asked` reports them
  // ("NOSPACE" once a member is over --quota-backend-bytes); empty when
  // none, or when it does not answer.
  std::vector<std::string> Alarms(int asked = 0) const;
  // What an operator does when etcd is over its space quota: compacts the
  // history to the current revision, defragments every member, then
  // disarms every alarm raised. Returns "" when all of it succeeded, else
  // what failed.
  std::string ReclaimSpace();

  // The member that is etcd's raft leader, as member `asked` sees it; -1
  // when it does not answer or knows none.
  int RaftLeader(int asked) const;
  // The highest-numbered member other than `except` that is not the raft
  // leader (cutting it off costs no etcd election); -1 when the leader is
  // not known.
  int QuietMember(int except = -1) const;

  int size() const { return static_cast<int>(members_.size()); }
  // "http://HOST:P" (or https://) of member `i` (HOST 127.0.0.1 unless
  // placed).
  std::string endpoint(int i) const;
  // Every member's endpoint.
  std::vector<std::string> endpoints() const;
  // The tail of every member's log, for failure messages.
  std::string logs() const;
  const std::string& root() const { return root_; }

 private:
  struct Member {
    std::string name;
    std::string host = "127.0.0.1";
    std::vector<std::string> exec_prefix;
    int client_port = 0;
    int peer_port = 0;
    std::unique_ptr<ChildProcess> process;  // its log: LogPath()
  };
  // A channel to member `i`'s client port.
  std::shared_ptr<grpc::Channel> Channel(int i) const;
  // Forks and execs member `i`; `state` is "new" or "existing".
  bool Spawn(int i, const std::string& state);
  // Waits until member `i` is healthy or 30 s pass.
  bool WaitHealthy(int i);
  std::string InitialCluster() const;
  std::string LogPath(const Member& member) const;

  std::string root_;
  EtcdClusterTls tls_;
  std::vector<std::string> extra_flags_;
  std::vector<Member> members_;
};

}  // namespace phalanx::testing

#endif  // PHALANX_TESTS_ETCD_CLUSTER_H_
