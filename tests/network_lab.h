// NetworkLab: a small network of Linux network namespaces for partition
// tests. The test process moves into a network namespace of its own
// (EnterPrivateNetwork, once, before any thread starts), which holds a
// bridge with the address 10.77.0.1/24: the clients' side. Each node of
// the lab is a named namespace ("phx-<pid>-<n>-<i>") joined to the bridge
// by a veth pair, its end "eth0" holding 10.77.0.(10 + i)/24; processes
// run in it through exec_prefix(i) ("ip netns exec NS …", with
// tests/child_process.h). Nothing is added to the host's own interfaces:
// every address lives inside namespaces that go away with the lab (the
// named ones in the destructor, the test's own when the process exits).
//
// Cut(a, b) makes the link between two nodes (or a node and the clients)
// drop every packet, both ways and silently, as a partition does: each
// side's neighbour entry for the other is pinned to a MAC address no
// interface has. Heal(a, b) removes the pins and ARP finds the peers again.
// (tc's netem and drop actions are not in every kernel; neighbour entries
// are.)
//
// Not thread-safe; one per test. Commands are run with /usr/sbin/ip; what
// they printed is in log().
#ifndef PHALANX_TESTS_NETWORK_LAB_H_
#define PHALANX_TESTS_NETWORK_LAB_H_

#include <string>
#include <vector>

namespace phalanx::testing {

class NetworkLab {
 public:
  // The clients' side (the test process) in Cut and Heal.
  static constexpr int kClients = -1;

  // Moves this process into a network namespace of its own and builds the
  // bridge there. Call once, from the main thread, before any other thread
  // exists (a gtest Environment's SetUp). Returns false, with the reason
  // in `why`, when namespaces cannot be made (no CAP_SYS_ADMIN, no `ip`).
  static bool EnterPrivateNetwork(std::string* why);
  // Whether EnterPrivateNetwork succeeded in this process.
  static bool Entered();

  // Makes `nodes` namespaces joined to the bridge. ok() says whether every
  // step worked (log() says why not).
  explicit NetworkLab(int nodes);
  ~NetworkLab();  // deletes the namespaces it made
  NetworkLab(const NetworkLab&) = delete;
  NetworkLab& operator=(const NetworkLab&) = delete;

  bool ok() const { return ok_; }
  int size() const { return static_cast<int>(names_.size()); }
  // Node `i`'s address, "10.77.0.(10 + i)".
  std::string address(int i) const;
  // {"/usr/sbin/ip", "netns", "exec", NS}: runs a command in node `i`.
  std::vector<std::string> exec_prefix(int i) const;

  // Drops every packet between `a` and `b` (node indices or kClients).
  bool Cut(int a, int b);
  // Cuts node `i` from every other node and from the clients.
  bool Isolate(int i);
  // Undoes Cut(a, b).
  bool Heal(int a, int b);
  // Undoes every cut.
  bool HealAll();

  const std::string& log() const { return log_; }

 private:
  // Runs /usr/sbin/ip with `args`; false (and the output in log_) unless
  // it exits 0 within 10 s.
  bool Ip(const std::vector<std::string>& args);
  // Pins (or unpins) the neighbour entry of `peer` on `side`.
  bool Pin(int side, int peer, bool pinned);

  std::string root_;  // a temporary directory for the commands' output
  std::vector<std::string> names_;
  std::vector<std::pair<int, int>> cuts_;
  std::string log_;
  bool ok_ = false;
};

}  // namespace phalanx::testing

#endif  // PHALANX_TESTS_NETWORK_LAB_H_
