#include "server/scheduler_loop.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/check.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {
namespace {

// The held batch's first retry comes this long after the refusal; each
// next one waits twice as long, up to kMaxRetry.
constexpr absl::Duration kFirstRetry = absl::Milliseconds(50);
constexpr absl::Duration kMaxRetry = absl::Seconds(1);

// Whether a failed commit is a refusal to wait out (a full disk, an etcd
// over its quota) rather than a fault to stop on.
bool Refusal(const absl::Status& status) {
  return absl::IsResourceExhausted(status);
}

[[noreturn]] void FailStop(const absl::Status& status) {
  std::fprintf(stderr, "phalanxd: commit failed, stopping: %s\n",
               status.ToString().c_str());
  std::abort();
}

}  // namespace

std::shared_ptr<const View> ViewOfState(const core::LoadedState& state) {
  auto view = std::make_shared<View>();
  view->revision = state.meta.last_revision;
  view->limits = state.config ? state.config->limits : core::Config().limits;
  std::vector<core::GangPtr> all;
  all.reserve(state.gangs.size());
  for (const core::Gang& gang : state.gangs) {
    all.push_back(std::make_shared<const core::Gang>(gang));
  }
  view->gangs = view->gangs.Apply(all, {});
  auto parents = std::make_shared<QueueParents>();
  for (const core::Queue& queue : state.queues) {
    parents->emplace(queue.name.value(), queue.parent.value());
  }
  view->queue_parents = std::move(parents);
  return view;
}

std::shared_ptr<const View> ViewAfter(const View& view,
                                      const core::Mutation& mutation) {
  auto next = std::make_shared<View>();
  next->revision = mutation.meta.last_revision;
  next->limits = mutation.config ? mutation.config->limits : view.limits;
  if (mutation.queues_put.empty() && mutation.queues_deleted.empty()) {
    next->queue_parents = view.queue_parents;
  } else {
    auto parents = std::make_shared<QueueParents>(*view.queue_parents);
    for (const core::QueueName& name : mutation.queues_deleted) {
      parents->erase(name.value());
    }
    for (const core::Queue& queue : mutation.queues_put) {
      (*parents)[queue.name.value()] = queue.parent.value();
    }
    next->queue_parents = std::move(parents);
  }
  next->gangs = view.gangs.Apply(mutation.gangs_put, mutation.gangs_deleted);
  return next;
}

namespace {

// The gangs a batch changed: the records only the view before it holds.
size_t Changed(const core::Mutation& mutation) {
  return mutation.gangs_put.size() + mutation.gangs_deleted.size();
}

}  // namespace

SchedulerLoop::SchedulerLoop(std::unique_ptr<core::Scheduler> scheduler,
                             core::StateStore* store,
                             std::vector<BatchObserver*> observers,
                             ReplicaLoader load)
    : scheduler_(std::move(scheduler)),
      load_(std::move(load)),
      store_(store),
      observers_(std::move(observers)) {
  Publish(FullView(), kWholesale);
}

SchedulerLoop::SchedulerLoop(std::shared_ptr<const View> view,
                             core::StateStore* store,
                             std::vector<BatchObserver*> observers,
                             ReplicaLoader load)
    : load_(std::move(load)), store_(store), observers_(std::move(observers)) {
  {
    MutexLock lock(&mu_);
    following_ = true;
  }
  Publish(std::move(view), kWholesale);
  if (load_) {
    follow_thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "phalanx-reads");
      RunFollowing();
    });
  }
}

