// SchedulerLoop's batches: replies wait for their batch's durable write,
// commands that arrive during a write share the next one, a reply being
// sent does not hold up the next batch, Stop answers what was queued. The store
// is core's MemoryStore behind a gate that holds a commit "in fsync" until the
// test opens it.
#include "server/scheduler_loop.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/memory_store.h"
#include "gtest/gtest.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(20);

// A StateStore whose queue commits wait while the gate is closed.
// Thread-safe.
class GatedStore : public core::StateStore {
 public:
  absl::StatusOr<core::LoadedState> LoadAll() override {
    MutexLock lock(&mu_);
    return memory_.LoadAll();
  }
  // Commits that put queues wait at the gate and are counted; others (the
  // first cycle's housekeeping) pass.
  absl::Status Commit(const core::Mutation& mutation) override {
    MutexLock lock(&mu_);
    if (full_) {
      ++refused_;
      return absl::ResourceExhaustedError("no space left in data dir /x");
    }
    if (!mutation.queues_put.empty()) {
      ++entered_;
      mu_.Await(absl::Condition(
          +[](bool* closed) { return !*closed; }, &closed_));
      batch_queues_.push_back(static_cast<int>(mutation.queues_put.size()));
    }
    return memory_.Commit(mutation);
  }
  absl::StatusOr<std::vector<core::Event>> ReadEvents(int64_t after, int limit,
                                                      size_t) override {
    MutexLock lock(&mu_);
    return memory_.ReadEvents(after, limit);
  }

  void Close() {
    MutexLock lock(&mu_);
    closed_ = true;
  }
  void Open() {
    MutexLock lock(&mu_);
    closed_ = false;
  }
  // While full, every commit fails with ResourceExhausted, writing nothing.
  void SetFull(bool full) {
    MutexLock lock(&mu_);
    full_ = full;
  }
  // Waits until `n` commits have been refused; returns whether they were.
  bool AwaitRefused(int n) {
    MutexLock lock(&mu_);
    auto refused = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return refused_ >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&refused), kTimeout);
  }
  // Waits until `n` queue commits have started; returns whether they did.
  bool AwaitEntered(int n) {
    MutexLock lock(&mu_);
    auto entered = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return entered_ >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&entered), kTimeout);
  }
  // Queues written by each finished queue commit, in order.
  std::vector<int> batch_queues() const {
    MutexLock lock(&mu_);
    return batch_queues_;
  }

 private:
  mutable Mutex mu_;
  core::MemoryStore memory_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool full_ ABSL_GUARDED_BY(mu_) = false;
  int refused_ ABSL_GUARDED_BY(mu_) = 0;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int> batch_queues_ ABSL_GUARDED_BY(mu_);
};

// Counts applied commands and sent replies; replies record how many commits
// had finished when they ran.
class Tally {
 public:
  void Applied() {
    MutexLock lock(&mu_);
    ++applied_;
  }
  void Replied(int commits_done) {
    MutexLock lock(&mu_);
    replies_.push_back(commits_done);
  }
  bool AwaitApplied(int n) { return AwaitCount(&applied_, n); }
  bool AwaitReplies(int n) {
    MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return static_cast<int>(replies_.size()) >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), kTimeout);
  }
  std::vector<int> replies() const {
    MutexLock lock(&mu_);
    return replies_;
  }

 private:
  bool AwaitCount(const int* count, int n) {
    MutexLock lock(&mu_);
    auto enough = [count, n]() { return *count >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), kTimeout);
  }

  mutable Mutex mu_;
  int applied_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int> replies_ ABSL_GUARDED_BY(mu_);
};

class SchedulerLoopTest : public ::testing::Test {
 protected:
  SchedulerLoopTest()
      : loop_(std::make_unique<core::Scheduler>(), &store_, {}) {}

  // Queues a command that puts queue `name`; its reply runs `before`
  // (if set), then records how many commits had finished.
  bool PutQueue(const std::string& name,
                std::function<void()> before = nullptr) {
    return loop_.Enqueue(
        [this, name](core::Scheduler& s, absl::Time) {
          core::Queue queue;
          queue.name = core::QueueName(name);
          ASSERT_TRUE(s.PutQueue(queue).ok());
          tally_.Applied();
        },
        nullptr,
        [this, before = std::move(before)](const absl::Status& committed) {
          EXPECT_TRUE(committed.ok()) << committed;
          if (before) before();
          tally_.Replied(static_cast<int>(store_.batch_queues().size()));
        });
  }

