// What the HA fault suites (ha_test.cc, ha_follow_test.cc,
// ha_nospace_test.cc, partition_test.cc) share: bounded polling, a full
// listing (and its gangs as a follower lists them), the "no GPU held
// twice" check, every replica's store checked once stopped, and
// Writers — two client threads that submit and cancel gangs throughout a
// fault and then check that every acknowledged write is there once.
// Not thread-safe except where a method says so.
#ifndef PHALANX_TESTS_HA_WRITERS_H_
#define PHALANX_TESTS_HA_WRITERS_H_

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "tests/daemon.h"

namespace phalanx::testing {

// Polls `condition` every 50 ms, at most `tries` times; returns its last
// value.
bool Eventually(const std::function<bool()>& condition, int tries = 400);

// Every gang `stub` lists (one page of up to 1000), expecting OK within
// 10 s.
v1::ListGangsResponse ListAll(v1::Scheduler::Stub& stub);

// `gang` without the plan's fields (plan_status, estimated_start,
// planned_domain, plan_rank), which only the leader fills: what a follower
// answers for the same gang at the same revision.
v1::Gang WithoutPlan(v1::Gang gang);
// `listed` with every gang WithoutPlan.
v1::ListGangsResponse WithoutPlans(v1::ListGangsResponse listed);

// No GPU is held by two non-final gangs (a final gang keeps the placement
// it released): a failure for each one that is. Returns how many are held.
int CheckNoGpuTwice(const v1::ListGangsResponse& listed);

// Stops every replica still running (SIGCONT first, for one paused with
// SIGSTOP; then SIGTERM, SIGKILL after 30 s), then expects each one's data
// dir to pass the store's consistency check (storage/store_check.h): a
// failure for each that does not, naming its data dir and the first
// inconsistency. Null entries are skipped.
void StopAndCheckStores(const std::vector<DaemonProcess*>& replicas);

// Two writers (bounded: `per_writer` submits each): submits with request
// ids ("w<writer>-<i>"), every other one cancelled, sent to the replicas in
// turn — a writer moves to the next replica after an error. Each call has
// a 5 s deadline; a writer waits `pause` after each submit (so a fault
// lasting seconds meets a steady load). Records what was acknowledged, when,
// and every error's code.
class Writers {
 public:
  // `replicas` must outlive the writers. With `stop_on_error`, a writer
  // stops at its first error (a leader that is killed for good).
  Writers(std::vector<DaemonProcess*> replicas, int per_writer,
          bool stop_on_error, absl::Duration pause = absl::ZeroDuration());
  ~Writers();  // Join()

  void Start();
  void Join();
  // Thread-safe.
  int acknowledged() const { return acknowledged_.load(); }

  // After Join: every acknowledged submit is in `listed` once with its
  // request id, every acknowledged cancel took, no request id is there
  // twice, no GPU is held twice (failures otherwise).
  void Check(const v1::ListGangsResponse& listed) const;
  // After Join: every error was one a client retries (UNAVAILABLE: the
  // replica is down, follows, or lost touch with etcd; DEADLINE_EXCEEDED:
  // the outcome is unknown, a request id makes the retry safe).
  void CheckErrorsAreRetryable() const;
  // After Join: the longest time between two acknowledgements (of either
  // writer) from `from` on — the write outage as the writers saw it.
  absl::Duration LongestGap(absl::Time from) const;
  const std::map<std::string, std::string>& submitted() const {
    return submitted_;
  }
  size_t errors() const { return errors_.size(); }

 private:
  void Run(int writer);
  // Sends `call` to the writer's current replica; after an error records
  // it and moves the writer on.
  grpc::Status Send(size_t& replica,
                    const std::function<grpc::Status(
                        v1::Scheduler::Stub&, grpc::ClientContext&)>& call);
  void Acknowledged(const std::function<void()>& record);

  const std::vector<DaemonProcess*> replicas_;
  const int per_writer_;
  const bool stop_on_error_;
  const absl::Duration pause_;
  std::vector<std::thread> threads_;
  std::atomic<int> acknowledged_{0};
  mutable std::mutex mu_;
  std::map<std::string, std::string> submitted_;  // request id -> gang id
  std::set<std::string> cancelled_;               // gang ids
  std::vector<absl::Time> acked_at_;
  std::vector<std::pair<int, std::string>> errors_;
};

}  // namespace phalanx::testing

#endif  // PHALANX_TESTS_HA_WRITERS_H_
