// WatchGangs and WatchGangBatches: list-then-watch semantics over a real
// daemon.
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/daemon.h"

namespace phalanx::testing {
namespace {

class WatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = StartDemoDaemon();
    AddArgs(*daemon_);
    ASSERT_TRUE(daemon_->Start()) << daemon_->output();
    scheduler_ = daemon_->Scheduler();
  }

  // Flags a derived fixture adds to the demo daemon's.
  virtual void AddArgs(DaemonProcess&) {}

  std::string Submit(const std::string& queue) {
    grpc::ClientContext context;
    v1::SubmitGangResponse response;
    EXPECT_TRUE(
        scheduler_->SubmitGang(&context, SubmitRequest(queue, 1, 1), &response)
            .ok());
    return response.gang().id();
  }

  // Reads `n` non-bookmark events from a stream opened with `request`.
  std::vector<v1::GangEvent> Read(v1::WatchGangsRequest request, int n) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(20));
    auto reader = scheduler_->WatchGangs(&context, request);
    std::vector<v1::GangEvent> events = ReadFrom(*reader, n);
    context.TryCancel();
    return events;
  }

  // Reads up to `n` non-bookmark events from an open stream.
  static std::vector<v1::GangEvent> ReadFrom(
      grpc::ClientReaderInterface<v1::GangEvent>& reader, int n) {
    std::vector<v1::GangEvent> events;
    v1::GangEvent event;
    while (static_cast<int>(events.size()) < n && reader.Read(&event)) {
      if (event.type() != v1::EVENT_TYPE_BOOKMARK) events.push_back(event);
    }
    return events;
  }

  // Reads WatchGangBatches messages until they hold `n` non-bookmark events
  // (or the stream ends); returns the messages, bookmarks left out.
  static std::vector<v1::GangEventBatch> ReadBatches(
      grpc::ClientReaderInterface<v1::GangEventBatch>& reader, int n) {
    std::vector<v1::GangEventBatch> batches;
    v1::GangEventBatch batch;
    int events = 0;
    while (events < n && reader.Read(&batch)) {
      EXPECT_GT(batch.events_size(), 0);
      if (batch.events_size() == 1 &&
          batch.events(0).type() == v1::EVENT_TYPE_BOOKMARK) {
        continue;
      }
      for (const v1::GangEvent& event : batch.events()) {
        EXPECT_NE(event.type(), v1::EVENT_TYPE_BOOKMARK);
      }
      events += batch.events_size();
      batches.push_back(batch);
    }
    return batches;
  }

  static std::vector<v1::GangEvent> EventsOf(
      const std::vector<v1::GangEventBatch>& batches) {
    std::vector<v1::GangEvent> events;
    for (const v1::GangEventBatch& batch : batches) {
      events.insert(events.end(), batch.events().begin(), batch.events().end());
    }
    return events;
  }

  // Submits threads x per_thread one-GPU gangs from `threads` threads at
  // once, so batches carry several gangs and each stream gets several
  // events per wake-up (sent as buffered writes).
  void SubmitConcurrently(int threads, int per_thread) {
    std::vector<std::thread> submitters;
    for (int t = 0; t < threads; ++t) {
      submitters.emplace_back([this, per_thread] {
        for (int i = 0; i < per_thread; ++i) Submit("a");
      });
    }
    for (std::thread& submitter : submitters) submitter.join();
  }

  // Every revision from first to first+size-1 once, in order; each gang
  // SUBMITTED before it is ADMITTED.
  static void ExpectWholeAndInOrder(const std::vector<v1::GangEvent>& events,
                                    int64_t first) {
    std::map<std::string, int64_t> submitted_at;
    for (size_t i = 0; i < events.size(); ++i) {
      EXPECT_EQ(events[i].revision(), first + static_cast<int64_t>(i));
      const std::string& id = events[i].gang().id();
      if (events[i].type() == v1::EVENT_TYPE_SUBMITTED) {
        submitted_at[id] = events[i].revision();
      } else {
        EXPECT_EQ(events[i].type(), v1::EVENT_TYPE_ADMITTED);
        EXPECT_TRUE(submitted_at.contains(id)) << id;
      }
    }
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::Scheduler::Stub> scheduler_;
};