void SchedulerLoop::RunFollowing() {
  absl::Time next_gauges = absl::Now();
  std::vector<Command> batch;
  while (true) {
    {
      MutexLock lock(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || stopping_ || leaving_;
      };
      mu_.AwaitWithDeadline(absl::Condition(&ready), next_gauges);
      if (leaving_) return;  // the leader's loop answers what is queued
      if (queue_.empty() && stopping_) return;
      batch.swap(queue_);
    }
    const absl::Time now = absl::Now();
    const bool restored = RefreshReplica();
    ServeReads(batch, now, restored);
    batch.clear();
    if (now >= next_gauges) {
      if (RefreshReplica()) {
        for (BatchObserver* observer : observers_) {
          observer->OnIdleCycle(*replica_);
        }
      }
      next_gauges = now + kReplicaGaugeInterval;
    }
  }
}

bool SchedulerLoop::RefreshReplica() {
  const int64_t revision = view()->revision;
  if (replica_ != nullptr && replica_revision_ == revision) return true;
  // No time passes for a scheduler that runs no cycle: heartbeats (which
  // are not replicated) read as never heard (NodeToProto leaves them out).
  absl::StatusOr<core::LoadedState> state = load_();
  absl::StatusOr<std::unique_ptr<core::Scheduler>> restored =
      state.ok()
          ? core::Scheduler::Restore(*std::move(state), absl::InfinitePast())
          : state.status();
  if (!restored.ok()) {
    std::fprintf(stderr,
                 "phalanxd: restoring the durable state reads are served "
                 "from: %s\n",
                 restored.status().ToString().c_str());
    return false;  // tried again at the next read
  }
  replica_ = *std::move(restored);
  replica_revision_ = revision;
  return true;
}

void SchedulerLoop::ServeReads(std::vector<Command>& batch, absl::Time now,
                               bool restored) {
  // A replica that could not be restored at the published revision would
  // answer from older (or no) state: the reads fail, to be retried.
  if (!restored) {
    const absl::Status behind = absl::UnavailableError(
        scheduler_ == nullptr
            ? "this follower cannot read its replicated state now; retry, or "
              "ask the leader"
            : absl::StrCat(WritesRefused().message(),
                           "; the durable state cannot be read now either; "
                           "retry"));
    for (Command& command : batch) {
      if (command.reply) command.reply(behind);
    }
    return;
  }
  for (Command& command : batch) command.apply(*replica_, now);
  for (Command& command : batch) {
    if (command.respond) command.respond(*replica_);
  }
  // Reads change nothing; should one have, its change dies with the
  // scheduler: the next read restores another.
  if (!replica_->TakeMutation().empty()) replica_revision_ = -1;
  for (Command& command : batch) {
    if (command.reply) command.reply(absl::OkStatus());
  }
}

std::shared_ptr<const View> SchedulerLoop::FullView() const {
  auto view = std::make_shared<View>();
  view->revision = scheduler_->revision();
  view->limits = scheduler_->config().limits;
  std::vector<core::GangPtr> all;
  for (const auto& [id, gang] : scheduler_->gangs()) all.push_back(gang);
  view->gangs = view->gangs.Apply(all, {});
  view->queue_parents = QueueTree();
  return view;
}

void SchedulerLoop::Replicate(const core::Mutation& mutation) {
  // Only this thread replaces the view while following: read, build, swap.
  PHALANX_CHECK(following());
  Publish(ViewAfter(*view(), mutation), Changed(mutation));
}

void SchedulerLoop::ReplaceView(std::shared_ptr<const View> view) {
  PHALANX_CHECK(following());
  Publish(std::move(view), kWholesale);
}

void SchedulerLoop::Publish(std::shared_ptr<const View> view, size_t changed) {
  // Declared before the lock, so expired views are freed after it.
  std::vector<std::shared_ptr<const View>> expired;
  const absl::Time now = absl::Now();
  MutexLock lock(&view_mu_);
  if (view_ != nullptr) {
    const size_t gangs = changed == kWholesale ? view_->gangs.size() : changed;
    recent_.push_back({now, std::move(view_), gangs});
    recent_gangs_ += gangs;
  }
  view_ = std::move(view);
  while (!recent_.empty() && (recent_.size() > kMaxRecentViews ||
                              recent_gangs_ > kMaxRecentGangVersions ||
                              now - recent_.front().at > kRecentViewAge)) {
    recent_gangs_ -= recent_.front().gangs;
    expired.push_back(std::move(recent_.front().view));
    recent_.pop_front();
  }
}

