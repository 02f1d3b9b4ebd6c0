// kill -9 while clients submit, restart, and check that nothing acknowledged
// was lost and that the store passes `phalanxd --check-store` (which
// refuses a running daemon's data dir); determinism across two fresh
// daemons.
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/store_testing.h"
#include "tests/daemon.h"

namespace phalanx::testing {
namespace {

struct Acked {
  std::string request_id;
  std::string gang_id;
};

// Submits 1-GPU gangs with request ids "<client>-<n>" until a call fails or
// `max` succeed; returns the acknowledged ones.
std::vector<Acked> SubmitUntilFailure(DaemonProcess& daemon, int client,
                                      int max) {
  auto scheduler = daemon.Scheduler();
  std::vector<Acked> acked;
  for (int n = 0; n < max; ++n) {
    const std::string request_id = absl::StrCat("c", client, "-", n);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(5));
    v1::SubmitGangResponse response;
    if (!scheduler
             ->SubmitGang(&context,
                          SubmitRequest("a", 1, 1 + n % 2, "", request_id),
                          &response)
             .ok()) {
      break;
    }
    acked.push_back({request_id, response.gang().id()});
  }
  return acked;
}

TEST(CrashTest, Kill9LosesNoAcknowledgedGangAndHoldsNoGpuTwice) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  constexpr int kClients = 4;
  std::vector<std::vector<Acked>> acked(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back(
        [&, c] { acked[c] = SubmitUntilFailure(*daemon, c, 400); });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  daemon->Kill9();
  for (std::thread& t : clients) t.join();

  ASSERT_TRUE(daemon->Start()) << daemon->output();
  auto scheduler = daemon->Scheduler();
  int total = 0;
  for (int c = 0; c < kClients; ++c) {
    for (const Acked& a : acked[c]) {
      ++total;
      grpc::ClientContext context;
      v1::GetGangRequest get;
      get.set_gang_id(a.gang_id);
      v1::GetGangResponse got;
      ASSERT_TRUE(scheduler->GetGang(&context, get, &got).ok()) << a.gang_id;
      grpc::ClientContext again_context;
      v1::SubmitGangResponse again;
      const int n = std::stoi(a.request_id.substr(a.request_id.find('-') + 1));
      ASSERT_TRUE(
          scheduler
              ->SubmitGang(&again_context,
                           SubmitRequest("a", 1, 1 + n % 2, "", a.request_id),
                           &again)
              .ok());
      EXPECT_FALSE(again.created());
      EXPECT_EQ(again.gang().id(), a.gang_id);
    }
  }
  EXPECT_GT(total, 0);

  // Every GPU a gang holds is held once, and nodes agree with placements.
  auto fleet = daemon->Fleet();
  EXPECT_EQ(GpuHoldingProblems(*scheduler, *fleet), std::vector<std::string>{});

  // Killed again mid-load, the store passes its own check
  // (`phalanxd --check-store`); damaged, it fails it, naming the record.
  clients.clear();
  clients.emplace_back([&] { SubmitUntilFailure(*daemon, kClients, 400); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  daemon->Kill9();
  clients[0].join();
  const DaemonProcess::CheckedStore checked = daemon->CheckStore();
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  EXPECT_NE(checked.output.find("the store is consistent"), std::string::npos)
      << checked.output;
  ASSERT_TRUE(storage::testing::WriteRawRecord(daemon->data_dir(), "ledger",
                                               "gone", std::string())
                  .ok());
  const DaemonProcess::CheckedStore damaged = daemon->CheckStore();
  EXPECT_EQ(damaged.exit_code, 1) << damaged.output;
  EXPECT_NE(
      damaged.output.find("DATA_LOSS: --check-store: " + daemon->data_dir() +
                          ": ledger/\"gone\": no queue of this name "
                          "is in the store"),
      std::string::npos)
      << damaged.output;
}

// `phalanxd --check-store` on a running daemon's data dir exits 1 saying it
// is in use, twice (the first refusal left the daemon's lock in place), and
// the daemon still commits; once the daemon stopped, the check passes.
TEST(CheckStoreTest, RefusesARunningDaemonsDataDir) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  for (int attempt = 0; attempt < 2; ++attempt) {
    const DaemonProcess::CheckedStore refused = daemon->CheckStore();
    EXPECT_EQ(refused.exit_code, 1) << refused.output;
    EXPECT_NE(refused.output.find(
                  "FAILED_PRECONDITION: --check-store: " + daemon->data_dir() +
                  ": in use by a running phalanxd"),
              std::string::npos)
        << refused.output;
  }
  EXPECT_EQ(SubmitUntilFailure(*daemon, 0, 1).size(), 1u);
  EXPECT_EQ(daemon->Terminate(), 0);
  const DaemonProcess::CheckedStore checked = daemon->CheckStore();
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
}

// Runs the same commands on a fresh daemon; returns id -> placement text.
std::map<std::string, std::string> RunScript() {
  auto daemon = StartDemoDaemon();
  EXPECT_TRUE(daemon->Start()) << daemon->output();
  auto scheduler = daemon->Scheduler();
  for (int i = 0; i < 24; ++i) {
    grpc::ClientContext context;
    v1::SubmitGangResponse response;
    const char* level = i % 3 == 0 ? "rack" : i % 3 == 1 ? "block" : "";
    scheduler->SubmitGang(
        &context,
        SubmitRequest(i % 2 ? "a" : "b", 1 + i % 3, 1 << (i % 4), level),
        &response);
    if (i % 5 == 4) {
      grpc::ClientContext cancel_context;
      v1::CancelGangRequest cancel;
      cancel.set_gang_id(absl::StrCat("g-00000", i % 9 + 1));
      v1::CancelGangResponse cancelled;
      scheduler->CancelGang(&cancel_context, cancel, &cancelled);
    }
  }
  std::map<std::string, std::string> out;
  grpc::ClientContext context;
  v1::ListGangsRequest list;
  list.set_page_size(1000);
  v1::ListGangsResponse page;
  EXPECT_TRUE(scheduler->ListGangs(&context, list, &page).ok());
  for (const v1::Gang& gang : page.gangs()) {
    std::string text = absl::StrCat(gang.state(), ":");
    for (const v1::PodPlacement& pod : gang.placement()) {
      absl::StrAppend(&text, pod.node(), "[");
      for (int gpu : pod.gpu_indices()) absl::StrAppend(&text, gpu, ",");
      absl::StrAppend(&text, "]");
    }
    out[gang.id()] = text;
  }
  return out;
}

TEST(DeterminismTest, SameCommandsOnTwoFreshDaemonsGiveSamePlacements) {
  std::map<std::string, std::string> first = RunScript();
  EXPECT_EQ(first.size(), 24u);
  EXPECT_EQ(first, RunScript());
}

}  // namespace
}  // namespace phalanx::testing