TEST_F(WatchTest, EveryEventInRevisionOrderThenResume) {
  for (int i = 0; i < 3; ++i) Submit("a");
  v1::WatchGangsRequest request;
  request.set_after_revision(0);
  std::vector<v1::GangEvent> events = Read(request, 6);
  ASSERT_EQ(events.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(events[i].revision(), i + 1);
  EXPECT_EQ(events[0].type(), v1::EVENT_TYPE_SUBMITTED);
  EXPECT_EQ(events[1].type(), v1::EVENT_TYPE_ADMITTED);
  EXPECT_EQ(events[1].gang().placement_size(), 1);

  request.set_after_revision(3);
  std::vector<v1::GangEvent> resumed = Read(request, 3);
  ASSERT_EQ(resumed.size(), 3u);
  EXPECT_EQ(resumed[0].revision(), 4);
  EXPECT_EQ(resumed[2].revision(), 6);
}

TEST_F(WatchTest, LiveEventsArriveAfterTheStreamOpens) {
  grpc::ClientContext context;
  auto reader = scheduler_->WatchGangs(&context, {});
  v1::GangEvent event;
  // A live stream sees only what is committed after the daemon opened it;
  // the client's call returns before that. The first message, a bookmark
  // after 0.5 s idle, shows the stream is open.
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.type(), v1::EVENT_TYPE_BOOKMARK);
  const std::string id = Submit("b");
  do {
    ASSERT_TRUE(reader->Read(&event));
  } while (event.type() == v1::EVENT_TYPE_BOOKMARK);
  EXPECT_EQ(event.type(), v1::EVENT_TYPE_SUBMITTED);
  EXPECT_EQ(event.gang().id(), id);
  context.TryCancel();
}

TEST_F(WatchTest, FiltersByQueueAndGang) {
  Submit("a");
  const std::string b = Submit("b");
  Submit("a");
  v1::WatchGangsRequest request;
  request.set_after_revision(0);
  request.add_queues("b");
  std::vector<v1::GangEvent> events = Read(request, 2);
  ASSERT_EQ(events.size(), 2u);
  for (const v1::GangEvent& event : events) EXPECT_EQ(event.gang().id(), b);
  request.clear_queues();
  request.add_gang_ids(b);
  events = Read(request, 2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].gang().id(), b);
}

TEST_F(WatchTest, IdleStreamGetsABookmarkWithTheCurrentRevision) {
  Submit("a");
  grpc::ClientContext context;
  v1::WatchGangsRequest request;
  request.set_after_revision(2);
  auto reader = scheduler_->WatchGangs(&context, request);
  v1::GangEvent event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.type(), v1::EVENT_TYPE_BOOKMARK);
  EXPECT_EQ(event.revision(), 2);
  context.TryCancel();
}

TEST_F(WatchTest, TrimmedRevisionIsOutOfRangeOnBothStreams) {
  for (int i = 0; i < 40; ++i) Submit("a");  // 80 events; 50 are kept
  grpc::ClientContext context;
  v1::WatchGangsRequest request;
  request.set_after_revision(5);
  auto reader = scheduler_->WatchGangs(&context, request);
  v1::GangEvent event;
  EXPECT_FALSE(reader->Read(&event));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::OUT_OF_RANGE);
  {  // WatchGangBatches refuses it alike
    grpc::ClientContext batched_context;
    auto batches = scheduler_->WatchGangBatches(&batched_context, request);
    v1::GangEventBatch batch;
    EXPECT_FALSE(batches->Read(&batch));
    EXPECT_EQ(batches->Finish().error_code(), grpc::StatusCode::OUT_OF_RANGE);
  }
  request.set_after_revision(70);
  std::vector<v1::GangEvent> tail = Read(request, 10);
  ASSERT_EQ(tail.size(), 10u);
  EXPECT_EQ(tail[0].revision(), 71);
}

