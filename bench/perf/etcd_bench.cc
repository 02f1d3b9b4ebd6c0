// phalanx-etcd-bench: fenced etcd transactions against a real 3-member etcd
// cluster on loopback (tests/etcd_cluster.h), the HA mode's commit path
// (docs/ha.md). Two phases, each bounded in time:
//   txn:    W writer threads, each appending its own key with the leader
//           fence (compare PREFIX/leader create_revision == term) — raw
//           fenced Txn/s and latency at each concurrency;
//   commit: one EtcdStateStore::Commit after another of a small batch (one
//           submitted gang), as the scheduler loop does — Commit/s;
//   snapshot: the state of --snapshot_gangs gangs (pending, with their
//           request records and events) written as a snapshot to etcd —
//           chunks, bytes, seconds, etcd's db size — and loaded by an empty
//           replica (seconds): the proof that 100k gangs fit etcd's limits;
//           and Commit latency without and with snapshots of that state
//           running in the background.
// Prints one line per phase and concurrency.
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/json.h"
#include "bench/stats.h"
#include "core/scheduler.h"
#include "core/testing.h"
#include "storage/etcd/etcd_state_store.h"
#include "tests/etcd_cluster.h"

ABSL_FLAG(std::string, writers, "1,8", "Concurrencies of the txn phase");
ABSL_FLAG(double, seconds, 5, "Seconds per measured phase");
ABSL_FLAG(int, snapshot_gangs, 100000,
          "Gangs in the snapshot phase (0 = skip it)");

