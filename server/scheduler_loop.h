// SchedulerLoop: the single writer of docs/design.md §2. One thread owns the
// core::Scheduler. RPC handlers enqueue commands; the loop drains every queued
// command, applies them, runs an admission cycle when something changed (or
// on the cycle timer), lets each command fill its response, commits
// everything the batch produced as one durable write, publishes a new read
// view and the batch's events, and only then runs the commands' replies
// (which answer the RPCs). When commands of a next batch are already
// waiting, it hands the replies to its reply thread, so that finishing the
// calls (building responses, gRPC's sendmsg and wake-ups) overlaps the next
// batch instead of delaying it; otherwise it runs them itself (no hand-off
// to pay for, nothing to overlap). Replies run in batch order, each after
// its batch is durable and its view published.
//
// A commit the store refuses for lack of space (ResourceExhausted: a full
// disk, an etcd over its quota) puts the loop in the writes-refused mode of
// docs/design.md §7: the failed batch is held (its memory state kept, its
// replies not run) and its commit retried with a bounded backoff (50 ms,
// doubling up to 1 s); meanwhile WritesRefused() names the cause (RunOnLoop
// answers mutating calls UNAVAILABLE with it; the published view still
// serves its readers), no admission cycle runs, and mutating commands
// queued before the refusal wait. Read-only commands are served from the
// last durable state (a scheduler restored from the loop's ReplicaLoader,
// as a follower serves them) when the loop has one, and wait otherwise.
// Once the batch commits, its replies run and the waiting commands
// follow. Any other
// failed commit leaves memory ahead of disk: the loop logs it and aborts
// (fail-stop).
//
// Thread-safe: Enqueue and view() may be called from any thread.
#ifndef PHALANX_SERVER_SCHEDULER_LOOP_H_
#define PHALANX_SERVER_SCHEDULER_LOOP_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/scheduler.h"
#include "core/state_store.h"
#include "server/gang_snapshot.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {

using QueueParents = absl::flat_hash_map<std::string, std::string>;

// What readers see without touching the scheduler: published after every
// durable batch, before the batch's RPCs are answered (so clients read their
// writes, and never read what is not durable yet).
struct View {
  int64_t revision = 0;
  GangSnapshot gangs;
  // Each queue's parent ("" at the top), for authorization scopes; shared
  // between views until the queues change.
  std::shared_ptr<const QueueParents> queue_parents;
  // The configuration's limits, for checks made before a call is queued.
  core::LimitsConfig limits;
};

// The view of a stored state (a follower's first view, or one rebuilt after
// its local store was replaced): what a scheduler restored from `state`
// would publish, without restoring one.
std::shared_ptr<const View> ViewOfState(const core::LoadedState& state);

// The view after `mutation` is applied to `view`: what the loop publishes
// once a batch is durable. The leader and its followers both use it, so
// their views match revision for revision.
std::shared_ptr<const View> ViewAfter(const View& view,
                                      const core::Mutation& mutation);

// Observes each batch (metrics, watch fan-out). Both run on the loop thread.
class BatchObserver {
 public:
  virtual ~BatchObserver() = default;
  // Runs once the batch is applied and its cycle has run, before it is
  // durable; `scheduler` is the state after it.
  virtual void OnApplied(const core::Mutation& mutation,
                         const core::Scheduler& scheduler, absl::Duration cycle,
                         int commands) = 0;
  // Runs once `mutation` is durable, before the batch's RPCs are answered.
  // Must not block.
  virtual void OnDurable(const core::Mutation& mutation, absl::Duration commit,
                         int commands) = 0;
  // Runs after a timer cycle that changed nothing (no batch to observe).
  virtual void OnIdleCycle(const core::Scheduler& /*scheduler*/) {}
  // Runs when writes start being refused (`cause` not OK: why) and when
  // they are accepted again (`cause` OK).
  virtual void OnWritesRefused(const absl::Status& /*cause*/) {}
  // Runs first, once the batch's mutation is taken: may add records that
  // ride in the same durable write (the audit log).
  virtual void Contribute(core::Mutation& /*mutation*/,
                          const core::Scheduler& /*scheduler*/,
                          absl::Time /*now*/) {}
};

class SchedulerLoop {
 public:
  // A command body, run on the loop thread. `now` is the time it is applied.
  using Apply = std::function<void(core::Scheduler& scheduler, absl::Time now)>;
  // Runs on the loop thread after the batch's admission cycle, with the state
  // after the whole batch: fills the response.
  using Respond = std::function<void(const core::Scheduler& scheduler)>;
  // Runs once the batch is durable and its view published (answers the
  // RPC), on the loop or the reply thread: it must not touch the scheduler
  // — a Respond captures what it needs (immutable GangPtrs, the revision).
  // `committed` is OK then; it is Unavailable (the call must fail with it,
  // never acknowledge) only when the loop stopped with the batch not
  // committed because writes were refused.
  using Reply = std::function<void(const absl::Status& committed)>;