TEST_F(WatchTest, BurstsArriveWholeAndInRevisionOrder) {
  grpc::ClientContext context;
  v1::WatchGangsRequest request;
  request.set_after_revision(0);
  auto reader = scheduler_->WatchGangs(&context, request);
  SubmitConcurrently(4, 8);  // 32 one-GPU gangs: all fit, 64 events
  std::vector<v1::GangEvent> events = ReadFrom(*reader, 64);
  ASSERT_EQ(events.size(), 64u);
  ExpectWholeAndInOrder(events, 1);
  context.TryCancel();
}

TEST_F(WatchTest, AWatcherLeavingMidBurstLeavesTheOthersWhole) {
  v1::WatchGangsRequest request;
  request.set_after_revision(0);
  grpc::ClientContext leaving_context;
  auto leaving = scheduler_->WatchGangs(&leaving_context, request);
  grpc::ClientContext staying_context;
  auto staying = scheduler_->WatchGangs(&staying_context, request);
  std::thread burst([this] { SubmitConcurrently(4, 8); });
  EXPECT_EQ(ReadFrom(*leaving, 3).size(), 3u);
  leaving_context.TryCancel();  // while the hub still has events for it
  burst.join();
  std::vector<v1::GangEvent> events = ReadFrom(*staying, 64);
  ASSERT_EQ(events.size(), 64u);
  ExpectWholeAndInOrder(events, 1);
  // The hub keeps serving after the stream is gone.
  Submit("b");
  std::vector<v1::GangEvent> next = ReadFrom(*staying, 2);
  ASSERT_EQ(next.size(), 2u);
  EXPECT_EQ(next[0].revision(), 65);
  EXPECT_EQ(next[1].revision(), 66);
  staying_context.TryCancel();
}

TEST_F(WatchTest, ABatchCarriesEverythingQueuedBeforeTheStreamWrites) {
  for (int i = 0; i < 16; ++i) Submit("a");  // 32 events, all committed
  grpc::ClientContext context;
  v1::WatchGangsRequest request;
  request.set_after_revision(0);
  auto reader = scheduler_->WatchGangBatches(&context, request);
  v1::GangEventBatch batch;
  ASSERT_TRUE(reader->Read(&batch));
  // Everything after revision 0 was ready before the first write: one
  // message, in revision order, nothing twice.
  ASSERT_EQ(batch.events_size(), 32);
  ExpectWholeAndInOrder({batch.events().begin(), batch.events().end()}, 1);
  // The stream stays live: the next events come in later messages.
  Submit("b");
  std::vector<v1::GangEvent> next = EventsOf(ReadBatches(*reader, 2));
  ASSERT_EQ(next.size(), 2u);
  EXPECT_EQ(next[0].revision(), 33);
  EXPECT_EQ(next[1].revision(), 34);
  context.TryCancel();
}

TEST_F(WatchTest, BatchedBurstsArriveWholeAndInRevisionOrder) {
  v1::WatchGangsRequest request;
  request.set_after_revision(0);
  grpc::ClientContext batched_context;
  auto batched = scheduler_->WatchGangBatches(&batched_context, request);
  grpc::ClientContext single_context;
  auto single = scheduler_->WatchGangs(&single_context, request);
  SubmitConcurrently(4, 8);  // 64 events while both streams drain
  std::vector<v1::GangEvent> events = EventsOf(ReadBatches(*batched, 64));
  ASSERT_EQ(events.size(), 64u);
  ExpectWholeAndInOrder(events, 1);
  // Both RPCs carry the same events, byte for byte.
  std::vector<v1::GangEvent> singles = ReadFrom(*single, 64);
  ASSERT_EQ(singles.size(), 64u);
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].SerializeAsString(), singles[i].SerializeAsString());
  }
  batched_context.TryCancel();
  single_context.TryCancel();
}