std::shared_ptr<const View> SchedulerLoop::ViewAt(int64_t revision) const {
  MutexLock lock(&view_mu_);
  if (view_->revision == revision) return view_;
  for (auto it = recent_.rbegin(); it != recent_.rend(); ++it) {
    if (it->view->revision == revision) return it->view;
    if (it->view->revision < revision) break;
  }
  return nullptr;
}

void SchedulerLoop::Lead(std::unique_ptr<core::Scheduler> scheduler) {
  PHALANX_CHECK(!thread_.joinable());
  {
    MutexLock lock(&mu_);
    leaving_ = true;
  }
  if (follow_thread_.joinable()) follow_thread_.join();
  replica_.reset();
  scheduler_ = std::move(scheduler);
  PHALANX_CHECK(following());
  Publish(FullView(), kWholesale);
  MutexLock lock(&mu_);
  following_ = false;
}

bool SchedulerLoop::following() const {
  MutexLock lock(&mu_);
  return following_;
}

SchedulerLoop::~SchedulerLoop() { Stop(); }

void SchedulerLoop::HoldAtStart(core::Mutation mutation,
                                const absl::Status& cause,
                                std::shared_ptr<const View> durable) {
  PHALANX_CHECK(!thread_.joinable() && scheduler_ != nullptr);
  {
    MutexLock lock(&view_mu_);
    view_ = std::move(durable);
  }
  std::fprintf(stderr,
               "phalanxd: writes refused at start: %s; reads are still "
               "served, and recovery's batch is retried until it commits\n",
               cause.ToString().c_str());
  const absl::Time now = absl::Now();
  held_ = HeldBatch{std::move(mutation), {},  /*commands=*/0,
                    /*attempts=*/1,      now, now + kFirstRetry, kFirstRetry};
  SetWritesRefused(cause);
}

void SchedulerLoop::Start() {
  {
    MutexLock lock(&mu_);
    PHALANX_CHECK(!following_);
  }
  next_cycle_ = absl::Now();
  reply_thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "phalanx-reply");
    RunReplies();
  });
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "phalanx-loop");
    Run();
  });
}

void SchedulerLoop::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  if (follow_thread_.joinable()) follow_thread_.join();
  // The loop has handed over its last replies: run them, then stop.
  {
    MutexLock lock(&reply_mu_);
    replies_done_ = true;
  }
  if (reply_thread_.joinable()) reply_thread_.join();
}

void SchedulerLoop::Answer(std::vector<Reply> replies) {
  if (replies.empty()) return;
  bool next_waiting = false;
  {
    MutexLock lock(&mu_);
    next_waiting = !queue_.empty();
  }
  {
    MutexLock lock(&reply_mu_);
    // Earlier replies still on the reply thread go first: queue behind.
    if (next_waiting || replying_ || !replies_.empty()) {
      if (replies_.empty()) {
        replies_ = std::move(replies);
      } else {
        for (Reply& reply : replies) replies_.push_back(std::move(reply));
      }
      return;
    }
  }
  for (Reply& reply : replies) reply(absl::OkStatus());
}

