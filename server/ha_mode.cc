#include "server/ha_mode.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/check.h"
#include "core/status_macros.h"
#include "server/follower.h"

namespace phalanx::server {

absl::Status CheckHaOptions(const HaOptions& options) {
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

void ExitDeposed(const std::string& why) {
  // Fail-stop: memory may be ahead of what this term may commit.
  std::fprintf(stderr, "phalanxd: not the leader any more (%s), exiting\n",
               why.c_str());
  std::fflush(stdout);
  std::_Exit(kExitDeposed);
}

absl::StatusOr<std::unique_ptr<HaReplica>> HaReplica::Open(
    HaOptions options, const std::string& data_dir) {
  RETURN_IF_ERROR(CheckHaOptions(options));
  std::unique_ptr<HaReplica> replica(new HaReplica());
  replica->options_ = std::move(options);
  // Each attempt at most a quarter of the lease: a hung etcd member costs
  // that much before the next one is tried, and renewals and commits get
  // through well within the lease (docs/ha.md, "Time budget").
  replica->options_.etcd.call_timeout = std::min(
      replica->options_.etcd.call_timeout, replica->options_.lease_ttl / 4);
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
    election_ = std::make_unique<EtcdElection>(
        client_.get(), election, [] { ExitDeposed("the lease is lost"); });
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
  std::string campaign_error;  // logged once while it lasts
  // Each round campaigns for one lease TTL, so `stop` is seen within one.
  while (!stop()) {
    absl::StatusOr<int64_t> term =
        election.Campaign(absl::Now() + options_.lease_ttl);
    if (term.ok()) {
      store_->set_term(*term);
      store_->set_lease_fence(
          {[&election] { return election.valid_until(); },
           [](const absl::Status& why) { ExitDeposed(why.ToString()); }});
      std::printf("phalanxd: leading %s as %s, term %lld\n",
                  options_.prefix.c_str(), options_.replica_id.c_str(),
                  static_cast<long long>(*term));
      std::fflush(stdout);
      return absl::OkStatus();
    }
    if (term.status().code() != absl::StatusCode::kDeadlineExceeded) {
      if (term.status().ToString() != campaign_error) {
        campaign_error = term.status().ToString();
        std::fprintf(stderr,
                     "phalanxd: follower: campaign: %s (logged again when "
                     "the error changes)\n",
                     campaign_error.c_str());
      }
      absl::SleepFor(absl::Seconds(1));
    } else {
      campaign_error.clear();  // etcd answered: another replica leads
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

namespace {

// An HA follower takes what the leader's loop takes from its config after
// every batch (watch settings, the default request rate) from the
// replicated one.
void FollowConfig(const core::Config& config, WatchHub& hub, Gate& gate) {
  hub.Configure(config);
  gate.rate_limiter().SetDefaults(config.limits.requests_per_second,
                                  config.limits.request_burst);
}

// Ends the watch streams of a follower whose state just went stale: open,
// they would hear nothing until it caught up again. UNAVAILABLE (retry),
// after a last bookmark: the client resumes from it on another replica, or
// here once this one serves again.
void EndStaleWatches(WatchHub& hub) {
  hub.EndAll(grpc::Status(
      grpc::StatusCode::UNAVAILABLE,
      "WatchGangs: this replica lost touch with etcd, its state may be "
      "stale; reconnect, or resume from your last revision on another "
      "replica"));
}

// Follows the log until it leads: each applied batch becomes the next read
// view and its events reach the watch streams, as on the leader; health ""
// is SERVING once caught up, phalanx.v1.Leader once leading.
class HaMode : public DaemonMode {
 public:
  explicit HaMode(std::unique_ptr<HaReplica> replica)
      : replica_(std::move(replica)) {}

  DaemonStores stores() override {
    // Backups copy the embedded store; etcd holds the state of record, so
    // CreateBackup is UNIMPLEMENTED here (docs/ha.md).
    return {replica_->store(), replica_->store(), replica_->store()->local(),
            nullptr};
  }
  absl::StatusOr<StartState> Recover(const StartupFiles& files) override;
  int MaxMessageBytes(int requested) override;
  void Attach(const DaemonParts& parts) override;
  void OnServing(int port, grpc::HealthCheckServiceInterface* health) override;
  absl::Status Lead(const std::function<bool()>& stop) override;
  void StopFollowing() override {
    if (follower_) follower_->Stop();
  }
  bool Resign() override;

 private:
  void StartFollower();
  absl::Status Promote();

  std::unique_ptr<HaReplica> replica_;
  ReplicaRole role_;
  DaemonParts parts_;
  grpc::HealthCheckServiceInterface* health_ = nullptr;
  std::optional<core::Config> follower_config_;
  // Whether the start-up catch-up succeeded, and when it began (what the
  // follower's freshness counts from; InfinitePast when it failed).
  bool caught_up_ = true;
  absl::Time caught_up_as_of_ = absl::InfinitePast();
  std::unique_ptr<Follower> follower_;
};

// The view of the local store once caught up with the log; the scheduler
// is restored only when this replica leads.
absl::StatusOr<StartState> HaMode::Recover(const StartupFiles&) {
  const absl::Time began = absl::Now();
  if (auto applied = replica_->store()->CatchUp(); !applied.ok()) {
    caught_up_ = false;
    std::fprintf(stderr, "phalanxd: follower: catching up: %s\n",
                 applied.status().ToString().c_str());
  } else {
    caught_up_as_of_ = began;
  }
  ASSIGN_OR_RETURN(core::LoadedState loaded,
                   replica_->store()->local()->LoadAll());
  StartState state;
  state.view = ViewOfState(loaded);
  state.revision = state.view->revision;
  state.gangs = state.view->gangs.size();
  follower_config_ = loaded.config;
  return state;
}

// At most half the log's batch bound (docs/ha.md), so one command cannot
// make a batch etcd refuses.
int HaMode::MaxMessageBytes(int requested) {
  const int bound = static_cast<int>(storage::etcd::kDefaultMaxBatchBytes / 2);
  if (requested > bound) {
    std::printf("phalanxd: HA mode: --max-message-bytes capped at %d\n", bound);
  }
  return std::min(requested, bound);
}

void HaMode::Attach(const DaemonParts& parts) {
  parts_ = parts;
  // Until the follower reports, a replica whose start-up catch-up failed
  // serves no read: its store may be arbitrarily old.
  role_.set_stale(!caught_up_);
  parts.gate->set_role(&role_);
  parts.metrics->SetLeader(false, 0);
  if (follower_config_)
    FollowConfig(*follower_config_, *parts.hub, *parts.gate);
}

// "" is SERVING by default; here only once caught up, and
// phalanx.v1.Leader only on the leader.
void HaMode::OnServing(int port, grpc::HealthCheckServiceInterface* health) {
  health_ = health;
  health_->SetServingStatus("", caught_up_);
  health_->SetServingStatus(kLeaderHealthService, false);
  // --advertise-address defaults to --listen: name the bound port.
  if (absl::EndsWith(replica_->advertise_address(), ":0")) {
    replica_->set_advertise_address(
        BoundAddress(replica_->advertise_address(), port));
  }
  // Known before the address is printed: a write sent as soon as this
  // replica serves gets the hint.
  role_.set_leader_address(replica_->LeaderAddress());
  StartFollower();
}

void HaMode::StartFollower() {
  Follower::Options options;
  options.prefix = replica_->options().prefix;
  // Stale (NOT_SERVING, reads refused) within 0.6 of a lease TTL of the
  // last catch-up: before a new leader can have been elected and written.
  const absl::Duration ttl = replica_->options().lease_ttl;
  options.max_staleness = ttl / 2;
  options.resync = ttl / 5;
  options.fresh_as_of = caught_up_as_of_;
  Follower::Hooks hooks;
  SchedulerLoop& loop = *parts_.loop;
  WatchHub& hub = *parts_.hub;
  Gate& gate = *parts_.gate;
  hooks.on_batch = [&loop, &hub, &gate](const core::Mutation& mutation) {
    if (mutation.config) FollowConfig(*mutation.config, hub, gate);
    loop.Replicate(mutation);
    hub.OnDurable(mutation, absl::ZeroDuration(), 0);
  };
  hooks.on_reset = [&loop, &hub, &gate, db = replica_->store()->local()] {
    absl::StatusOr<core::LoadedState> state = db->LoadAll();
    if (!state.ok()) {
      std::fprintf(stderr, "phalanxd: follower: reloading: %s\n",
                   state.status().ToString().c_str());
      return;
    }
    if (state->config) FollowConfig(*state->config, hub, gate);
    loop.ReplaceView(ViewOfState(*state));
  };
  auto serving = std::make_shared<int>(-1);  // on_progress calls only
  auto fresh = std::make_shared<bool>(caught_up_);
  hooks.on_progress = [metrics = parts_.metrics, health = health_,
                       role = &role_, &hub, serving,
                       fresh](const FollowerProgress& progress) {
    metrics->SetReplication(progress.applied_seq,
                            progress.last_seq - progress.applied_seq);
    role->set_stale(!progress.fresh);
    if (*fresh && !progress.fresh) EndStaleWatches(hub);
    *fresh = progress.fresh;
    if (*serving != static_cast<int>(progress.caught_up)) {
      *serving = progress.caught_up;
      health->SetServingStatus("", progress.caught_up);
    }
  };
  follower_ = std::make_unique<Follower>(replica_->client(), replica_->store(),
                                         std::move(options), hooks);
  follower_->Start();
}

absl::Status HaMode::Lead(const std::function<bool()>& stop) {
  absl::Status led =
      replica_->WaitToLead(stop, [this](const std::string& address) {
        role_.set_leader_address(address);
      });
  if (absl::IsCancelled(led)) return absl::OkStatus();
  if (led.ok()) {
    // Writes meanwhile name this replica: retried, they land here.
    role_.set_leader_address(replica_->advertise_address());
    follower_->Stop();
    // Before the loop starts: its thread reads it after each batch.
    parts_.metrics->SetAppliedSeq(
        [store = replica_->store()] { return store->applied_seq(); });
    led = Promote();
  }
  if (!led.ok()) {
    // Leading without a scheduler helps nobody: give the lease up.
    std::fprintf(stderr, "phalanxd: promotion failed: %s\n",
                 led.ToString().c_str());
    (void)replica_->Resign();
    return led;
  }
  role_.set_leading(true);
  role_.set_leader_address(replica_->advertise_address());
  parts_.metrics->SetLeader(true, replica_->term());
  parts_.metrics->SetReplication(replica_->store()->applied_seq(), 0);
  health_->SetServingStatus("", true);
  health_->SetServingStatus(kLeaderHealthService, true);
  std::printf("phalanxd: serving as the leader\n");
  std::fflush(stdout);
  return absl::OkStatus();
}

// Once this replica has won the election and its follower has stopped:
// recovers exactly as a restart does (the log caught up first, start-up
// grace for leases, grace periods and deadlines, the start-up files applied
// and committed under the new term), and starts the loop.
absl::Status HaMode::Promote() {
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(Recovered recovered,
                   server::Recover(*replica_->store(), *parts_.files, start));
  PrintFileNotes(recovered);
  replica_->store()->set_apply_listener(nullptr);
  RETURN_IF_ERROR(parts_.audit->Resume());
  const size_t gangs = recovered.scheduler->gangs().size();
  parts_.loop->Lead(std::move(recovered.scheduler));
  if (!recovered.committed.empty()) {
    parts_.hub->OnDurable(recovered.committed, absl::ZeroDuration(), 0);
  }
  parts_.loop->Start();
  std::printf("phalanxd: promoted in %.3f s (%zu gangs, log seq %lld)\n",
              absl::ToDoubleSeconds(absl::Now() - start), gangs,
              static_cast<long long>(replica_->store()->applied_seq()));
  return absl::OkStatus();
}

// Hands over at once rather than after a lease TTL.
bool HaMode::Resign() {
  if (!role_.leading()) return false;
  if (absl::Status s = replica_->Resign(); !s.ok()) {
    std::printf("phalanxd: resign: %s\n", s.ToString().c_str());
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DaemonMode>> MakeHaMode(
    HaOptions options, const std::string& password_file,
    const std::string& data_dir) {
  if (!password_file.empty()) {
    ASSIGN_OR_RETURN(options.etcd.password, ReadTextFile(password_file));
    while (!options.etcd.password.empty() &&
           options.etcd.password.back() == '\n') {
      options.etcd.password.pop_back();
    }
  }
  ASSIGN_OR_RETURN(auto replica, HaReplica::Open(std::move(options), data_dir));
  return std::make_unique<HaMode>(std::move(replica));
}

}  // namespace phalanx::server
