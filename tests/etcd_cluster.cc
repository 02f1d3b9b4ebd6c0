#include "tests/etcd_cluster.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace phalanx::testing {
namespace {

// Binds 127.0.0.1:`port` (0 = any free one); returns the bound port, or 0.
int BindPort(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  int bound = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    bound = ntohs(addr.sin_port);
  }
  close(fd);
  return bound;
}

std::string Tail(const std::string& path, size_t bytes) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  return all.size() > bytes ? all.substr(all.size() - bytes) : all;
}

}  // namespace

// A free port P whose neighbour P+1 is free too (client and peer ports),
// neither in `taken`. Picked below Linux's ephemeral range (32768 and up by
// default), from which the kernel hands out port-0 binds and outgoing
// connections: a port found free there (and released, since etcd binds it
// itself) could be given to another test's daemon before etcd binds it.
int FreePortPair(std::set<int>& taken) {
  static std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> pick(20000, 32000);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = pick(random);
    if (taken.count(port) || taken.count(port + 1)) continue;
    if (BindPort(port) == port && BindPort(port + 1) == port + 1) {
      taken.insert(port);
      taken.insert(port + 1);
      return port;
    }
  }
  return 0;
}

bool EtcdCluster::Available() { return access(kEtcdPath, X_OK) == 0; }

EtcdCluster::EtcdCluster(int members, EtcdClusterTls tls,
                         std::vector<std::string> extra_flags)
    : tls_(std::move(tls)), extra_flags_(std::move(extra_flags)) {
  char pattern[] = "/tmp/phalanx-etcd-XXXXXX";
  root_ = mkdtemp(pattern);
  std::set<int> taken;
  for (int i = 0; i < members; ++i) {
    Member member;
    member.name = absl::StrCat("e", i);
    member.client_port = FreePortPair(taken);
    member.peer_port = member.client_port + 1;
    members_.push_back(std::move(member));
  }
}

EtcdCluster::EtcdCluster(const std::vector<EtcdMemberPlace>& places) {
  char pattern[] = "/tmp/phalanx-etcd-XXXXXX";
  root_ = mkdtemp(pattern);
  for (size_t i = 0; i < places.size(); ++i) {
    Member member;
    member.name = absl::StrCat("e", i);
    member.host = places[i].host;
    member.exec_prefix = places[i].exec_prefix;
    member.client_port = 2379;
    member.peer_port = 2380;
    members_.push_back(std::move(member));
  }
}

EtcdCluster::~EtcdCluster() {
  for (int i = 0; i < size(); ++i) Kill(i);
  std::filesystem::remove_all(root_);
}

std::string EtcdCluster::endpoint(int i) const {
  return absl::StrCat(tls_.cert_file.empty() ? "http" : "https", "://",
                      members_[i].host, ":", members_[i].client_port);
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> all;
  for (int i = 0; i < size(); ++i) all.push_back(endpoint(i));
  return all;
}

std::string EtcdCluster::InitialCluster() const {
  std::string cluster;
  for (const Member& member : members_) {
    if (!cluster.empty()) cluster += ",";
    absl::StrAppend(&cluster, member.name, "=http://", member.host, ":",
                    member.peer_port);
  }
  return cluster;
}

bool EtcdCluster::Spawn(int i, const std::string& state) {
  Member& member = members_[i];
  const std::string client = endpoint(i);
  const std::string peer =
      absl::StrCat("http://", member.host, ":", member.peer_port);
  std::vector<std::string> args = member.exec_prefix;
  args.insert(
      args.end(),
      {std::string(kEtcdPath), "--name=" + member.name,
       "--data-dir=" + root_ + "/" + member.name,
       "--listen-client-urls=" + client, "--advertise-client-urls=" + client,
       "--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
       "--initial-cluster=" + InitialCluster(),
       "--initial-cluster-state=" + state,
       "--initial-cluster-token=phalanx-test",
       "--pre-vote=true",  // as deploy/ha ships
       "--logger=zap", "--log-outputs=stderr"});
  if (!tls_.cert_file.empty()) {
    args.push_back("--cert-file=" + tls_.cert_file);
    args.push_back("--key-file=" + tls_.key_file);
  }
  args.insert(args.end(), extra_flags_.begin(), extra_flags_.end());
  if (!member.process) member.process = std::make_unique<ChildProcess>();
  return member.process->Start({.args = args,
                                .env = {},
                                .output_path = LogPath(member),
                                .append_output = true});
}

bool EtcdCluster::Start() {
  for (int i = 0; i < size(); ++i) {
    if (!Spawn(i, "new")) return false;
  }
  for (int i = 0; i < size(); ++i) {
    if (!WaitHealthy(i)) return false;
  }
  return true;
}

void EtcdCluster::Kill(int i) {
  if (members_[i].process) members_[i].process->Kill9();
}

void EtcdCluster::Pause(int i) {
  if (members_[i].process) members_[i].process->Pause();
}

void EtcdCluster::Resume(int i) {
  if (members_[i].process) members_[i].process->Signal(SIGCONT);
}

bool EtcdCluster::Restart(int i) {
  Kill(i);
  return Spawn(i, "existing") && WaitHealthy(i);
}

std::shared_ptr<grpc::Channel> EtcdCluster::Channel(int i) const {
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::InsecureChannelCredentials();
  if (!tls_.cert_file.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = Tail(tls_.ca_file, 1 << 20);
    credentials = grpc::SslCredentials(ssl);
  }
  return grpc::CreateChannel(
      absl::StrCat(members_[i].host, ":", members_[i].client_port),
      credentials);
}