void SchedulerLoop::RunReplies() {
  std::vector<Reply> batch;
  while (true) {
    {
      MutexLock lock(&reply_mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(reply_mu_) {
        return !replies_.empty() || replies_done_;
      };
      reply_mu_.Await(absl::Condition(&ready));
      if (replies_.empty()) return;  // done, and nothing left
      batch.swap(replies_);
      replying_ = true;
    }
    for (Reply& reply : batch) reply(absl::OkStatus());
    batch.clear();
    MutexLock lock(&reply_mu_);
    replying_ = false;
  }
}

bool SchedulerLoop::Enqueue(Apply apply, Respond respond, Reply reply,
                            bool mutates) {
  MutexLock lock(&mu_);
  if (stopping_ || (following_ && (mutates || !load_))) return false;
  queue_.push_back(
      Command{std::move(apply), std::move(respond), std::move(reply), mutates});
  return true;
}

std::shared_ptr<const View> SchedulerLoop::view() const {
  MutexLock lock(&view_mu_);
  return view_;
}

absl::Status SchedulerLoop::WritesRefused() const {
  if (!refusing_.load(std::memory_order_acquire)) return absl::OkStatus();
  MutexLock lock(&mu_);
  return writes_refused_;
}

void SchedulerLoop::Run() {
  while (RunBatch()) {
  }
}

bool SchedulerLoop::RunBatch() {
  if (held_) return RunRefused();
  // 1. Wait for commands, the cycle timer, or Stop.
  std::vector<Command>& batch = batch_;
  bool exit = false;
  {
    MutexLock lock(&mu_);
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
    std::vector<Reply> replies;
    replies.reserve(batch.size());
    for (Command& command : batch) {
      if (command.reply) replies.push_back(std::move(command.reply));
    }
    CommitAndAnswer(std::move(mutation), std::move(replies), commands);
  } else if (cycle_time > absl::ZeroDuration()) {
    for (BatchObserver* observer : observers_) {
      observer->OnIdleCycle(*scheduler_);
    }
  }
  batch.clear();  // keeps its capacity for the next swap
  // A refused batch is retried (and at Stop, answered) by RunRefused.
  if (!exit || held_) return true;
  MutexLock lock(&mu_);
  return !queue_.empty();  // drain what arrived before Stop
}

bool SchedulerLoop::RunRefused() {
  // 1. Wait for commands, the held batch's retry time, or Stop.
  std::vector<Command>& batch = batch_;
  bool exit = false;
  {
    MutexLock lock(&mu_);
    auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return !queue_.empty() || stopping_;
    };
    mu_.AwaitWithDeadline(absl::Condition(&ready), held_->retry_at);
    batch.swap(queue_);
    exit = stopping_;
  }
  // 2. Reads are served from the durable state; writes (and reads, when
  // there is no durable state to serve them from) wait for the held batch.
  ServeOrWait(batch, absl::Now());
  batch.clear();
  // 3. The held batch's retry when due, and a last one before exiting.
  if (exit || absl::Now() >= held_->retry_at) RetryHeld();
  if (held_) {
    if (exit) AbandonHeld();
    return !exit;
  }
  // 4. Committed: the commands that waited go first in the next batch.
  MutexLock lock(&mu_);
  if (!waiting_.empty()) {
    for (Command& command : queue_) waiting_.push_back(std::move(command));
    queue_.swap(waiting_);
    waiting_.clear();
  }
  return !exit || !queue_.empty();
}

void SchedulerLoop::ServeOrWait(std::vector<Command>& batch, absl::Time now) {
  std::vector<Command> reads;
  for (Command& command : batch) {
    // A write (one queued before RunOnLoop saw the refusal) must follow
    // the held batch; a read of the leading scheduler would see that batch
    // uncommitted, so it reads the durable state instead.
    if (load_ && !command.mutates) {
      reads.push_back(std::move(command));
    } else {
      waiting_.push_back(std::move(command));
    }
  }
  if (!reads.empty()) ServeReads(reads, now, RefreshReplica());
}

void SchedulerLoop::CommitAndAnswer(core::Mutation mutation,
                                    std::vector<Reply> replies, int commands) {
  const absl::Time start = absl::Now();
  absl::Status committed =
      mutation.empty() ? absl::OkStatus() : store_->Commit(mutation);
  if (!committed.ok()) {
    if (!Refusal(committed)) FailStop(committed);
    std::fprintf(stderr,
                 "phalanxd: writes refused: %s; reads are still served, and "
                 "the batch is retried until it commits\n",
                 committed.ToString().c_str());
    held_ = HeldBatch{std::move(mutation),
                      std::move(replies),
                      commands,
                      /*attempts=*/1,
                      start,
                      absl::Now() + kFirstRetry,
                      kFirstRetry};
    SetWritesRefused(committed);
    return;
  }
  Deliver(mutation, absl::Now() - start, commands, std::move(replies));
}