  GatedStore store_;
  Tally tally_;
  SchedulerLoop loop_;
};

TEST_F(SchedulerLoopTest, ReplyWaitsForItsBatchToBeDurable) {
  store_.Close();
  loop_.Start();
  ASSERT_TRUE(PutQueue("a"));
  ASSERT_TRUE(store_.AwaitEntered(1));
  EXPECT_TRUE(tally_.replies().empty());
  store_.Open();
  ASSERT_TRUE(tally_.AwaitReplies(1));
  EXPECT_EQ(tally_.replies(), std::vector<int>{1});
  loop_.Stop();
}

TEST_F(SchedulerLoopTest, CommandsArrivingDuringACommitShareTheNext) {
  store_.Close();
  loop_.Start();
  ASSERT_TRUE(PutQueue("a"));
  ASSERT_TRUE(store_.AwaitEntered(1));  // "a" is being made durable
  for (const char* name : {"b", "c", "d"}) ASSERT_TRUE(PutQueue(name));
  EXPECT_TRUE(tally_.replies().empty());
  store_.Open();
  ASSERT_TRUE(tally_.AwaitReplies(4));
  EXPECT_EQ(store_.batch_queues(), (std::vector<int>{1, 3}));
  // "a" was answered after the first commit (the reply thread may run it
  // once the second is done too), the others after the second.
  const std::vector<int> replies = tally_.replies();
  EXPECT_GE(replies[0], 1);
  EXPECT_EQ(std::vector<int>(replies.begin() + 1, replies.end()),
            (std::vector<int>{2, 2, 2}));
  loop_.Stop();
}

TEST_F(SchedulerLoopTest, AReplyBeingSentDoesNotHoldUpTheNextBatch) {
  store_.Close();
  loop_.Start();
  Notification replying, release;
  ASSERT_TRUE(PutQueue("a", [&] {
    replying.Notify();
    EXPECT_TRUE(release.WaitForNotificationWithTimeout(kTimeout));
  }));
  ASSERT_TRUE(store_.AwaitEntered(1));
  // "b" waits while "a" is made durable, so "a"'s reply goes to the reply
  // thread, where it is stuck; "b" is still applied and made durable.
  ASSERT_TRUE(PutQueue("b"));
  store_.Open();
  ASSERT_TRUE(replying.WaitForNotificationWithTimeout(kTimeout));
  ASSERT_TRUE(store_.AwaitEntered(2));
  ASSERT_TRUE(tally_.AwaitApplied(2));
  EXPECT_TRUE(tally_.replies().empty());
  release.Notify();
  ASSERT_TRUE(tally_.AwaitReplies(2));
  // In batch order, each after its own commit.
  const std::vector<int> replies = tally_.replies();
  EXPECT_GE(replies[0], 1);
  EXPECT_EQ(replies[1], 2);
  loop_.Stop();
}

TEST_F(SchedulerLoopTest, StopAnswersEverythingQueuedThenRefuses) {
  loop_.Start();
  // StrCat, not "q" + std::to_string(i): GCC 12 at -O3 reports a false
  // -Wrestrict inside that std::string concatenation.
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(PutQueue(absl::StrCat("q", i)));
  loop_.Stop();
  EXPECT_EQ(tally_.replies().size(), 20u);
  int queues = 0;
  for (int n : store_.batch_queues()) queues += n;
  EXPECT_EQ(queues, 20);
  EXPECT_FALSE(PutQueue("late"));
}

TEST_F(SchedulerLoopTest, ReadBehindAWriteIsAnsweredAfterIt) {
  store_.Close();
  loop_.Start();
  ASSERT_TRUE(PutQueue("a"));
  ASSERT_TRUE(store_.AwaitEntered(1));
  // The read sees "a", which is not durable yet: its answer must wait.
  ASSERT_TRUE(loop_.Enqueue(
      [](core::Scheduler&, absl::Time) {}, nullptr,
      [this](const absl::Status&) {
        tally_.Replied(static_cast<int>(store_.batch_queues().size()));
      },
      /*mutates=*/false));
  ASSERT_TRUE(tally_.AwaitApplied(1));
  EXPECT_TRUE(tally_.replies().empty());
  store_.Open();
  ASSERT_TRUE(tally_.AwaitReplies(2));
  EXPECT_EQ(tally_.replies(), (std::vector<int>{1, 1}));
  loop_.Stop();
}