bool EtcdCluster::Healthy(int i, int timeout_ms) const {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(timeout_ms));
  etcdserverpb::RangeRequest request;
  request.set_key("health");  // a linearizable read needs a leader
  etcdserverpb::RangeResponse response;
  return etcdserverpb::KV::NewStub(Channel(i))
      ->Range(&context, request, &response)
      .ok();
}

namespace {

// A deadline `seconds` from now for one call to a member.
void SetDeadline(grpc::ClientContext& context, int seconds) {
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(seconds));
}

}  // namespace

std::vector<std::string> EtcdCluster::Alarms(int asked) const {
  grpc::ClientContext context;
  SetDeadline(context, 2);
  etcdserverpb::AlarmRequest request;
  request.set_action(etcdserverpb::AlarmRequest::GET);
  etcdserverpb::AlarmResponse response;
  std::vector<std::string> alarms;
  if (etcdserverpb::Maintenance::NewStub(Channel(asked))
          ->Alarm(&context, request, &response)
          .ok()) {
    for (const etcdserverpb::AlarmMember& alarm : response.alarms()) {
      alarms.push_back(etcdserverpb::AlarmType_Name(alarm.alarm()));
    }
  }
  return alarms;
}

std::string EtcdCluster::ReclaimSpace() {
  // 1. Compact the history to the current revision (a read's header).
  etcdserverpb::RangeResponse read;
  {
    grpc::ClientContext context;
    SetDeadline(context, 5);
    etcdserverpb::RangeRequest request;
    request.set_key("health");
    const grpc::Status status =
        etcdserverpb::KV::NewStub(Channel(0))->Range(&context, request, &read);
    if (!status.ok()) return "read: " + status.error_message();
  }
  {
    grpc::ClientContext context;
    SetDeadline(context, 10);
    etcdserverpb::CompactionRequest request;
    request.set_revision(read.header().revision());
    request.set_physical(true);
    etcdserverpb::CompactionResponse response;
    const grpc::Status status = etcdserverpb::KV::NewStub(Channel(0))
                                    ->Compact(&context, request, &response);
    // Compacted already (by phalanxd's snapshots) is as good.
    if (!status.ok() &&
        status.error_message().find("compacted") == std::string::npos) {
      return "compact: " + status.error_message();
    }
  }
  // 2. Defragment every member: each frees its own file's space.
  for (int i = 0; i < size(); ++i) {
    grpc::ClientContext context;
    SetDeadline(context, 20);
    etcdserverpb::DefragmentResponse response;
    const grpc::Status status =
        etcdserverpb::Maintenance::NewStub(Channel(i))
            ->Defragment(&context, etcdserverpb::DefragmentRequest(),
                         &response);
    if (!status.ok()) {
      return absl::StrCat("defragment ", members_[i].name, ": ",
                          status.error_message());
    }
  }
  // 3. Disarm every alarm raised.
  grpc::ClientContext context;
  SetDeadline(context, 2);
  etcdserverpb::AlarmRequest get;
  get.set_action(etcdserverpb::AlarmRequest::GET);
  etcdserverpb::AlarmResponse raised;
  auto maintenance = etcdserverpb::Maintenance::NewStub(Channel(0));
  if (grpc::Status status = maintenance->Alarm(&context, get, &raised);
      !status.ok()) {
    return "alarm list: " + status.error_message();
  }
  for (const etcdserverpb::AlarmMember& alarm : raised.alarms()) {
    grpc::ClientContext disarm_context;
    SetDeadline(disarm_context, 5);
    etcdserverpb::AlarmRequest disarm;
    disarm.set_action(etcdserverpb::AlarmRequest::DEACTIVATE);
    disarm.set_memberid(alarm.memberid());
    disarm.set_alarm(alarm.alarm());
    etcdserverpb::AlarmResponse response;
    if (grpc::Status status =
            maintenance->Alarm(&disarm_context, disarm, &response);
        !status.ok()) {
      return "alarm disarm: " + status.error_message();
    }
  }
  return "";
}

int EtcdCluster::RaftLeader(int asked) const {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(2));
  etcdserverpb::StatusRequest request;
  etcdserverpb::StatusResponse status;
  if (!etcdserverpb::Maintenance::NewStub(Channel(asked))
           ->Status(&context, request, &status)
           .ok()) {
    return -1;
  }
  // Status names members by id; the member answering knows its own.
  if (status.leader() == status.header().member_id()) return asked;
  for (int i = 0; i < size(); ++i) {
    if (i == asked) continue;
    grpc::ClientContext other_context;
    other_context.set_deadline(std::chrono::system_clock::now() +
                               std::chrono::seconds(2));
    etcdserverpb::StatusResponse other;
    if (etcdserverpb::Maintenance::NewStub(Channel(i))
            ->Status(&other_context, request, &other)
            .ok() &&
        other.header().member_id() == status.leader()) {
      return i;
    }
  }
  return -1;
}

int EtcdCluster::QuietMember(int except) const {
  int raft_leader = -1;
  for (int i = 0; i < size() && raft_leader < 0; ++i)
    raft_leader = RaftLeader(i);
  if (raft_leader < 0) return -1;
  for (int m = size() - 1; m >= 0; --m) {
    if (m != raft_leader && m != except) return m;
  }
  return -1;
}

bool EtcdCluster::WaitHealthy(int i) {
  ChildProcess* process = members_[i].process.get();
  return process != nullptr &&
         process->WaitUntil([&] { return Healthy(i); }, absl::Seconds(30),
                            absl::Milliseconds(50));
}

std::string EtcdCluster::LogPath(const Member& member) const {
  return root_ + "/" + member.name + ".log";
}

std::string EtcdCluster::logs() const {
  std::string all;
  for (const Member& member : members_) {
    absl::StrAppend(&all, "--- ", member.name, " ---\n",
                    Tail(LogPath(member), 2000), "\n");
  }
  return all;
}

}  // namespace phalanx::testing
