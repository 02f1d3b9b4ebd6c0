#include "server/scheduler_loop.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace phalanx::server {

SchedulerLoop::SchedulerLoop(std::unique_ptr<core::Scheduler> scheduler,
                             core::StateStore* store,
                             std::vector<BatchObserver*> observers)
    : scheduler_(std::move(scheduler)),
      store_(store),
      observers_(std::move(observers)) {
  auto view = std::make_shared<View>();
  view->revision = scheduler_->revision();
  std::vector<core::GangPtr> all;
  for (const auto& [id, gang] : scheduler_->gangs()) all.push_back(gang);
  view->gangs = view->gangs.Apply(all, {});
  absl::MutexLock lock(&mu_);
  view_ = std::move(view);
}

SchedulerLoop::~SchedulerLoop() { Stop(); }

void SchedulerLoop::Start() {
  next_cycle_ = absl::Now();
  thread_ = std::thread([this] { Run(); });
}

void SchedulerLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

bool SchedulerLoop::Enqueue(Apply apply, Done done, bool mutates) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  queue_.push_back(Command{std::move(apply), std::move(done), mutates});
  return true;
}

std::shared_ptr<const View> SchedulerLoop::view() const {
  absl::MutexLock lock(&mu_);
  return view_;
}

void SchedulerLoop::Run() {
  while (RunBatch()) {
  }
}

bool SchedulerLoop::RunBatch() {
  // 1. Wait for commands, the cycle timer, or Stop.
  std::deque<Command> batch;
  bool exit = false;
  {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return !queue_.empty() || stopping_;
    };
    mu_.AwaitWithDeadline(absl::Condition(&ready), next_cycle_);
    batch.swap(queue_);
    exit = stopping_;
  }
  // 2. Apply every queued command in arrival order.
  const absl::Time now = absl::Now();
  bool changed = false;
  for (Command& command : batch) {
    command.apply(*scheduler_, now);
    changed |= command.mutates;
  }
  // 3. Admission cycle after a change, or on the timer.
  absl::Duration cycle_time;
  if (changed || now >= next_cycle_) {
    const absl::Time start = absl::Now();
    scheduler_->RunCycle(now);
    cycle_time = absl::Now() - start;
    next_cycle_ = now + scheduler_->config().cycle_interval;
  }
  // 4. One durable write for the whole batch (group commit); fail-stop.
  core::Mutation mutation = scheduler_->TakeMutation();
  absl::Duration commit_time;
  if (!mutation.empty()) {
    const absl::Time start = absl::Now();
    if (absl::Status s = store_->Commit(mutation); !s.ok()) {
      std::fprintf(stderr, "phalanxd: commit failed, stopping: %s\n",
                   s.ToString().c_str());
      std::abort();
    }
    commit_time = absl::Now() - start;
    // 5. Publish the new view before anyone is answered.
    auto view = std::make_shared<View>();
    view->revision = scheduler_->revision();
    {
      absl::MutexLock lock(&mu_);
      view->gangs =
          view_->gangs.Apply(mutation.gangs_put, mutation.gangs_deleted);
      view_ = std::move(view);
    }
  }
  // 6. Observers (watch fan-out, metrics), then answer the RPCs.
  if (!mutation.empty() || !batch.empty()) {
    for (BatchObserver* observer : observers_) {
      observer->OnBatch(mutation, *scheduler_, cycle_time, commit_time,
                        static_cast<int>(batch.size()));
    }
  }
  for (Command& command : batch) {
    if (command.done) command.done(*scheduler_);
  }
  if (!exit) return true;
  absl::MutexLock lock(&mu_);
  return !queue_.empty();  // drain what arrived before Stop
}

}  // namespace phalanx::server