// Records what OnWritesRefused reported, in order. Thread-safe.
class RefusalLog : public BatchObserver {
 public:
  void OnApplied(const core::Mutation&, const core::Scheduler&, absl::Duration,
                 int) override {}
  void OnDurable(const core::Mutation&, absl::Duration, int) override {}
  void OnWritesRefused(const absl::Status& cause) override {
    MutexLock lock(&mu_);
    causes_.push_back(cause);
  }
  std::vector<absl::Status> causes() const {
    MutexLock lock(&mu_);
    return causes_;
  }

 private:
  mutable Mutex mu_;
  std::vector<absl::Status> causes_ ABSL_GUARDED_BY(mu_);
};

class WritesRefusedTest : public ::testing::Test {
 protected:
  WritesRefusedTest()
      : loop_(std::make_unique<core::Scheduler>(), &store_, {&refusals_}) {}
  GatedStore store_;
  RefusalLog refusals_;
  SchedulerLoop loop_;
};

TEST_F(SchedulerLoopTest, AFullStoreHoldsTheBatchUntilItCommits) {
  loop_.Start();
  ASSERT_TRUE(PutQueue("warm-up"));  // the first cycle's housekeeping too
  ASSERT_TRUE(tally_.AwaitReplies(1));
  store_.SetFull(true);
  ASSERT_TRUE(PutQueue("a"));
  ASSERT_TRUE(store_.AwaitRefused(2));  // the commit and a retry
  absl::Status refused = loop_.WritesRefused();
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_NE(refused.message().find("no space left in data dir /x"),
            std::string::npos)
      << refused;
  // Queued behind the held batch (a call that raced the refusal): waits.
  ASSERT_TRUE(PutQueue("b"));
  EXPECT_EQ(tally_.replies().size(), 1u);
  EXPECT_EQ(loop_.view()->queue_parents->count("a"), 0u);

  store_.SetFull(false);
  ASSERT_TRUE(tally_.AwaitReplies(3));
  EXPECT_TRUE(loop_.WritesRefused().ok());
  // "a" and "b" committed once each, "b" after "a", and the last reply
  // after the last commit.
  int queues = 0;
  for (int n : store_.batch_queues()) queues += n;
  EXPECT_EQ(queues, 3);
  EXPECT_EQ(tally_.replies().back(),
            static_cast<int>(store_.batch_queues().size()));
  EXPECT_EQ(loop_.view()->queue_parents->count("a"), 1u);
  EXPECT_EQ(loop_.view()->queue_parents->count("b"), 1u);
  loop_.Stop();
}

TEST_F(SchedulerLoopTest, StopWithWritesRefusedFailsTheHeldCalls) {
  loop_.Start();
  ASSERT_TRUE(PutQueue("warm-up"));
  ASSERT_TRUE(tally_.AwaitReplies(1));
  store_.SetFull(true);
  Mutex mu;
  std::vector<absl::Status> answers;
  auto record = [&](const absl::Status& committed) {
    MutexLock lock(&mu);
    answers.push_back(committed);
  };
  auto put_queue = [](core::Scheduler& s, absl::Time) {
    core::Queue queue;
    queue.name = core::QueueName("a");
    EXPECT_TRUE(s.PutQueue(queue).ok());
  };
  ASSERT_TRUE(loop_.Enqueue(put_queue, nullptr, record));
  ASSERT_TRUE(store_.AwaitRefused(1));
  ASSERT_TRUE(loop_.Enqueue([](core::Scheduler&, absl::Time) {}, nullptr,
                            record, /*mutates=*/false));
  loop_.Stop();
  MutexLock lock(&mu);
  ASSERT_EQ(answers.size(), 2u);
  for (const absl::Status& answer : answers) {
    EXPECT_TRUE(absl::IsUnavailable(answer)) << answer;
  }
  EXPECT_EQ(store_.batch_queues(), std::vector<int>{1});  // warm-up only
}

