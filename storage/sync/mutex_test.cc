// phalanx::Mutex and friends behave as the Abseil types they stand for. Under
// ThreadSanitizer (scripts/tsan.sh) each test with two threads is also the
// check that TSan sees their happens-before edges: built against plain
// absl::Mutex and absl::Notification from Debian's uninstrumented Abseil,
// every one of them reports a data race and aborts (storage/sync/README.md).
#include "storage/sync/mutex.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace phalanx {
namespace {

constexpr int kThreads = 4;
constexpr int kIncrements = 2000;
constexpr absl::Duration kTimeout = absl::Seconds(30);

TEST(MutexTest, MutexLockSerializesWriters) {
  Mutex mu;
  int counter = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements; ++i) {
        MutexLock lock(&mu);
        ++counter;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  MutexLock lock(&mu);
  EXPECT_EQ(counter, kThreads * kIncrements);
}

TEST(MutexTest, ReadersSeeWhatWritersWrote) {
  Mutex mu;
  int value = 0;
  int readers_saw_max = 0;
  std::thread writer([&] {
    for (int i = 1; i <= kIncrements; ++i) {
      WriterMutexLock lock(&mu);
      value = i;
    }
  });
  std::vector<std::thread> readers;
  Mutex max_mu;
  for (int t = 0; t < kThreads; ++t) {
    readers.emplace_back([&] {
      int seen = 0;
      for (int i = 0; i < kIncrements; ++i) {
        ReaderMutexLock lock(&mu);
        EXPECT_GE(value, seen);
        seen = value;
      }
      MutexLock lock(&max_mu);
      readers_saw_max = std::max(readers_saw_max, seen);
    });
  }
  writer.join();
  for (std::thread& reader : readers) reader.join();
  EXPECT_LE(readers_saw_max, kIncrements);
}

TEST(MutexTest, AwaitWakesOnTheConditionAnotherThreadMadeTrue) {
  Mutex mu;
  bool ready = false;
  int payload = 0;
  std::thread producer([&] {
    MutexLock lock(&mu);
    payload = 42;
    ready = true;
  });
  {
    MutexLock lock(&mu);
    mu.Await(absl::Condition(&ready));
    EXPECT_EQ(payload, 42);
  }
  producer.join();
}

TEST(MutexTest, AwaitWithDeadlineSeesTheHandOff) {
  Mutex mu;
  bool ready = false;
  int payload = 0;
  std::thread producer([&] {
    MutexLock lock(&mu);
    payload = 7;
    ready = true;
  });
  {
    MutexLock lock(&mu);
    EXPECT_TRUE(
        mu.AwaitWithDeadline(absl::Condition(&ready), absl::Now() + kTimeout));
    EXPECT_EQ(payload, 7);
  }
  producer.join();
}

TEST(MutexTest, AwaitWithTimeoutReturnsFalseWhenTheConditionNeverHolds) {
  Mutex mu;
  bool never = false;
  MutexLock lock(&mu);
  EXPECT_FALSE(
      mu.AwaitWithTimeout(absl::Condition(&never), absl::Milliseconds(20)));
}

TEST(MutexTest, AwaitWithTimeoutReturnsTrueOnceTheConditionHolds) {
  Mutex mu;
  int count = 0;
  std::thread counter([&] {
    for (int i = 0; i < kIncrements; ++i) {
      MutexLock lock(&mu);
      ++count;
    }
  });
  auto done = [&count]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return count == kIncrements;
  };
  {
    MutexLock lock(&mu);
    EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(&done), kTimeout));
  }
  counter.join();
}

TEST(NotificationTest, NotifyHappensBeforeTheWaitThatSeesIt) {
  Notification notification;
  int payload = 0;
  std::thread producer([&] {
    payload = 5;
    notification.Notify();
  });
  EXPECT_TRUE(notification.WaitForNotificationWithTimeout(kTimeout));
  EXPECT_EQ(payload, 5);
  producer.join();
}

TEST(NotificationTest, HasBeenNotifiedAcquiresWhatNotifyReleased) {
  Notification notification;
  int payload = 0;
  std::thread producer([&] {
    payload = 9;
    notification.Notify();
  });
  notification.WaitForNotification();
  EXPECT_TRUE(notification.HasBeenNotified());
  EXPECT_EQ(payload, 9);
  producer.join();
}

}  // namespace
}  // namespace phalanx