TEST_F(WatchTest, BatchedStreamsFilterAndBookmarkLikeSingleOnes) {
  Submit("a");
  const std::string b = Submit("b");
  grpc::ClientContext context;
  v1::WatchGangsRequest request;
  request.set_after_revision(0);
  request.add_queues("b");
  auto reader = scheduler_->WatchGangBatches(&context, request);
  std::vector<v1::GangEvent> events = EventsOf(ReadBatches(*reader, 2));
  ASSERT_EQ(events.size(), 2u);
  for (const v1::GangEvent& event : events) EXPECT_EQ(event.gang().id(), b);
  // Idle now: a bookmark, alone in its message, at the current revision.
  v1::GangEventBatch bookmark;
  ASSERT_TRUE(reader->Read(&bookmark));
  ASSERT_EQ(bookmark.events_size(), 1);
  EXPECT_EQ(bookmark.events(0).type(), v1::EVENT_TYPE_BOOKMARK);
  EXPECT_EQ(bookmark.events(0).revision(), 4);
  context.TryCancel();
}

// Live streams of one burst, batched with and without a filter and single:
// each sees its events whole, in order and byte for byte alike, however
// the hub groups them into messages.
TEST_F(WatchTest, LiveBatchedStreamsAgreeWithAndWithoutAFilter) {
  v1::WatchGangsRequest all;
  all.set_after_revision(0);
  v1::WatchGangsRequest only_b = all;
  only_b.add_queues("b");
  grpc::ClientContext all_context, b_context, single_context;
  auto batched = scheduler_->WatchGangBatches(&all_context, all);
  auto batched_b = scheduler_->WatchGangBatches(&b_context, only_b);
  auto single = scheduler_->WatchGangs(&single_context, all);
  std::vector<std::thread> submitters;
  for (const char* queue : {"a", "b", "a", "b"}) {
    submitters.emplace_back([this, queue] {
      for (int i = 0; i < 6; ++i) Submit(queue);
    });
  }
  for (std::thread& submitter : submitters) submitter.join();
  std::vector<v1::GangEvent> events = EventsOf(ReadBatches(*batched, 48));
  ASSERT_EQ(events.size(), 48u);
  ExpectWholeAndInOrder(events, 1);
  std::vector<v1::GangEvent> singles = ReadFrom(*single, 48);
  ASSERT_EQ(singles.size(), 48u);
  std::vector<std::string> of_b;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].SerializeAsString(), singles[i].SerializeAsString());
    if (events[i].gang().spec().queue() == "b") {
      of_b.push_back(events[i].SerializeAsString());
    }
  }
  ASSERT_EQ(of_b.size(), 24u);
  std::vector<v1::GangEvent> b_events = EventsOf(ReadBatches(*batched_b, 24));
  ASSERT_EQ(b_events.size(), 24u);
  for (size_t i = 0; i < b_events.size(); ++i) {
    EXPECT_EQ(b_events[i].SerializeAsString(), of_b[i]);
  }
  all_context.TryCancel();
  b_context.TryCancel();
  single_context.TryCancel();
}

// Sweeps 2 s apart and bookmarks an hour apart: a burst coalesces into one
// sweep, and nothing but the stream's own writes moves it on afterwards.
class WatchSweepTest : public WatchTest {
 protected:
  void AddArgs(DaemonProcess& daemon) override {
    daemon.AddArgs(
        {"--watch_sweep_interval=2s", "--watch_sweep_quiet=2s",
         "--config=" +
             daemon.WriteFile(
                 "sweep_config.json",
                 R"({"topologyLevels":["block","rack"],"cycleInterval":"0.2s",)"
                 R"("watch":{"bookmarkInterval":"3600s"}})")});
  }

  int64_t HeadRevision() {
    grpc::ClientContext context;
    v1::ListGangsRequest request;
    request.set_page_size(1);
    v1::ListGangsResponse response;
    EXPECT_TRUE(scheduler_->ListGangs(&context, request, &response).ok());
    return response.revision();
  }