TEST_F(WritesRefusedTest, ObserversSeeBothTransitions) {
  loop_.Start();
  store_.SetFull(true);
  ASSERT_TRUE(loop_.Enqueue(
      [](core::Scheduler& s, absl::Time) {
        core::Queue queue;
        queue.name = core::QueueName("a");
        EXPECT_TRUE(s.PutQueue(queue).ok());
      },
      nullptr, nullptr));
  ASSERT_TRUE(store_.AwaitRefused(1));
  store_.SetFull(false);
  loop_.Stop();  // the last retry commits
  const std::vector<absl::Status> causes = refusals_.causes();
  ASSERT_EQ(causes.size(), 2u);
  EXPECT_TRUE(absl::IsResourceExhausted(causes[0])) << causes[0];
  EXPECT_TRUE(causes[1].ok());
  EXPECT_TRUE(loop_.WritesRefused().ok());
}

// A gang with id `id` in queue `queue` (enough for the view).
core::GangPtr Gang(const std::string& id, const std::string& queue = "q") {
  auto gang = std::make_shared<core::Gang>();
  gang->id = core::GangId(id);
  gang->spec.queue = core::QueueName(queue);
  return gang;
}

core::LoadedState StateWithGangs(int count) {
  core::LoadedState state;
  state.meta.last_revision = 7;
  core::Queue queue;
  queue.name = core::QueueName("q");
  state.queues.push_back(queue);
  for (int i = 0; i < count; ++i) {
    state.gangs.push_back(*Gang(absl::StrCat("g-", i)));
  }
  return state;
}

TEST(ViewTest, AFollowersViewFollowsTheMutationsItReplicates) {
  std::shared_ptr<const View> view = ViewOfState(StateWithGangs(3));
  EXPECT_EQ(view->revision, 7);
  EXPECT_EQ(view->gangs.size(), 3u);
  EXPECT_EQ(view->queue_parents->count("q"), 1u);

  core::Mutation mutation;
  mutation.meta.last_revision = 9;
  mutation.gangs_put = {Gang("g-3"), Gang("g-0", "r")};
  mutation.gangs_deleted = {core::GangId("g-1")};
  core::Queue child;
  child.name = core::QueueName("r");
  child.parent = core::QueueName("q");
  mutation.queues_put = {child};
  std::shared_ptr<const View> next = ViewAfter(*view, mutation);
  EXPECT_EQ(next->revision, 9);
  EXPECT_EQ(next->gangs.size(), 3u);
  EXPECT_EQ(next->gangs.Find(core::GangId("g-1")), nullptr);
  EXPECT_EQ(next->gangs.Find(core::GangId("g-0"))->spec.queue.value(), "r");
  EXPECT_EQ(next->queue_parents->at("r"), "q");
  // The old view is untouched (readers may still hold it).
  EXPECT_NE(view->gangs.Find(core::GangId("g-1")), nullptr);
  EXPECT_EQ(view->queue_parents->count("r"), 0u);
}

TEST(ViewTest, AFollowingLoopRefusesCommandsUntilItLeads) {
  core::MemoryStore store;
  SchedulerLoop loop(ViewOfState(StateWithGangs(2)), &store, {});
  EXPECT_TRUE(loop.following());
  EXPECT_FALSE(loop.Enqueue([](core::Scheduler&, absl::Time) {}, nullptr,
                            nullptr, /*mutates=*/false));
  core::Mutation mutation;
  mutation.meta.last_revision = 8;
  mutation.gangs_put = {Gang("g-9")};
  loop.Replicate(mutation);
  EXPECT_EQ(loop.view()->revision, 8);
  EXPECT_NE(loop.view()->gangs.Find(core::GangId("g-9")), nullptr);

  loop.Lead(std::make_unique<core::Scheduler>());
  EXPECT_FALSE(loop.following());
  EXPECT_EQ(loop.view()->gangs.size(), 0u);  // the new scheduler's view
  loop.Start();
  Mutex mu;
  bool replied = false;
  EXPECT_TRUE(loop.Enqueue([](core::Scheduler&, absl::Time) {}, nullptr,
                           [&](const absl::Status&) {
                             MutexLock lock(&mu);
                             replied = true;
                           },
                           /*mutates=*/false));
  MutexLock lock(&mu);
  EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(&replied), kTimeout));
}

