// The watch hub's contract (server/watch_hub.h) over real gRPC on loopback
// and a real RocksDB: a minimal Scheduler service hands WatchGangs and
// WatchGangBatches to the hub, and the test publishes batches the way the
// scheduler loop does (commit, then OnDurable).
#include "server/watch_hub.h"

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "phalanx/v1/scheduler.grpc.pb.h"
#include "storage/rocksdb_store.h"

namespace phalanx::server {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

// Metadata the test sends to pick the stream's access.
constexpr char kWho[] = "who";        // the principal, allowed 1 stream
constexpr char kRefuse[] = "refuse";  // the hub refuses the stream

class HubService : public v1::Scheduler::WithRawCallbackMethod_WatchGangs<
                       v1::Scheduler::WithRawCallbackMethod_WatchGangBatches<
                           v1::Scheduler::CallbackService>> {
 public:
  explicit HubService(WatchHub* hub) : hub_(hub) {}
  grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchGangs(
      grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request) override {
    return Watch(context, *request, WatchFormat::kEvents);
  }
  grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchGangBatches(
      grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request) override {
    return Watch(context, *request, WatchFormat::kBatches);
  }

 private:
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Watch(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer& request,
      WatchFormat format) {
    const auto& metadata = context->client_metadata();
    if (metadata.count(kRefuse) > 0) {
      return hub_->Refuse(
          grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "refused"));
    }
    WatchAccess access;
    access.context = context;
    // Nobody sees queue "hidden".
    access.scope = [](const std::string& queue) { return queue != "hidden"; };
    if (auto who = metadata.find(kWho); who != metadata.end()) {
      access.principal = std::string(who->second.data(), who->second.size());
      access.max_streams = 1;
    }
    return hub_->Watch(request, std::move(access), format);
  }

  WatchHub* hub_;
};

class WatchHubTest : public ::testing::Test {
 protected:
  WatchHubTest() {
    char pattern[] = "/tmp/phalanx-hub-XXXXXX";
    dir_ = mkdtemp(pattern);
    store_ = *storage::RocksDbStore::Open(dir_);
    // No sweep delay: each batch goes out at once.
    hub_ = std::make_unique<WatchHub>(
        store_.get(), 0, 1024,
        WatchFlush{absl::ZeroDuration(), absl::ZeroDuration()});
    service_ = std::make_unique<HubService>(hub_.get());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    stub_ = v1::Scheduler::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                            grpc::InsecureChannelCredentials()));
  }
  ~WatchHubTest() override {
    hub_->Shutdown();
    server_->Shutdown(std::chrono::system_clock::now());
    server_.reset();
    hub_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Commits one batch of one event for gang `id` of `queue`, then hands it
  // to the hub, as the loop does. Returns its revision.
  int64_t Publish(const std::string& id, const std::string& queue,
                  core::EventType type = core::EventType::kSubmitted) {
    auto gang = std::make_shared<core::Gang>();
    gang->id = core::GangId(id);
    gang->spec.queue = core::QueueName(queue);
    gang->submit_time = kT0;
    core::Mutation mutation;
    mutation.events.push_back({++revision_, type, kT0, gang});
    EXPECT_TRUE(store_->Commit(mutation).ok());
    hub_->OnDurable(mutation, absl::ZeroDuration(), 1);
    return revision_;
  }

  // One WatchGangs call; cancelled and finished when dropped unfinished.
  struct Stream {
    ~Stream() {
      if (finished) return;
      context.TryCancel();
      (void)reader->Finish();
    }
    grpc::Status Finish() {
      finished = true;
      return reader->Finish();
    }
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<v1::GangEvent>> reader;
    bool finished = false;
  };
  std::unique_ptr<Stream> Watch(v1::WatchGangsRequest request,
                                const std::string& who = "",
                                bool refuse = false) {
    auto stream = std::make_unique<Stream>();
    stream->context.set_deadline(std::chrono::system_clock::now() +
                                 std::chrono::seconds(30));
    if (!who.empty()) stream->context.AddMetadata(kWho, who);
    if (refuse) stream->context.AddMetadata(kRefuse, "1");
    stream->reader = stub_->WatchGangs(&stream->context, request);
    return stream;
  }
  static v1::WatchGangsRequest After(int64_t revision) {
    v1::WatchGangsRequest request;
    request.set_after_revision(revision);
    return request;
  }
  // The next `count` events that are not bookmarks, as "revision:gang".
  static std::vector<std::string> Read(Stream& stream, int count) {
    std::vector<std::string> out;
    v1::GangEvent event;
    // Bounded by the count and by the stream's deadline.
    while (static_cast<int>(out.size()) < count &&
           stream.reader->Read(&event)) {
      if (event.type() == v1::EVENT_TYPE_BOOKMARK) continue;
      out.push_back(std::to_string(event.revision()) + ":" + event.gang().id());
    }
    return out;
  }

  std::string dir_;
  std::unique_ptr<storage::RocksDbStore> store_;
  std::unique_ptr<WatchHub> hub_;
  std::unique_ptr<HubService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Scheduler::Stub> stub_;
  int64_t revision_ = 0;
};

using Events = std::vector<std::string>;

