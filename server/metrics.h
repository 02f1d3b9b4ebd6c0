// Metrics: the Prometheus metrics of docs/design.md §9, served on /metrics by
// prometheus-cpp. Updated by the scheduler loop after each batch (as a
// BatchObserver) and by an RPC interceptor. Thread-safe (prometheus-cpp
// metrics are atomic; the loop is the only batch observer caller).
#ifndef PHALANX_SERVER_METRICS_H_
#define PHALANX_SERVER_METRICS_H_

#include <array>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/server_interceptor.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/gate.h"
#include "server/scheduler_loop.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {

class WatchHub;

class Metrics : public BatchObserver, public DenialCounter {
 public:
  // Serves /metrics on `listen` ("127.0.0.1:9464"; port 0 picks one).
  // `hub` may be null.
  Metrics(const std::string& listen, const WatchHub* hub);
  ~Metrics() override;

  // The port /metrics is served on (0 once stopped).
  int port() const;
  // Stops serving /metrics (joins the HTTP server's threads); idempotent.
  // The daemon calls it at shutdown so the time it takes is measured.
  void StopServing();
  // Records one finished RPC. Thread-safe.
  void ObserveRpc(const char* method, grpc::StatusCode code,
                  absl::Duration latency);
  // Counts a refused call (and, for reason "rate", a rate-limited one).
  void OnDenied(const RpcMethod& method, absl::string_view reason) override;
  // The serving certificate's notAfter (0 = no TLS).
  void SetCertificateExpiry(absl::Time not_after);
  // The audit log whose drops to export; may stay unset.
  void SetAuditDropped(std::function<int64_t()> dropped) {
    audit_dropped_source_ = std::move(dropped);
  }
  // The store's WAL fsync count (phalanx_storage_wal_syncs_total, read
  // after each durable batch); may stay unset.
  void SetWalSyncs(std::function<uint64_t()> syncs) {
    wal_syncs_source_ = std::move(syncs);
  }
  // HA mode: whether this replica leads, and its term (0 = following).
  void SetLeader(bool leading, int64_t term) {
    leader_.Set(leading ? 1 : 0);
    leader_term_.Set(static_cast<double>(term));
  }
  // HA mode: the last log seq applied here and how many seen entries are
  // not applied yet.
  void SetReplication(int64_t applied_seq, int64_t lag_entries) {
    follower_applied_seq_.Set(static_cast<double>(applied_seq));
    follower_lag_entries_.Set(static_cast<double>(lag_entries));
  }
  // HA leader: the store's applied log seq, read after each durable batch
  // into phalanx_follower_applied_seq (lag 0); may stay unset.
  void SetAppliedSeq(std::function<int64_t()> seq) {
    applied_seq_source_ = std::move(seq);
  }
  // An interceptor factory that calls ObserveRpc for every call (methods
  // this daemon does not serve are labelled "unknown").
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
  InterceptorFactory();

  void OnApplied(const core::Mutation& mutation,
                 const core::Scheduler& scheduler, absl::Duration cycle,
                 int commands) override;
  void OnDurable(const core::Mutation& mutation, absl::Duration commit,
                 int commands) override;
  void OnIdleCycle(const core::Scheduler& scheduler) override;
  // phalanx_storage_writes_refused: 1 while `cause` is not OK.
  void OnWritesRefused(const absl::Status& cause) override {
    writes_refused_.Set(cause.ok() ? 0 : 1);
  }

 private:
  void MaybeRefreshGauges(const core::Scheduler& scheduler);
  void RefreshGauges(const core::Scheduler& scheduler);
  void RefreshPendingReasons(const core::Scheduler& scheduler);
  void RefreshQueues(const core::Scheduler& scheduler);
  // Adds what the scheduler counted since the last batch to the repair and
  // eviction counters.
  void CountVacatedGangs(const core::Scheduler& scheduler);

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string listen_host_;  // of `listen`, for StopServing's wake-ups
  const WatchHub* hub_;
  absl::Time last_refresh_ = absl::InfinitePast();
  // The state after the batch being committed (loop thread only): its
  // gauges are refreshed in OnDurable, after the watch hub took the batch's
  // events, so the scan (tens of ms at 100k gangs) never delays them.
  const core::Scheduler* refresh_after_commit_ = nullptr;

  prometheus::Family<prometheus::Gauge>& gangs_;
  prometheus::Family<prometheus::Gauge>& gpus_;
  prometheus::Family<prometheus::Gauge>& queue_gpus_;
  prometheus::Family<prometheus::Histogram>& admission_wait_;
  prometheus::Family<prometheus::Counter>& events_;
  // events_'s counter of each EventType, by its value (no label lookup per
  // event).
  std::vector<prometheus::Counter*> event_counters_;
  prometheus::Family<prometheus::Counter>& vacated_gangs_;
  core::Scheduler::VacateCounts reported_vacates_;
  prometheus::Family<prometheus::Histogram>& rpc_latency_;
  // rpc_latency_'s histograms by method name and status code (the codes
  // CodeName names, then one slot for any other).
  static constexpr int kRpcCodes = 18;
  prometheus::Histogram& RpcLatency(const char* method, grpc::StatusCode code);
  Mutex rpc_mu_;
  absl::flat_hash_map<std::string,
                      std::array<prometheus::Histogram*, kRpcCodes>>
      rpc_histograms_ ABSL_GUARDED_BY(rpc_mu_);
  prometheus::Family<prometheus::Gauge>& fragmentation_;
  prometheus::Family<prometheus::Gauge>& queue_figures_;
  prometheus::Family<prometheus::Gauge>& pending_reasons_;
  // Label sets reported once: set to 0 when they disappear.
  std::set<std::string> reported_reasons_;
  std::set<std::pair<core::QueueName, core::GangState>> reported_gang_counts_;
  prometheus::Gauge& reservations_;
  prometheus::Histogram& cycle_seconds_;
  prometheus::Histogram& commit_seconds_;
  prometheus::Histogram& batch_commands_;
  prometheus::Gauge& watchers_;
  prometheus::Gauge& revision_;
  prometheus::Family<prometheus::Counter>& auth_denied_;
  prometheus::Counter& rate_limited_;
  prometheus::Gauge& certificate_expiry_;
  prometheus::Gauge& audit_dropped_;
  std::function<int64_t()> audit_dropped_source_;
  prometheus::Counter& wal_syncs_;
  std::function<uint64_t()> wal_syncs_source_;
  uint64_t reported_wal_syncs_ = 0;  // loop thread only
  prometheus::Gauge& writes_refused_;
  prometheus::Gauge& leader_;
  prometheus::Gauge& leader_term_;
  prometheus::Gauge& follower_applied_seq_;
  prometheus::Gauge& follower_lag_entries_;
  std::function<int64_t()> applied_seq_source_;
};

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_METRICS_H_
