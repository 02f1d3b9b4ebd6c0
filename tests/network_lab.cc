#include "tests/network_lab.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "tests/child_process.h"

namespace phalanx::testing {
namespace {

constexpr char kIp[] = "/usr/sbin/ip";
constexpr char kBridge[] = "phx-br";
constexpr char kClientAddress[] = "10.77.0.1";
// No interface has it: frames sent to it are dropped by every receiver.
constexpr char kNowhere[] = "02:00:00:00:00:01";

bool entered = false;

// Runs `args` (argv[0] a path) to its end within 10 s; returns whether it
// exited 0, appending what it printed to `log` otherwise.
bool RunQuietly(const std::vector<std::string>& args, const std::string& out,
                std::string* log) {
  ChildProcess child;
  if (!child.Start({.args = args, .env = {}, .output_path = out})) {
    absl::StrAppend(log, "cannot start ", args[0], "\n");
    return false;
  }
  child.WaitUntil([] { return false; }, absl::Seconds(10));
  const int code =
      child.Running() ? child.Stop(absl::Seconds(1)) : child.exit_code();
  if (code == 0) return true;
  absl::StrAppend(log, absl::StrJoin(args, " "), ": exit ", code, ": ",
                  child.Output(), "\n");
  return false;
}

std::string TempDir() {
  char pattern[] = "/tmp/phalanx-netlab-XXXXXX";
  return mkdtemp(pattern);
}

}  // namespace

bool NetworkLab::EnterPrivateNetwork(std::string* why) {
  if (access(kIp, X_OK) != 0) {
    *why = absl::StrCat(kIp, " is absent (iproute2)");
    return false;
  }
  if (unshare(CLONE_NEWNET) != 0) {
    *why = "cannot make a network namespace (unshare: needs CAP_SYS_ADMIN)";
    return false;
  }
  const std::string dir = TempDir();
  const std::string out = dir + "/ip.log";
  std::string log;
  const bool ok =
      RunQuietly({kIp, "link", "set", "lo", "up"}, out, &log) &&
      RunQuietly({kIp, "link", "add", kBridge, "type", "bridge"}, out, &log) &&
      RunQuietly({kIp, "addr", "add", absl::StrCat(kClientAddress, "/24"),
                  "dev", kBridge},
                 out, &log) &&
      RunQuietly({kIp, "link", "set", kBridge, "up"}, out, &log);
  std::filesystem::remove_all(dir);
  if (!ok) *why = log;
  entered = ok;
  return ok;
}

bool NetworkLab::Entered() { return entered; }

NetworkLab::NetworkLab(int nodes) : root_(TempDir()) {
  static std::atomic<int> labs{0};
  const int lab = labs++;
  ok_ = entered;
  if (!ok_) log_ = "not in a private network (EnterPrivateNetwork)\n";
  for (int i = 0; ok_ && i < nodes; ++i) {
    const std::string ns = absl::StrCat("phx-", getpid(), "-", lab, "-", i);
    const std::string port = absl::StrCat("v", lab, "n", i);
    ok_ = Ip({"netns", "add", ns});
    if (!ok_) break;
    names_.push_back(ns);
    ok_ = Ip({"link", "add", port, "type", "veth", "peer", "name", "eth0",
              "netns", ns}) &&
          Ip({"link", "set", port, "master", kBridge}) &&
          Ip({"link", "set", port, "up"}) &&
          Ip({"-n", ns, "addr", "add", address(i) + "/24", "dev", "eth0"}) &&
          Ip({"-n", ns, "link", "set", "eth0", "up"}) &&
          Ip({"-n", ns, "link", "set", "lo", "up"});
  }
}

NetworkLab::~NetworkLab() {
  for (const std::string& ns : names_) Ip({"netns", "del", ns});
  std::filesystem::remove_all(root_);
}

std::string NetworkLab::address(int i) const {
  return absl::StrCat("10.77.0.", 10 + i);
}

std::vector<std::string> NetworkLab::exec_prefix(int i) const {
  return {kIp, "netns", "exec", names_[i]};
}

bool NetworkLab::Ip(const std::vector<std::string>& args) {
  std::vector<std::string> command = {kIp};
  command.insert(command.end(), args.begin(), args.end());
  return RunQuietly(command, root_ + "/ip.log", &log_);
}

bool NetworkLab::Pin(int side, int peer, bool pinned) {
  const std::string peer_address =
      peer == kClients ? std::string(kClientAddress) : address(peer);
  std::vector<std::string> args;
  if (side != kClients) args = {"-n", names_[side]};
  const std::string device = side == kClients ? kBridge : "eth0";
  if (pinned) {
    args.insert(args.end(), {"neigh", "replace", peer_address, "lladdr",
                             kNowhere, "dev", device, "nud", "permanent"});
  } else {
    args.insert(args.end(), {"neigh", "del", peer_address, "dev", device});
  }
  return Ip(args);
}

bool NetworkLab::Cut(int a, int b) {
  cuts_.emplace_back(a, b);
  return Pin(a, b, true) && Pin(b, a, true);
}

bool NetworkLab::Isolate(int i) {
  bool ok = Cut(i, kClients);
  for (int j = 0; j < size(); ++j) {
    if (j != i) ok = Cut(i, j) && ok;
  }
  return ok;
}

bool NetworkLab::Heal(int a, int b) {
  auto cut = std::find(cuts_.begin(), cuts_.end(), std::make_pair(a, b));
  if (cut != cuts_.end()) cuts_.erase(cut);
  const bool ok = Pin(a, b, false);
  return Pin(b, a, false) && ok;
}

bool NetworkLab::HealAll() {
  bool ok = true;
  while (!cuts_.empty()) {
    const auto [a, b] = cuts_.back();
    ok = Heal(a, b) && ok;
  }
  return ok;
}

}  // namespace phalanx::testing
