#include "server/etcd_election.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/status_macros.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {
namespace {

namespace epb = ::etcdserverpb;
using storage::etcd::EtcdClient;

}  // namespace

EtcdElection::EtcdElection(EtcdClient* client, EtcdElectionOptions options,
                           std::function<void()> on_lost)
    : client_(client),
      options_(std::move(options)),
      on_lost_(std::move(on_lost)) {}

EtcdElection::~EtcdElection() { StopRenewing(); }

absl::Status EtcdElection::EnsureLease() {
  if (lease_ != 0) {
    absl::StatusOr<absl::Duration> ttl = client_->LeaseKeepAlive(lease_);
    if (ttl.ok()) return absl::OkStatus();
    if (ttl.status().code() != absl::StatusCode::kNotFound) {
      return ttl.status();
    }
  }
  ASSIGN_OR_RETURN(lease_, client_->LeaseGrant(options_.lease_ttl));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> EtcdElection::TryCreate(int64_t* seen) {
  epb::TxnRequest txn;
  epb::Compare* absent = txn.add_compare();
  absent->set_key(LeaderKey());
  absent->set_target(epb::Compare::CREATE);
  absent->set_result(epb::Compare::EQUAL);
  absent->set_create_revision(0);
  epb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(LeaderKey());
  put->set_value(absl::StrCat(options_.replica_id, " ", options_.address));
  put->set_lease(lease_);
  txn.add_failure()->mutable_request_range()->set_key(LeaderKey());
  ASSIGN_OR_RETURN(epb::TxnResponse response, client_->Txn(txn));
  *seen = response.header().revision();
  if (response.succeeded()) return response.header().revision();
  const epb::RangeResponse& range = response.responses(0).response_range();
  // Our own key from an attempt whose reply was lost (UNAVAILABLE retry).
  if (range.kvs_size() == 1 && range.kvs(0).lease() == lease_) {
    return range.kvs(0).create_revision();
  }
  return 0;
}

absl::Status EtcdElection::WaitForVacancy(int64_t seen, absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) {
    return absl::DeadlineExceededError("campaign: another replica leads");
  }
  ASSIGN_OR_RETURN(auto watch, client_->Watch(LeaderKey(), "", seen + 1, left));
  // Each response has events; one with a DELETE means the seat is free.
  for (;;) {
    absl::StatusOr<epb::WatchResponse> response = watch->Read();
    if (!response.ok()) {
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError("campaign: another replica leads");
      }
      return response.status();
    }
    for (const mvccpb::Event& event : response->events()) {
      if (event.type() == mvccpb::Event::DELETE) return absl::OkStatus();
    }
  }
}

absl::StatusOr<int64_t> EtcdElection::Campaign(absl::Time deadline) {
  StopRenewing();
  // Each round: a live lease, one attempt, then wait for the seat to free.
  while (absl::Now() < deadline) {
    // The lease holds at least a TTL from here, whichever call granted or
    // renewed it.
    const absl::Time sent = absl::Now();
    RETURN_IF_ERROR(EnsureLease());
    int64_t seen = 0;
    ASSIGN_OR_RETURN(const int64_t term, TryCreate(&seen));
    if (term > 0) {
      term_ = term;
      leading_ = true;
      {
        MutexLock lock(&mu_);
        stop_ = false;
      }
      Renewed(sent);
      renewer_ = std::thread([this] {
        pthread_setname_np(pthread_self(), "phalanx-lease");
        Renew();
      });
      return term;
    }
    absl::Status waited = WaitForVacancy(seen, deadline);
    if (!waited.ok() && waited.code() != absl::StatusCode::kUnavailable) {
      return waited;
    }
  }
  return absl::DeadlineExceededError("campaign: another replica leads");
}

absl::Time EtcdElection::valid_until() const {
  MutexLock lock(&mu_);
  return leading_ ? valid_until_ : absl::InfinitePast();
}

void EtcdElection::Renewed(absl::Time sent) {
  MutexLock lock(&mu_);
  valid_until_ = sent + options_.lease_ttl * (1 - kLeaseMargin);
}