namespace phalanx::perf {
namespace {

namespace etcd = ::phalanx::storage::etcd;
namespace epb = ::etcdserverpb;
constexpr char kPrefix[] = "/phalanx/bench";

int64_t PutLeader(etcd::EtcdClient& client) {
  epb::PutRequest put;
  put.set_key(std::string(kPrefix) + "/leader");
  put.set_value("bench 127.0.0.1:1");
  return client.Put(put)->header().revision();
}

// One writer: fenced appends of its own keys until `stop`.
void Writer(etcd::EtcdClient& client, int64_t term, int id,
            const std::atomic<bool>& stop, std::vector<double>& latencies_us) {
  const std::string value(512, 'x');  // about a small batch's size
  for (int64_t n = 0; !stop.load() && n < 10'000'000; ++n) {
    epb::TxnRequest txn;
    epb::Compare* fence = txn.add_compare();
    fence->set_key(std::string(kPrefix) + "/leader");
    fence->set_target(epb::Compare::CREATE);
    fence->set_result(epb::Compare::EQUAL);
    fence->set_create_revision(term);
    epb::PutRequest* put = txn.add_success()->mutable_request_put();
    put->set_key(absl::StrFormat("%s/w/%d/%d", kPrefix, id, n));
    put->set_value(value);
    const absl::Time start = absl::Now();
    auto response = client.Txn(txn);
    if (!response.ok() || !response->succeeded()) {
      std::fprintf(stderr, "txn failed: %s\n",
                   response.status().ToString().c_str());
      return;
    }
    latencies_us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
  }
}

void TxnPhase(etcd::EtcdClient& client, int64_t term, int writers,
              absl::Duration length) {
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> latencies(writers);
  std::vector<std::thread> threads;
  const absl::Time start = absl::Now();
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back(
        [&, w] { Writer(client, term, w, stop, latencies[w]); });
  }
  absl::SleepFor(length);
  stop = true;
  for (std::thread& thread : threads) thread.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::vector<double> all;
  for (const auto& each : latencies)
    all.insert(all.end(), each.begin(), each.end());
  std::printf("txn writers=%d txn_per_s=%.0f p50_us=%.0f p99_us=%.0f\n",
              writers, all.size() / seconds, bench::Percentile(all, 50),
              bench::Percentile(all, 99));
}

void CommitPhase(etcd::EtcdClient& client, int64_t term, const std::string& dir,
                 absl::Duration length) {
  auto local = storage::RocksDbStore::Open(dir);
  etcd::EtcdStateStoreOptions options;
  options.prefix = kPrefix;
  etcd::EtcdStateStore store(&client, std::move(*local), options);
  store.set_term(term);
  core::Scheduler s(core::Config{});
  (void)s.UpsertNodes(core::testing::MakeNodes(1, 2, 4));
  core::Queue queue;
  queue.name = core::QueueName("q");
  (void)s.PutQueue(queue);
  (void)store.Commit(s.TakeMutation());
  std::vector<double> latencies;
  const absl::Time start = absl::Now();
  while (absl::Now() - start < length && latencies.size() < 10'000'000) {
    (void)s.Submit(core::testing::Spec("q").Pods(1, 1), absl::Now());
    const core::Mutation m = s.TakeMutation();
    const absl::Time t = absl::Now();
    if (absl::Status st = store.Commit(m); !st.ok()) {
      std::fprintf(stderr, "commit failed: %s\n", st.ToString().c_str());
      return;
    }
    latencies.push_back(absl::ToDoubleMicroseconds(absl::Now() - t));
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf("commit writers=1 commit_per_s=%.0f p50_us=%.0f p99_us=%.0f\n",
              latencies.size() / seconds, bench::Percentile(latencies, 50),
              bench::Percentile(latencies, 99));
}

void SnapshotPhase(etcd::EtcdClient& client, const std::string& root,
                   int gangs) {
  const std::string prefix = std::string(kPrefix) + "-snapshot";
  epb::PutRequest leader;
  leader.set_key(prefix + "/leader");
  leader.set_value("bench 127.0.0.1:1");
  const int64_t term = client.Put(leader)->header().revision();
  core::Config config;
  config.limits.max_pending_gangs_per_queue = gangs + 100'000;
  core::Scheduler s(config);
  (void)s.UpsertNodes(core::testing::MakeNodes(2, 4, 8));
  core::Queue queue;
  queue.name = core::QueueName("q");
  (void)s.PutQueue(queue);
  const absl::Time t0 = absl::FromUnixSeconds(1'700'000'000);
  for (int i = 0; i < gangs; ++i) {
    (void)s.Submit(core::testing::Spec("q").Pods(1, 8).RequestId(
                       absl::StrFormat("req-%d", i)),
                   t0);
  }
  s.RunCycle(t0 + absl::Seconds(1));  // 64 admitted, the rest pending
  {
    auto local = storage::RocksDbStore::Open(root + "/snapshot-leader");
    if (!local.ok() || !(*local)->ApplyLogBatch(s.TakeMutation(), 1).ok()) {
      std::fprintf(stderr, "snapshot: cannot build the leader's state\n");
      return;
    }
  }
  etcd::EtcdStateStoreOptions options;
  options.prefix = prefix;
  options.replica_id = "leader";
  absl::StatusOr<etcd::SnapshotInfo> info;
  std::vector<double> quiet_us;
  // Commits of one submitted gang each for `length`; latencies in µs.
  auto commit_for = [&](etcd::EtcdStateStore& store, absl::Duration length) {
    std::vector<double> latencies;
    const absl::Time start = absl::Now();
    while (absl::Now() - start < length && latencies.size() < 1'000'000) {
      (void)s.Submit(core::testing::Spec("q").Pods(1, 8), t0);
      const core::Mutation m = s.TakeMutation();
      const absl::Time t = absl::Now();
      if (absl::Status st = store.Commit(m); !st.ok()) {
        std::fprintf(stderr, "commit failed: %s\n", st.ToString().c_str());
        break;
      }
      latencies.push_back(absl::ToDoubleMicroseconds(absl::Now() - t));
    }
    return latencies;
  };
  {
    etcd::EtcdStateStore store(
        &client,
        std::move(*storage::RocksDbStore::Open(root + "/snapshot-leader")),
        options);
    store.set_term(term);
    info = store.TakeSnapshot();
    if (!info.ok()) {
      std::fprintf(stderr, "snapshot failed: %s\n",
                   info.status().ToString().c_str());
      return;
    }
    // The state was built locally as entry 1: the log's head says so.
    epb::PutRequest head;
    head.set_key(store.HeadKey());
    head.set_value("1");
    (void)client.Put(head);
    quiet_us = commit_for(store, absl::Seconds(2));
  }
  auto status = client.MemberStatus();
  etcd::EtcdStateStoreOptions fresh_options = options;
  fresh_options.replica_id = "fresh";
  etcd::EtcdStateStore fresh(
      &client,
      std::move(*storage::RocksDbStore::Open(root + "/snapshot-fresh")),
      fresh_options);
  const absl::Time load_start = absl::Now();
  absl::StatusOr<core::LoadedState> state = fresh.LoadAll();
  const double load_s = absl::ToDoubleSeconds(absl::Now() - load_start);
  if (!state.ok()) {
    std::fprintf(stderr, "snapshot load failed: %s\n",
                 state.status().ToString().c_str());
    return;
  }
  // The same commits while snapshots of this state run in the background,
  // back to back (one is due after every commit).
  std::vector<double> busy_us;
  {
    etcd::EtcdStateStoreOptions busy = options;
    busy.snapshot_every_entries = 1;
    etcd::EtcdStateStore store(
        &client,
        std::move(*storage::RocksDbStore::Open(root + "/snapshot-leader")),
        busy);
    store.set_term(term);
    busy_us = commit_for(store, absl::Seconds(4));
    (void)store.WaitForSnapshot();
  }
  std::printf(
      "snapshot gangs=%d chunks=%d bytes=%lld max_chunk_bytes=%zu "
      "write_s=%.2f load_s=%.2f loaded_gangs=%zu etcd_db_bytes=%lld "
      "commit_p50_us=%.0f commit_p99_us=%.0f "
      "commit_during_snapshots_p50_us=%.0f commit_during_snapshots_p99_us=%.0f "
      "commit_during_snapshots_max_us=%.0f\n",
      gangs, info->chunks, static_cast<long long>(info->bytes),
      options.snapshot_chunk_bytes, absl::ToDoubleSeconds(info->took), load_s,
      state->gangs.size(),
      static_cast<long long>(status.ok() ? status->dbsize() : -1),
      bench::Percentile(quiet_us, 50), bench::Percentile(quiet_us, 99),
      bench::Percentile(busy_us, 50), bench::Percentile(busy_us, 99),
      bench::Percentile(busy_us, 100));
}

int Main() {
  testing::EtcdCluster cluster(3);
  if (!cluster.Start()) {
    std::fprintf(stderr, "etcd did not start:\n%s\n", cluster.logs().c_str());
    return 1;
  }
  etcd::EtcdClientOptions options;
  options.endpoints = cluster.endpoints();
  auto client = etcd::EtcdClient::Connect(options);
  if (!client.ok()) return 1;
  const int64_t term = PutLeader(**client);
  const absl::Duration length = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  for (absl::string_view w :
       absl::StrSplit(absl::GetFlag(FLAGS_writers), ',')) {
    int writers = 0;
    if (absl::SimpleAtoi(w, &writers) && writers > 0) {
      TxnPhase(**client, term, writers, length);
    }
  }
  CommitPhase(**client, term, cluster.root() + "/replica", length);
  if (absl::GetFlag(FLAGS_snapshot_gangs) > 0) {
    SnapshotPhase(**client, cluster.root(),
                  absl::GetFlag(FLAGS_snapshot_gangs));
  }
  return 0;
}

}  // namespace
}  // namespace phalanx::perf

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return phalanx::perf::Main();
}