void SchedulerLoop::Deliver(const core::Mutation& mutation,
                            absl::Duration commit_time, int commands,
                            std::vector<Reply> replies) {
  Publish(mutation);
  for (BatchObserver* observer : observers_) {
    observer->OnDurable(mutation, commit_time, commands);
  }
  Answer(std::move(replies));
}

void SchedulerLoop::RetryHeld() {
  HeldBatch& held = *held_;
  const absl::Time start = absl::Now();
  absl::Status committed = store_->Commit(held.mutation);
  if (!committed.ok()) {
    if (!Refusal(committed)) FailStop(committed);
    ++held.attempts;
    held.backoff = std::min(held.backoff * 2, kMaxRetry);
    held.retry_at = absl::Now() + held.backoff;
    return;
  }
  const absl::Duration commit_time = absl::Now() - start;
  HeldBatch done = std::move(held);
  held_.reset();
  replica_.reset();  // reads go back to the leading scheduler
  replica_revision_ = -1;
  std::fprintf(stderr,
               "phalanxd: writes accepted again: the held batch committed "
               "after %d attempts, %s after the refusal\n",
               done.attempts + 1,
               absl::FormatDuration(absl::Now() - done.refused_since).c_str());
  SetWritesRefused(absl::OkStatus());
  Deliver(done.mutation, commit_time, done.commands, std::move(done.replies));
}

void SchedulerLoop::AbandonHeld() {
  const absl::Status not_committed = absl::UnavailableError(
      absl::StrCat("not committed: phalanxd stopped while writes were "
                   "refused (",
                   WritesRefused().message(), "); retry the call"));
  std::vector<Reply> replies = std::move(held_->replies);
  held_.reset();
  {
    MutexLock lock(&mu_);
    for (Command& command : queue_) waiting_.push_back(std::move(command));
    queue_.clear();
  }
  const absl::Time now = absl::Now();
  for (Command& command : waiting_) {
    command.apply(*scheduler_, now);
    if (command.respond) command.respond(*scheduler_);
    if (command.reply) replies.push_back(std::move(command.reply));
  }
  waiting_.clear();
  std::fprintf(stderr,
               "phalanxd: stopping with writes refused: %zu calls not "
               "committed, answered UNAVAILABLE\n",
               replies.size());
  for (Reply& reply : replies) reply(not_committed);
}

void SchedulerLoop::SetWritesRefused(const absl::Status& cause) {
  {
    MutexLock lock(&mu_);
    writes_refused_ = cause.ok() ? absl::OkStatus()
                                 : absl::UnavailableError(absl::StrCat(
                                       "writes refused: ", cause.message()));
    refusing_.store(!cause.ok(), std::memory_order_release);
  }
  for (BatchObserver* observer : observers_) observer->OnWritesRefused(cause);
}

void SchedulerLoop::Publish(const core::Mutation& mutation) {
  if (mutation.empty()) return;
  // The same rule a follower applies to the batches it replicates. Built
  // outside any lock (only this thread replaces the view while leading),
  // so handlers reading the view or queueing a command never wait for it.
  Publish(ViewAfter(*view(), mutation), Changed(mutation));
}

std::shared_ptr<const QueueParents> SchedulerLoop::QueueTree() const {
  auto parents = std::make_shared<QueueParents>();
  for (const auto& [name, queue] : scheduler_->queues()) {
    parents->emplace(name.value(), queue.parent.value());
  }
  return parents;
}

}  // namespace phalanx::server
