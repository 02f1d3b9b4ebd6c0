#include "server/scheduler_loop.h"

#include <pthread.h>

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
  view->limits = scheduler_->config().limits;
  std::vector<core::GangPtr> all;
  for (const auto& [id, gang] : scheduler_->gangs()) all.push_back(gang);
  view->gangs = view->gangs.Apply(all, {});
  view->queue_parents = QueueTree();
  absl::MutexLock lock(&mu_);
  view_ = std::move(view);
}

SchedulerLoop::~SchedulerLoop() { Stop(); }

void SchedulerLoop::Start() {
  next_cycle_ = absl::Now();
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "phalanx-loop");
    Run();
  });
}

void SchedulerLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

bool SchedulerLoop::Enqueue(Apply apply, Respond respond, Reply reply,
                            bool mutates) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  queue_.push_back(
      Command{std::move(apply), std::move(respond), std::move(reply), mutates});
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
  // 4. Responses from the state after the batch.
  core::Mutation mutation = scheduler_->TakeMutation();
  for (BatchObserver* observer : observers_) {
    observer->Contribute(mutation, *scheduler_, now);
  }
  const int commands = static_cast<int>(batch.size());
  if (!mutation.empty() || !batch.empty()) {
    for (Command& command : batch) {
      if (command.respond) command.respond(*scheduler_);
    }
    for (BatchObserver* observer : observers_) {
      observer->OnApplied(mutation, *scheduler_, cycle_time, commands);
    }
    // 5. One durable write for the whole batch (group commit), the view
    // published, the events handed to the watch hub; then the replies.
    const absl::Duration commit_time = CommitAndPublish(mutation);
    for (BatchObserver* observer : observers_) {
      observer->OnDurable(mutation, commit_time, commands);
    }
    for (Command& command : batch) {
      if (command.reply) command.reply();
    }
  } else if (cycle_time > absl::ZeroDuration()) {
    for (BatchObserver* observer : observers_) {
      observer->OnIdleCycle(*scheduler_);
    }
  }
  if (!exit) return true;
  absl::MutexLock lock(&mu_);
  return !queue_.empty();  // drain what arrived before Stop
}

absl::Duration SchedulerLoop::CommitAndPublish(const core::Mutation& mutation) {
  if (mutation.empty()) return absl::ZeroDuration();
  const absl::Time start = absl::Now();
  if (absl::Status s = store_->Commit(mutation); !s.ok()) {
    std::fprintf(stderr, "phalanxd: commit failed, stopping: %s\n",
                 s.ToString().c_str());
    std::abort();
  }
  const absl::Duration commit_time = absl::Now() - start;
  auto view = std::make_shared<View>();
  view->revision = mutation.meta.last_revision;
  const bool queues_changed =
      !mutation.queues_put.empty() || !mutation.queues_deleted.empty();
  std::shared_ptr<const QueueParents> queues =
      queues_changed ? QueueTree() : nullptr;
  view->limits = scheduler_->config().limits;
  absl::MutexLock lock(&mu_);
  view->queue_parents = queues ? std::move(queues) : view_->queue_parents;
  view->gangs = view_->gangs.Apply(mutation.gangs_put, mutation.gangs_deleted);
  view_ = std::move(view);
  return commit_time;
}

std::shared_ptr<const QueueParents> SchedulerLoop::QueueTree() const {
  auto parents = std::make_shared<QueueParents>();
  for (const auto& [name, queue] : scheduler_->queues()) {
    parents->emplace(name.value(), queue.parent.value());
  }
  return parents;
}

}  // namespace phalanx::server
