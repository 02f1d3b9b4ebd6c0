// SchedulerLoop: the single writer of DESIGN §2, as a two-stage pipeline.
//
// The loop thread owns the core::Scheduler. RPC handlers enqueue commands;
// the loop applies every queued command, and keeps applying commands that
// arrive while the previous batch is still being made durable. Once the
// commit thread is free, the loop runs an admission cycle (when something
// changed, or on the cycle timer), takes the batch's mutation, lets each
// command fill its response from the state after the batch, and hands the
// batch to the commit thread.
//
// The commit thread writes each batch as one durable write (group commit),
// in order, publishes the new read view and the batch's events, and hands
// the batch's replies back to the loop, which sends them while the next
// batch is being committed. So no RPC is answered before its batch — and
// every batch before it — is durable, and a client always reads its own
// write. A failed commit leaves memory ahead of disk: the commit thread logs
// it and aborts (fail-stop).
//
// Thread-safe: Enqueue and view() may be called from any thread.
#ifndef PHALANX_SERVER_SCHEDULER_LOOP_H_
#define PHALANX_SERVER_SCHEDULER_LOOP_H_

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/scheduler.h"
#include "core/state_store.h"
#include "server/gang_snapshot.h"

namespace phalanx::server {

// What readers see without touching the scheduler: published after every
// durable batch, before the batch's RPCs are answered (so clients read their
// writes, and never read what is not durable yet).
struct View {
  int64_t revision = 0;
  GangSnapshot gangs;
};

// Observes each batch (metrics, watch fan-out).
class BatchObserver {
 public:
  virtual ~BatchObserver() = default;
  // Runs on the loop thread once the batch is applied and its cycle has
  // run, before it is durable; `scheduler` is the state after it.
  virtual void OnApplied(const core::Mutation& mutation,
                         const core::Scheduler& scheduler, absl::Duration cycle,
                         int commands) = 0;
  // Runs on the commit thread once `mutation` is durable, batch after batch
  // in order, before the batch's RPCs are answered. Must not block.
  virtual void OnDurable(const core::Mutation& mutation, absl::Duration commit,
                         int commands) = 0;
};

class SchedulerLoop {
 public:
  // A command body, run on the loop thread. `now` is the time it is applied.
  using Apply = std::function<void(core::Scheduler& scheduler, absl::Time now)>;
  // Runs on the loop thread after the batch's admission cycle, with the state
  // after the whole batch: fills the response.
  using Respond = std::function<void(const core::Scheduler& scheduler)>;
  // Runs once the batch is durable (answers the RPC). Must not touch the
  // scheduler.
  using Reply = std::function<void()>;

  SchedulerLoop(std::unique_ptr<core::Scheduler> scheduler,
                core::StateStore* store, std::vector<BatchObserver*> observers);
  ~SchedulerLoop();

  // Starts the loop and commit threads.
  void Start();
  // Applies and commits the commands already queued, answers them, then
  // stops both threads. Later Enqueue calls fail.
  void Stop();

  // Queues a command. `mutates` = false marks a read that needs no cycle.
  // Returns false (running no callback) once Stop has begun.
  bool Enqueue(Apply apply, Respond respond, Reply reply, bool mutates = true);
  // The latest published view; never null.
  std::shared_ptr<const View> view() const;

 private:
  struct Command {
    Apply apply;
    Respond respond;
    Reply reply;
    bool mutates;
  };
  // A batch applied by the loop, waiting to be made durable.
  struct AppliedBatch {
    core::Mutation mutation;
    std::vector<Reply> replies;
    int commands = 0;
  };
  // What the loop takes when it wakes up.
  struct Wakeup {
    std::deque<Command> commands;
    std::vector<Reply> replies;  // of durable batches, to send
    bool commit_idle = false;
    bool stopping = false;
  };

  void RunLoop();
  Wakeup Wait(bool has_open_batch);
  // Runs the cycle, takes the mutation and hands the batch to the commit
  // thread.
  void HandOff(std::vector<Command>& open, bool changed);
  void RunCommits();
  void CommitOne(AppliedBatch& batch);
  void Publish(const core::Mutation& mutation);

  std::unique_ptr<core::Scheduler> scheduler_;
  core::StateStore* store_;
  std::vector<BatchObserver*> observers_;
  std::thread loop_thread_;
  std::thread commit_thread_;
  absl::Time next_cycle_;  // loop thread only

  mutable absl::Mutex mu_;
  std::deque<Command> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<AppliedBatch> to_commit_ ABSL_GUARDED_BY(mu_);
  bool committing_ ABSL_GUARDED_BY(mu_) = false;   // a batch is handed over
  bool commit_done_ ABSL_GUARDED_BY(mu_) = false;  // the loop has replies
  bool commit_exit_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Reply> durable_replies_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const View> view_ ABSL_GUARDED_BY(mu_);
};

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_SCHEDULER_LOOP_H_
