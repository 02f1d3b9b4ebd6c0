#include "server/ha_mode.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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
  return absl::OkStatus();
}

// True when one of `signals` is pending (and takes it).
bool SignalPending(const sigset_t& signals) {
  const timespec now{0, 0};
  const int signal = sigtimedwait(&signals, nullptr, &now);
  return signal == SIGTERM || signal == SIGINT;
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
  replica->store_ = std::make_unique<storage::etcd::EtcdStateStore>(
      replica->client_.get(), std::move(local), store_options);
  EtcdElectionOptions election;
  election.prefix = o.prefix;
  election.replica_id = o.replica_id;
  election.address = o.advertise_address;
  election.lease_ttl = o.lease_ttl;
  replica->election_ =
      std::make_unique<EtcdElection>(replica->client_.get(), election, [] {
        // Fail-stop: memory may be ahead of what this term may commit.
        std::fprintf(stderr, "phalanxd: not the leader any more, exiting\n");
        std::fflush(stdout);
        std::_Exit(3);
      });
  return replica;
}

absl::Status HaReplica::WaitToLead(const sigset_t& signals) {
  bool announced = false;
  // Each round: catch up, then campaign for one lease TTL (so signals are
  // seen within a TTL).
  while (!SignalPending(signals)) {
    if (absl::StatusOr<int64_t> applied = store_->CatchUp(); !applied.ok()) {
      std::fprintf(stderr, "phalanxd: standby: catching up: %s\n",
                   applied.status().ToString().c_str());
    }
    absl::StatusOr<int64_t> term =
        election_->Campaign(absl::Now() + options_.lease_ttl);
    if (term.ok()) {
      store_->set_term(*term);
      std::printf("phalanxd: leading %s as %s, term %lld\n",
                  options_.prefix.c_str(), options_.replica_id.c_str(),
                  static_cast<long long>(*term));
      std::fflush(stdout);
      return absl::OkStatus();
    }
    if (term.status().code() != absl::StatusCode::kDeadlineExceeded) {
      std::fprintf(stderr, "phalanxd: standby: campaign: %s\n",
                   term.status().ToString().c_str());
      absl::SleepFor(absl::Seconds(1));
    } else if (!announced) {
      absl::StatusOr<LeaderInfo> leader = election_->Leader();
      std::printf("phalanxd: standby: %s leads\n",
                  leader.ok() ? leader->address.c_str() : "another replica");
      std::fflush(stdout);
      announced = true;
    }
  }
  return absl::CancelledError("stopped while standing by");
}

}  // namespace phalanx::server