  // Reads the whole replicated state as of one instant (a follower's
  // FrozenState::Load); called on the following loop's thread.
  using ReplicaLoader = std::function<absl::StatusOr<core::LoadedState>()>;
  // How often a following loop hands its read-only scheduler to the
  // observers' OnIdleCycle (a follower's gauges).
  static constexpr absl::Duration kReplicaGaugeInterval = absl::Seconds(5);

  // A loop that leads with `scheduler`, committing to `store`. With
  // `load` (the store's durable state), read-only commands queued while
  // writes are refused are served on the loop thread from a scheduler
  // restored from `load()` (never committed, dropped once writes are
  // accepted again), so they see neither the held batch nor what waits
  // behind it.
  SchedulerLoop(std::unique_ptr<core::Scheduler> scheduler,
                core::StateStore* store, std::vector<BatchObserver*> observers,
                ReplicaLoader load = nullptr);
  // A loop that follows (HA mode, docs/ha.md): it has no scheduler to lead
  // with, serves `view` and what Replicate and ReplaceView publish, and
  // refuses every command that mutates (Enqueue returns false) until Lead.
  // Without `load` it refuses reads too. With it, its own thread serves
  // read-only commands (Enqueue with mutates = false) from a scheduler
  // restored from `load()`: restored again once the published view's
  // revision has moved, so a read is answered at the revision this replica
  // has applied (the restored scheduler's revision()); never committed, and
  // dropped when a command changed it. Every kReplicaGaugeInterval the
  // thread hands it to the observers' OnIdleCycle.
  SchedulerLoop(std::shared_ptr<const View> view, core::StateStore* store,
                std::vector<BatchObserver*> observers,
                ReplicaLoader load = nullptr);
  ~SchedulerLoop();

  // Following only, from one thread at a time: publishes the view after a
  // batch the leader committed and this replica has applied.
  void Replicate(const core::Mutation& mutation);
  // Following only: publishes `view` in place of the current one.
  void ReplaceView(std::shared_ptr<const View> view);
  // Following only, before Start: stops serving reads from the replicated
  // state (reads still queued are answered by the started loop), takes the
  // scheduler this replica now leads with (restored like at a restart) and
  // publishes its view.
  void Lead(std::unique_ptr<core::Scheduler> scheduler);
  bool following() const;

  // Leading only, before Start: recovery's `mutation` (already applied to
  // the scheduler) was refused by the store with `cause` (a full disk).
  // Publishes `durable` (the view of the store's state) and starts the loop
  // holding `mutation`, with writes refused, as after a refused commit.
  void HoldAtStart(core::Mutation mutation, const absl::Status& cause,
                   std::shared_ptr<const View> durable);
  // Starts the loop thread.
  void Start();
  // Applies the commands already queued and answers them, then stops both
  // threads. Later Enqueue calls fail.
  void Stop();

  // Queues a command. `mutates` = false marks a read that needs no cycle.
  // Returns false (running no callback) once Stop has begun. Once it has
  // returned true, `apply`, `respond` and `reply` each run exactly once and
  // in that order (a started loop drains its queue before it stops), so a
  // reply may free what the three share.
  bool Enqueue(Apply apply, Respond respond, Reply reply, bool mutates = true);
  // The latest published view; never null.
  std::shared_ptr<const View> view() const;
  // The view published at `revision`: the latest, or one a newer view
  // replaced at most kRecentViewAge ago; null when none is kept. Leader and
  // followers publish the same revisions, so each can serve a revision
  // another one published (ListGangs pages). Replaced views are kept while
  // they are at most kMaxRecentViews and hold at most
  // kMaxRecentGangVersions gang records no newer view holds (the oldest go
  // first), so churn cannot make them hold much memory.
  std::shared_ptr<const View> ViewAt(int64_t revision) const;
  static constexpr absl::Duration kRecentViewAge = absl::Seconds(60);
  static constexpr size_t kMaxRecentViews = 256;
  static constexpr size_t kMaxRecentGangVersions = 20000;
  // OK while the loop commits; Unavailable naming the cause (the store's
  // message) while writes are refused.
  absl::Status WritesRefused() const;
  // True when read-only commands are served while writes are refused (the
  // loop was given a ReplicaLoader); callers may then queue them.
  bool ServesReadsWhileRefused() const { return load_ != nullptr; }

 private:
  struct Command {
    Apply apply;
    Respond respond;
    Reply reply;
    bool mutates;
  };

  void Run();
  // The following loop's thread: serves read-only commands from replica_
  // and hands it to the observers on the gauge timer, until Lead or Stop
  // (which answers what is queued first).
  void RunFollowing();
  // Restores replica_ from load_ unless it is at the published revision;
  // returns whether it is now. On failure keeps the one it has, if any.
  bool RefreshReplica();
  // Applies and answers one batch of read-only commands on replica_, or,
  // when it could not be `restored` at the published revision, answers
  // them Unavailable.
  void ServeReads(std::vector<Command>& batch, absl::Time now, bool restored);
  // While writes are refused: serves the read-only commands of `batch`
  // from the durable state (when load_ is set) and moves the others to
  // waiting_.
  void ServeOrWait(std::vector<Command>& batch, absl::Time now);
  // The reply thread: runs handed-over replies in order until Stop.
  void RunReplies();
  // Runs one durable batch's replies: on the reply thread when a next batch
  // is waiting (or earlier replies are still running there), else here.
  void Answer(std::vector<Reply> replies);
  // A batch whose commit was refused, retried until it commits.
  struct HeldBatch {
    core::Mutation mutation;
    std::vector<Reply> replies;
    int commands = 0;
    int attempts = 1;
    absl::Time refused_since;
    absl::Time retry_at;
    absl::Duration backoff;
  };

