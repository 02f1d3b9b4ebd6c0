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
  std::vector<core::GangPtr> all;
  for (const auto& [id, gang] : scheduler_->gangs()) all.push_back(gang);
  view->gangs = view->gangs.Apply(all, {});
  absl::MutexLock lock(&mu_);
  view_ = std::move(view);
}

SchedulerLoop::~SchedulerLoop() { Stop(); }

void SchedulerLoop::Start() {
  next_cycle_ = absl::Now();
  commit_thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "phalanx-commit");
    RunCommits();
  });
  loop_thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "phalanx-loop");
    RunLoop();
  });
}

void SchedulerLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (loop_thread_.joinable()) loop_thread_.join();
  if (commit_thread_.joinable()) commit_thread_.join();
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

// The loop thread. Commands are applied as they arrive; the batch they form
// stays open while the commit thread is busy with the previous one, so one
// durable write serves everything that arrived during the last.
void SchedulerLoop::RunLoop() {
  std::vector<Command> open;  // applied, not yet handed over
  bool changed = false;
  while (true) {
    Wakeup wakeup = Wait(!open.empty());
    for (Reply& reply : wakeup.replies) reply();
    const absl::Time now = absl::Now();
    for (Command& command : wakeup.commands) {
      command.apply(*scheduler_, now);
      changed |= command.mutates;
      open.push_back(std::move(command));
    }
    if (!wakeup.commit_idle) continue;
    if (!open.empty() || now >= next_cycle_) {
      HandOff(open, changed);
      open.clear();
      changed = false;
    } else if (wakeup.stopping) {
      absl::MutexLock lock(&mu_);
      if (!queue_.empty()) continue;  // drain what arrived before Stop
      commit_exit_ = true;
      return;
    }
  }
}

SchedulerLoop::Wakeup SchedulerLoop::Wait(bool has_open_batch) {
  absl::MutexLock lock(&mu_);
  auto ready = [this, has_open_batch]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || commit_done_ ||
           (!committing_ && (has_open_batch || stopping_));
  };
  // The cycle timer only matters when a batch could be handed over.
  const absl::Time deadline =
      committing_ ? absl::InfiniteFuture() : next_cycle_;
  mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
  Wakeup wakeup;
  wakeup.commands.swap(queue_);
  wakeup.replies.swap(durable_replies_);
  commit_done_ = false;
  wakeup.commit_idle = !committing_;
  wakeup.stopping = stopping_;
  return wakeup;
}

void SchedulerLoop::HandOff(std::vector<Command>& open, bool changed) {
  // 1. Admission cycle after a change, or on the timer.
  const absl::Time now = absl::Now();
  absl::Duration cycle;
  if (changed || now >= next_cycle_) {
    scheduler_->RunCycle(now);
    cycle = absl::Now() - now;
    next_cycle_ = now + scheduler_->config().cycle_interval;
  }
  // 2. Everything the batch changed; nothing to do for an idle tick.
  AppliedBatch batch;
  batch.mutation = scheduler_->TakeMutation();
  batch.commands = static_cast<int>(open.size());
  if (batch.mutation.empty() && open.empty()) return;
  // 3. Responses from the state after the batch; replies wait for the disk.
  for (Command& command : open) {
    if (command.respond) command.respond(*scheduler_);
    if (command.reply) batch.replies.push_back(std::move(command.reply));
  }
  for (BatchObserver* observer : observers_) {
    observer->OnApplied(batch.mutation, *scheduler_, cycle, batch.commands);
  }
  absl::MutexLock lock(&mu_);
  to_commit_ = std::move(batch);
  committing_ = true;
}

// The commit thread: one durable write per batch, in order (fail-stop).
void SchedulerLoop::RunCommits() {
  while (true) {
    AppliedBatch batch;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return to_commit_.has_value() || commit_exit_;
      };
      mu_.Await(absl::Condition(&ready));
      if (!to_commit_) return;
      batch = *std::move(to_commit_);
      to_commit_.reset();
    }
    CommitOne(batch);
    absl::MutexLock lock(&mu_);
    for (Reply& reply : batch.replies) {
      durable_replies_.push_back(std::move(reply));
    }
    committing_ = false;
    commit_done_ = true;
  }
}

void SchedulerLoop::CommitOne(AppliedBatch& batch) {
  absl::Duration commit_time;
  if (!batch.mutation.empty()) {
    const absl::Time start = absl::Now();
    if (absl::Status s = store_->Commit(batch.mutation); !s.ok()) {
      std::fprintf(stderr, "phalanxd: commit failed, stopping: %s\n",
                   s.ToString().c_str());
      std::abort();
    }
    commit_time = absl::Now() - start;
    Publish(batch.mutation);  // before anyone is answered
  }
  for (BatchObserver* observer : observers_) {
    observer->OnDurable(batch.mutation, commit_time, batch.commands);
  }
}

void SchedulerLoop::Publish(const core::Mutation& mutation) {
  auto view = std::make_shared<View>();
  view->revision = mutation.meta.last_revision;
  // Only this thread replaces the view, so reading it first is safe.
  view->gangs =
      this->view()->gangs.Apply(mutation.gangs_put, mutation.gangs_deleted);
  absl::MutexLock lock(&mu_);
  view_ = std::move(view);
}

}  // namespace phalanx::server