bool EtcdElection::RenewOnce() {
  const absl::Time sent = absl::Now();
  const absl::Time until = valid_until();
  // Woken after a pause (SIGSTOP, a stalled VM), or no renewal got through
  // in time: the lease may expire in etcd's view any moment, and another
  // replica may lead. Stop before asking etcd.
  if (sent >= until) {
    Lose(
        "no renewal acknowledged within the lease (etcd unreachable, or "
        "this process was paused)");
    return false;
  }
  absl::StatusOr<absl::Duration> ttl = client_->LeaseKeepAlive(lease_, until);
  if (ttl.status().code() == absl::StatusCode::kNotFound) {
    Lose("the lease expired or was revoked");
    return false;
  }
  if (!ttl.ok()) {
    if (absl::Now() < until) return true;  // the next try comes sooner
    Lose(absl::StrCat("no renewal acknowledged within the lease: ",
                      ttl.status().ToString()));
    return false;
  }
  Renewed(sent);
  absl::StatusOr<LeaderInfo> leader = Leader(valid_until());
  if (leader.ok() && leader->term != term_) {
    Lose(absl::StrCat("the election key belongs to term ", leader->term));
    return false;
  }
  if (leader.status().code() == absl::StatusCode::kNotFound) {
    Lose("the election key is gone");
    return false;
  }
  return true;
}

void EtcdElection::Renew() {
  const absl::Duration interval = options_.lease_ttl / 3;
  // After a failed renewal, try again sooner (each try is bounded by the
  // client's per-attempt deadline and by valid_until()).
  const absl::Duration retry = options_.lease_ttl / 10;
  absl::Time next = absl::Now() + interval;
  for (;;) {
    {
      MutexLock lock(&mu_);
      auto stopping = [this]()
                          ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_; };
      const absl::Time wake = std::min(next, valid_until_);
      if (mu_.AwaitWithDeadline(absl::Condition(&stopping), wake)) return;
    }
    const absl::Time before = valid_until();
    const absl::Time tried = absl::Now();
    if (!RenewOnce()) return;
    next = tried + (valid_until() > before ? interval : retry);
  }
}

void EtcdElection::Lose(const std::string& why) {
  std::fprintf(stderr, "phalanxd: leadership of term %lld lost: %s\n",
               static_cast<long long>(term_.load()), why.c_str());
  leading_ = false;
  if (on_lost_) on_lost_();
}

void EtcdElection::StopRenewing() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  if (!renewer_.joinable()) return;
  // From on_lost, on the renewer itself: it returns right after.
  if (renewer_.get_id() == std::this_thread::get_id()) {
    renewer_.detach();
  } else {
    renewer_.join();
  }
}

absl::Status EtcdElection::Resign() {
  // Until when etcd surely holds the lease: past it, the lease expires by
  // itself and a revoke is moot.
  const absl::Time lease_end = valid_until();
  StopRenewing();
  leading_ = false;
  if (lease_ == 0) return absl::OkStatus();
  // Revoking the lease deletes the key: the next candidate wins at once.
  RETURN_IF_ERROR(Revoke(lease_end));
  lease_ = 0;
  return absl::OkStatus();
}

absl::Status EtcdElection::Revoke(absl::Time lease_end) {
  constexpr absl::Duration kRetryAfter = absl::Milliseconds(50);
  // One attempt at least; then retries while the lease may hold, at most
  // one per kRetryAfter (bounded by lease_end, which is under a TTL away).
  for (;;) {
    const absl::Time deadline =
        lease_end > absl::Now() ? lease_end : absl::InfiniteFuture();
    const absl::Status revoked = client_->LeaseRevoke(lease_, deadline);
    // NotFound: expired or revoked already (an earlier attempt whose
    // answer was lost): the key is gone either way.
    if (revoked.ok() || absl::IsNotFound(revoked)) return absl::OkStatus();
    const bool retryable =
        absl::IsUnavailable(revoked) || absl::IsDeadlineExceeded(revoked);
    if (!retryable || absl::Now() + kRetryAfter >= lease_end) return revoked;
    absl::SleepFor(kRetryAfter);
  }
}

absl::StatusOr<LeaderInfo> EtcdElection::Leader() const {
  return Leader(absl::InfiniteFuture());
}

absl::StatusOr<LeaderInfo> EtcdElection::Leader(absl::Time deadline) const {
  epb::RangeRequest range;
  range.set_key(LeaderKey());
  ASSIGN_OR_RETURN(epb::RangeResponse response,
                   client_->Range(range, deadline));
  if (response.kvs_size() == 0) {
    return absl::NotFoundError("no replica leads");
  }
  const mvccpb::KeyValue& kv = response.kvs(0);
  LeaderInfo info;
  const size_t space = kv.value().find(' ');
  info.replica_id = kv.value().substr(0, space);
  if (space != std::string::npos) info.address = kv.value().substr(space + 1);
  info.term = kv.create_revision();
  info.lease = kv.lease();
  return info;
}

}  // namespace phalanx::server