TEST_F(WatchHubTest, StreamsCommittedEventsInRevisionOrder) {
  auto stream = Watch(After(0));
  Publish("g-1", "a");
  Publish("g-2", "b");
  Publish("g-1", "a", core::EventType::kAdmitted);
  EXPECT_EQ(Read(*stream, 3), (Events{"1:g-1", "2:g-2", "3:g-1"}));
}

// While no stream is open the hub keeps no ring: a stream resuming from an
// older revision reads the store first, then follows live events.
TEST_F(WatchHubTest, ResumesFromAnOlderRevisionThroughTheStore) {
  for (int i = 1; i <= 4; ++i) Publish("g-" + std::to_string(i), "a");
  auto stream = Watch(After(2));
  EXPECT_EQ(Read(*stream, 2), (Events{"3:g-3", "4:g-4"}));
  Publish("g-5", "a");
  EXPECT_EQ(Read(*stream, 1), (Events{"5:g-5"}));
}

// A stream sees only what its request names and its scope allows; the
// last event ("g-last", in every filter) shows that nothing else came.
TEST_F(WatchHubTest, ShowsOnlyTheRequestedAndAllowedEvents) {
  Publish("g-a", "a");
  Publish("g-b", "b");
  Publish("g-h", "hidden");
  Publish("g-last", "a");
  EXPECT_EQ(Read(*Watch(After(0)), 3), (Events{"1:g-a", "2:g-b", "4:g-last"}));
  v1::WatchGangsRequest queue_b = After(0);
  queue_b.add_queues("b");
  queue_b.add_queues("hidden");
  auto b = Watch(queue_b);
  EXPECT_EQ(Read(*b, 1), (Events{"2:g-b"}));
  v1::WatchGangsRequest ids = After(0);
  ids.add_gang_ids("g-h");
  ids.add_gang_ids("g-last");
  EXPECT_EQ(Read(*Watch(ids), 1), (Events{"4:g-last"}));
}

TEST_F(WatchHubTest, RefusesBadRevisionsAndTrimmedHistory) {
  auto negative = Watch(After(-1));
  EXPECT_TRUE(Read(*negative, 1).empty());
  EXPECT_EQ(negative->Finish().error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  Publish("g-1", "a");
  Publish("g-2", "a");
  core::Mutation trim;
  trim.trim_events_before = 2;  // what retention commits
  trim.meta.first_retained_revision = 2;
  ASSERT_TRUE(store_->Commit(trim).ok());
  auto trimmed = Watch(After(0));
  EXPECT_TRUE(Read(*trimmed, 1).empty());
  EXPECT_EQ(trimmed->Finish().error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(Read(*Watch(After(1)), 1), (Events{"2:g-2"}));
}

TEST_F(WatchHubTest, RefuseEndsTheStreamWithTheStatus) {
  auto stream = Watch(After(0), "", /*refuse=*/true);
  EXPECT_TRUE(Read(*stream, 1).empty());
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(status.error_message(), "refused");
}

TEST_F(WatchHubTest, CapsThePrincipalsOpenStreams) {
  Publish("g-1", "a");
  auto first = Watch(After(0), "alice");
  ASSERT_EQ(Read(*first, 1), (Events{"1:g-1"}));  // open, and counted
  EXPECT_EQ(hub_->watchers(), 1);
  auto second = Watch(After(0), "alice");
  EXPECT_TRUE(Read(*second, 1).empty());
  EXPECT_EQ(second->Finish().error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Another principal has a cap of its own.
  EXPECT_EQ(Read(*Watch(After(0), "bob"), 1), (Events{"1:g-1"}));
}

TEST_F(WatchHubTest, ShutdownEndsStreamsWithUnavailableAndRefusesNewOnes) {
  Publish("g-1", "a");
  auto stream = Watch(After(0));
  ASSERT_EQ(Read(*stream, 1), (Events{"1:g-1"}));
  hub_->Shutdown();
  EXPECT_TRUE(Read(*stream, 1).empty());  // at most a last bookmark
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  auto late = Watch(After(0));
  EXPECT_TRUE(Read(*late, 1).empty());
  EXPECT_EQ(late->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  // A stream leaves the count when the server sees it done, which may come
  // a moment after the client's Finish returned: wait for it, boundedly.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (hub_->watchers() > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(hub_->watchers(), 0);
}

TEST_F(WatchHubTest, BatchStreamsCarryTheSameEventsInOrder) {
  for (int i = 1; i <= 3; ++i) Publish("g-" + std::to_string(i), "a");
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
  auto reader = stub_->WatchGangBatches(&context, After(0));
  Events events;
  v1::GangEventBatch batch;
  // Bounded: at most one message per event, and the deadline.
  for (int i = 0; i < 3 && events.size() < 3 && reader->Read(&batch); ++i) {
    EXPECT_GT(batch.events_size(), 0);
    for (const v1::GangEvent& event : batch.events()) {
      if (event.type() == v1::EVENT_TYPE_BOOKMARK) continue;
      events.push_back(std::to_string(event.revision()) + ":" +
                       event.gang().id());
    }
  }
  EXPECT_EQ(events, (Events{"1:g-1", "2:g-2", "3:g-3"}));
  context.TryCancel();
  (void)reader->Finish();
}

}  // namespace
}  // namespace phalanx::server
