#include "server/ha_mode.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/check.h"
#include "core/status_macros.h"

namespace phalanx::server {
namespace {

absl::Status CheckOptions(const HaOptions& options) {
  if (options.replica_id.empty() ||
      absl::StrContains(options.replica_id, ' ')) {
    return absl::InvalidArgumentError(
        "--replica-id: required in HA mode, without spaces");
  }
  if (options.advertise_address.empty()) {
    return absl::InvalidArgumentError(
        "--advertise-address: required in HA mode");
  }
  if (!absl::StartsWith(options.prefix, "/") ||
      absl::EndsWith(options.prefix, "/")) {
    return absl::InvalidArgumentError(
        "--etcd-prefix: must start with '/' and not end with one");
  }
  if (options.lease_ttl < absl::Seconds(2)) {
    return absl::InvalidArgumentError("--etcd-lease-ttl: must be >= 2s");
  }
  if (options.snapshot_every_entries < 1) {
    return absl::InvalidArgumentError("--etcd-snapshot-entries: must be >= 1");
  }
  if (options.snapshot_every_mib < 1 || options.snapshot_every_mib > 1024) {
    return absl::InvalidArgumentError(
        "--etcd-snapshot-mib: must be in 1..1024");
  }
  if (options.max_batch_bytes < 4096 ||
      options.max_batch_bytes > (int64_t{4} << 20)) {
    return absl::InvalidArgumentError(
        "--etcd-max-batch-bytes: must be in 4096..4194304");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<HaReplica>> HaReplica::Open(
    HaOptions options, const std::string& data_dir) {
  RETURN_IF_ERROR(CheckOptions(options));
  std::unique_ptr<HaReplica> replica(new HaReplica());
  replica->options_ = std::move(options);
  const HaOptions& o = replica->options_;
  ASSIGN_OR_RETURN(replica->client_,
                   storage::etcd::EtcdClient::Connect(o.etcd));
  ASSIGN_OR_RETURN(auto local, storage::RocksDbStore::Open(data_dir));
  storage::etcd::EtcdStateStoreOptions store_options;
  store_options.prefix = o.prefix;
  store_options.replica_id = o.replica_id;  // publishes PREFIX/applied/ID
  store_options.snapshot_every_entries = o.snapshot_every_entries;
  store_options.snapshot_every_bytes = static_cast<size_t>(o.snapshot_every_mib)
                                       << 20;
  store_options.max_batch_bytes = static_cast<size_t>(o.max_batch_bytes);
  replica->store_ = std::make_unique<storage::etcd::EtcdStateStore>(
      replica->client_.get(), std::move(local), store_options);
  return replica;
}

void HaReplica::set_advertise_address(std::string address) {
  PHALANX_CHECK(election_ == nullptr);
  options_.advertise_address = std::move(address);
}

EtcdElection& HaReplica::election() {
  if (election_ == nullptr) {
    EtcdElectionOptions election;
    election.prefix = options_.prefix;
    election.replica_id = options_.replica_id;
    election.address = options_.advertise_address;
    election.lease_ttl = options_.lease_ttl;
    election_ = std::make_unique<EtcdElection>(client_.get(), election, [] {
      // Fail-stop: memory may be ahead of what this term may commit.
      std::fprintf(stderr, "phalanxd: not the leader any more, exiting\n");
      std::fflush(stdout);
      std::_Exit(3);
    });
  }
  return *election_;
}

std::string HaReplica::LeaderAddress() {
  absl::StatusOr<LeaderInfo> leader = election().Leader();
  return leader.ok() ? leader->address : "";
}

absl::Status HaReplica::WaitToLead(
    const std::function<bool()>& stop,
    const std::function<void(const std::string&)>& on_leader) {
  EtcdElection& election = this->election();
  std::string announced;
  // Each round campaigns for one lease TTL, so `stop` is seen within one.
  while (!stop()) {
    absl::StatusOr<int64_t> term =
        election.Campaign(absl::Now() + options_.lease_ttl);
    if (term.ok()) {
      store_->set_term(*term);
      std::printf("phalanxd: leading %s as %s, term %lld\n",
                  options_.prefix.c_str(), options_.replica_id.c_str(),
                  static_cast<long long>(*term));
      std::fflush(stdout);
      return absl::OkStatus();
    }
    if (term.status().code() != absl::StatusCode::kDeadlineExceeded) {
      std::fprintf(stderr, "phalanxd: follower: campaign: %s\n",
                   term.status().ToString().c_str());
      absl::SleepFor(absl::Seconds(1));
    }
    absl::StatusOr<LeaderInfo> leader = election.Leader();
    const std::string address = leader.ok() ? leader->address : "";
    on_leader(address);
    if (address != announced) {
      std::printf("phalanxd: following: %s leads\n",
                  address.empty() ? "nobody" : address.c_str());
      std::fflush(stdout);
      announced = address;
    }
  }
  return absl::CancelledError("stopped while following");
}

}  // namespace phalanx::server