// Runs `read` as a read-only command on `loop`; false when it was refused
// or not answered in time.
bool Read(SchedulerLoop& loop,
          const std::function<void(core::Scheduler&)>& read) {
  Notification replied;
  if (!loop.Enqueue([&](core::Scheduler& s, absl::Time) { read(s); }, nullptr,
                    [&](const absl::Status&) { replied.Notify(); },
                    /*mutates=*/false)) {
    return false;
  }
  return replied.WaitForNotificationWithTimeout(kTimeout);
}

// The replicated state a follower's loader reads: queue "q" at `revision`.
class FakeReplica {
 public:
  SchedulerLoop::ReplicaLoader Loader() {
    return [this]() -> absl::StatusOr<core::LoadedState> {
      MutexLock lock(&mu_);
      ++loads_;
      core::LoadedState state = StateWithGangs(0);
      state.meta.last_revision = revision_;
      return state;
    };
  }
  void set_revision(int64_t revision) {
    MutexLock lock(&mu_);
    revision_ = revision;
  }
  int loads() {
    MutexLock lock(&mu_);
    return loads_;
  }

 private:
  Mutex mu_;
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 7;
  int loads_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(ViewTest, AFollowingLoopServesReadsFromTheReplicatedState) {
  core::MemoryStore store;
  FakeReplica replica;
  SchedulerLoop loop(ViewOfState(StateWithGangs(0)), &store, {},
                     replica.Loader());
  int64_t revision = 0;
  size_t queues = 0;
  auto read = [&](core::Scheduler& s) {
    revision = s.revision();
    queues = s.queues().size();
  };
  ASSERT_TRUE(Read(loop, read));
  EXPECT_EQ(revision, 7);
  EXPECT_EQ(queues, 1u);
  // Writes are still refused.
  EXPECT_FALSE(loop.Enqueue([](core::Scheduler&, absl::Time) {}, nullptr,
                            nullptr, /*mutates=*/true));
  // Until the view moves, reads share one restored state...
  ASSERT_TRUE(Read(loop, read));
  const int loads = replica.loads();
  // ...and a read that changed it does not leak into the next one.
  ASSERT_TRUE(Read(loop, [](core::Scheduler& s) {
    core::Queue extra;
    extra.name = core::QueueName("extra");
    ASSERT_TRUE(s.PutQueue(extra).ok());
  }));
  ASSERT_TRUE(Read(loop, read));
  EXPECT_EQ(queues, 1u);
  EXPECT_EQ(replica.loads(), loads + 1);
  // A replicated batch moves the view: the next read is at its revision.
  replica.set_revision(9);
  core::Mutation mutation;
  mutation.meta.last_revision = 9;
  loop.Replicate(mutation);
  ASSERT_TRUE(Read(loop, read));
  EXPECT_EQ(revision, 9);
  // Once it leads, reads are the leader's.
  loop.Lead(std::make_unique<core::Scheduler>());
  loop.Start();
  ASSERT_TRUE(Read(loop, read));
  EXPECT_EQ(queues, 0u);
  loop.Stop();
}

// A leading loop given a loader serves reads from the durable state while
// its writes are refused: the held batch's queue is not seen, the read is
// answered OK without waiting for it, and once writes resume the leading
// scheduler (with the queue) answers again.
TEST(WritesRefusedReadsTest, ReadsAreServedFromTheDurableStateWhileRefused) {
  GatedStore store;
  SchedulerLoop loop(std::make_unique<core::Scheduler>(), &store, {},
                     [&store] { return store.LoadAll(); });
  EXPECT_TRUE(loop.ServesReadsWhileRefused());
  loop.Start();
  auto put_queue = [&loop](const std::string& name, Notification* done) {
    return loop.Enqueue(
        [name](core::Scheduler& s, absl::Time) {
          core::Queue queue;
          queue.name = core::QueueName(name);
          EXPECT_TRUE(s.PutQueue(queue).ok());
        },
        nullptr,
        [done](const absl::Status& committed) {
          EXPECT_TRUE(committed.ok()) << committed;
          done->Notify();
        });
  };
  Notification warmed_up;
  ASSERT_TRUE(put_queue("durable", &warmed_up));
  ASSERT_TRUE(warmed_up.WaitForNotificationWithTimeout(kTimeout));
  const int64_t durable_revision = loop.view()->revision;

  store.SetFull(true);
  Notification held;
  ASSERT_TRUE(put_queue("held", &held));
  ASSERT_TRUE(store.AwaitRefused(1));
  std::vector<std::string> seen;
  int64_t revision = -1;
  auto read = [&](core::Scheduler& s) {
    seen.clear();
    for (const auto& [name, queue] : s.queues()) seen.push_back(name.value());
    std::sort(seen.begin(), seen.end());
    revision = s.revision();
  };
  ASSERT_TRUE(Read(loop, read));
  EXPECT_EQ(seen, std::vector<std::string>{"durable"});
  EXPECT_EQ(revision, durable_revision);
  EXPECT_FALSE(held.HasBeenNotified());
  EXPECT_FALSE(loop.WritesRefused().ok());

  store.SetFull(false);
  ASSERT_TRUE(held.WaitForNotificationWithTimeout(kTimeout));
  ASSERT_TRUE(Read(loop, read));
  EXPECT_EQ(seen, (std::vector<std::string>{"durable", "held"}));
  loop.Stop();
}

TEST(ViewTest, ViewsStayReadableByRevisionAfterNewerOnes) {
  core::MemoryStore store;
  SchedulerLoop loop(ViewOfState(StateWithGangs(1)), &store, {});
  core::Mutation mutation;
  for (int64_t revision = 8; revision <= 10; ++revision) {
    mutation.meta.last_revision = revision;
    mutation.gangs_put = {Gang(absl::StrCat("g-", revision))};
    loop.Replicate(mutation);
  }
  for (int64_t revision = 7; revision <= 10; ++revision) {
    std::shared_ptr<const View> view = loop.ViewAt(revision);
    ASSERT_NE(view, nullptr) << revision;
    EXPECT_EQ(view->revision, revision);
    EXPECT_EQ(view->gangs.size(), static_cast<size_t>(revision - 6));
  }
  EXPECT_EQ(loop.ViewAt(6), nullptr);
  EXPECT_EQ(loop.ViewAt(11), nullptr);
  // At most kMaxRecentViews replaced views are kept.
  for (size_t i = 0; i < SchedulerLoop::kMaxRecentViews; ++i) {
    mutation.meta.last_revision = 11 + static_cast<int64_t>(i);
    mutation.gangs_put.clear();
    loop.Replicate(mutation);
  }
  EXPECT_EQ(loop.ViewAt(7), nullptr);
  EXPECT_NE(loop.ViewAt(10), nullptr);
  // Nor are views whose gangs so many newer batches replaced.
  const int64_t before = loop.view()->revision;
  mutation.meta.last_revision = before + 1;
  for (size_t i = 0; i <= SchedulerLoop::kMaxRecentGangVersions; ++i) {
    mutation.gangs_put.push_back(Gang(absl::StrCat("churn-", i)));
  }
  loop.Replicate(mutation);
  EXPECT_EQ(loop.ViewAt(before), nullptr);
  EXPECT_NE(loop.ViewAt(before + 1), nullptr);
}

// What one replicated batch costs a follower's view at 100k gangs (printed,
// not asserted): O(changed gangs), the shards a batch touches copied.
TEST(ViewTest, OneBatchOnAHundredThousandGangs) {
  std::shared_ptr<const View> view = ViewOfState(StateWithGangs(100000));
  core::Mutation mutation;
  mutation.meta.last_revision = 8;
  mutation.gangs_put = {Gang("g-5"), Gang("g-100000")};
  const int kRounds = 200;
  const absl::Time start = absl::Now();
  for (int i = 0; i < kRounds; ++i) {
    mutation.meta.last_revision = 8 + i;
    view = ViewAfter(*view, mutation);
  }
  const absl::Duration each = (absl::Now() - start) / kRounds;
  std::printf("ViewAfter, 2 gangs of 100k: %.1f us per batch\n",
              absl::ToDoubleMicroseconds(each));
  EXPECT_EQ(view->gangs.size(), 100001u);
}

}  // namespace
}  // namespace phalanx::server