  // Reads events up to revision `head`: every revision from `expected` on
  // once, in order.
  template <typename Next>
  static void ExpectEverything(int64_t expected, int64_t head, Next next) {
    while (expected <= head) {
      std::optional<v1::GangEvent> event = next();
      ASSERT_TRUE(event.has_value())
          << "stream ended before revision " << expected << " of " << head;
      if (event->type() == v1::EVENT_TYPE_BOOKMARK) continue;
      ASSERT_EQ(event->revision(), expected);
      ++expected;
    }
  }
};

// Found in review: a live stream handed more events in one sweep than it
// reads at once (a page of 256) sent the first page and then waited for
// the next sweep or bookmark; and a WatchGangs stream that was writing when
// a sweep came forgot it once its queue ran dry. Every event of a burst
// must follow the first page without another commit.
TEST_F(WatchSweepTest, ABurstLargerThanAPageArrivesWithoutAnotherSweep) {
  v1::WatchGangsRequest request;
  request.set_after_revision(0);
  grpc::ClientContext batched_context, single_context;
  for (grpc::ClientContext* context : {&batched_context, &single_context}) {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(30));
  }
  auto batched = scheduler_->WatchGangBatches(&batched_context, request);
  auto single = scheduler_->WatchGangs(&single_context, request);
  v1::GangEventBatch batch;
  int in_batch = 0;
  auto next_batched = [&]() -> std::optional<v1::GangEvent> {
    while (in_batch == batch.events_size()) {
      if (!batched->Read(&batch)) return std::nullopt;
      in_batch = 0;
    }
    return batch.events(in_batch++);
  };
  auto next_single = [&]() -> std::optional<v1::GangEvent> {
    v1::GangEvent event;
    if (!single->Read(&event)) return std::nullopt;
    return event;
  };
  // Both streams live and caught up: revision 1 was swept to them at once.
  Submit("a");
  ExpectEverything(1, 1, next_batched);
  ExpectEverything(1, 1, next_single);
  // The next sweep is 2 s after that one: the burst waits for it.
  SubmitConcurrently(8, 40);  // 320 gangs, 64 of them admitted
  const int64_t head = HeadRevision();
  ASSERT_GT(head, 300);
  ExpectEverything(2, head, next_batched);
  ExpectEverything(2, head, next_single);
  batched_context.TryCancel();
  single_context.TryCancel();
}

// The bookmark ticker waits a tenth of the interval (here 6 minutes); a
// shorter interval set meanwhile must apply at once, not after that wait.
TEST_F(WatchSweepTest, AShorterBookmarkIntervalAppliesWithoutWaitingOutTheOld) {
  // Past the ticker's first wait, which began before the config file's
  // interval was applied (it made the test pass without the fix).
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  Submit("a");
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
  v1::WatchGangsRequest request;
  request.set_after_revision(HeadRevision());
  auto reader = scheduler_->WatchGangs(&context, request);
  {
    grpc::ClientContext get_context, update_context;
    v1::Config config;
    ASSERT_TRUE(daemon_->Admin()->GetConfig(&get_context, {}, &config).ok());
    config.mutable_watch()->mutable_bookmark_interval()->set_seconds(0);
    config.mutable_watch()->mutable_bookmark_interval()->set_nanos(200'000'000);
    v1::UpdateConfigRequest update;
    *update.mutable_config() = config;
    update.set_expected_version(config.version());
    v1::Config updated;
    ASSERT_TRUE(
        daemon_->Admin()->UpdateConfig(&update_context, update, &updated).ok());
  }
  v1::GangEvent event;
  ASSERT_TRUE(reader->Read(&event)) << "no bookmark before the deadline";
  EXPECT_EQ(event.type(), v1::EVENT_TYPE_BOOKMARK);
  context.TryCancel();
}

}  // namespace
}  // namespace phalanx::testing