  // Applies one batch; returns false when it is time to exit.
  bool RunBatch();
  // The loop while writes are refused: keeps queued commands waiting and
  // retries the held batch. Returns false when it is
  // time to exit.
  bool RunRefused();
  // Commits `mutation`, then (when it committed) publishes the view, tells
  // the observers and runs `replies`. A refused commit becomes held_; any
  // other failure aborts (fail-stop).
  void CommitAndAnswer(core::Mutation mutation, std::vector<Reply> replies,
                       int commands);
  // Retries held_'s commit; on success leaves the writes-refused mode.
  void RetryHeld();
  // After `mutation` (of `commands` commands) became durable in
  // `commit_time`: publishes the view, tells the observers, answers.
  void Deliver(const core::Mutation& mutation, absl::Duration commit_time,
               int commands, std::vector<Reply> replies);
  // At Stop with held_ still refused: fails held_'s calls and every waiting
  // or queued one with Unavailable (none is acknowledged).
  void AbandonHeld();
  // Marks writes refused (or, with OK, accepted) and tells the observers.
  void SetWritesRefused(const absl::Status& cause);
  // Publishes the view after the durable `mutation`.
  void Publish(const core::Mutation& mutation);
  // Makes `view` the latest, keeping the one it replaces for ViewAt.
  // `changed` is how many gangs `view` changed (put or deleted) from the
  // latest: what only the replaced view holds; kWholesale when `view` was
  // built anew (it shares no gang with the latest).
  static constexpr size_t kWholesale = SIZE_MAX;
  void Publish(std::shared_ptr<const View> view, size_t changed)
      ABSL_LOCKS_EXCLUDED(view_mu_);
  // The scheduler's queue tree, for the view.
  std::shared_ptr<const QueueParents> QueueTree() const;
  // The view of scheduler_'s whole state.
  std::shared_ptr<const View> FullView() const;

  std::unique_ptr<core::Scheduler> scheduler_;
  // Reads served from the durable state (following, or leading while
  // writes are refused): the loader, the following thread and the
  // read-only scheduler, restored at the view revision replica_revision_
  // (-1: to restore). load_ is set at construction only.
  ReplicaLoader load_;
  std::thread follow_thread_;
  std::unique_ptr<core::Scheduler> replica_;
  int64_t replica_revision_ = -1;
  core::StateStore* store_;
  std::vector<BatchObserver*> observers_;
  std::thread thread_;
  absl::Time next_cycle_;
  // Loop thread only: the batch awaiting its commit while writes are
  // refused, and the commands queued meanwhile.
  std::optional<HeldBatch> held_;
  std::vector<Command> waiting_;

  std::thread reply_thread_;

  // Replies of durable batches not yet run, oldest first; their own lock,
  // so answering calls never contends with Enqueue.
  Mutex reply_mu_;
  std::vector<Reply> replies_ ABSL_GUARDED_BY(reply_mu_);
  bool replying_ ABSL_GUARDED_BY(reply_mu_) = false;  // running a batch
  bool replies_done_ ABSL_GUARDED_BY(reply_mu_) = false;

  mutable Mutex mu_;
  // Swapped with batch_ (loop thread only) at each batch: the two vectors
  // keep their capacity, so queueing a command allocates nothing.
  std::vector<Command> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<Command> batch_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool following_ ABSL_GUARDED_BY(mu_) = false;
  bool leaving_ ABSL_GUARDED_BY(mu_) = false;  // Lead ends follow_thread_
  absl::Status writes_refused_ ABSL_GUARDED_BY(mu_);
  // Whether writes_refused_ is not OK, read without mu_ by every call.
  std::atomic<bool> refusing_{false};
  // The published view has a lock of its own: handlers read it (1-3 times
  // a call) without contending with Enqueue and the loop's wait on mu_.
  // Lock order: mu_, then view_mu_.
  mutable Mutex view_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::shared_ptr<const View> view_ ABSL_GUARDED_BY(view_mu_);
  // Replaced views, oldest first: when each was replaced, and how many
  // gang records it alone holds (all of them counted in recent_gangs_).
  struct Replaced {
    absl::Time at;
    std::shared_ptr<const View> view;
    size_t gangs;
  };
  std::deque<Replaced> recent_ ABSL_GUARDED_BY(view_mu_);
  size_t recent_gangs_ ABSL_GUARDED_BY(view_mu_) = 0;
};

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_SCHEDULER_LOOP_H_
