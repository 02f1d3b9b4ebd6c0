#include "server/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "core/fleet_report.h"
#include "server/watch_hub.h"
#include "storage/sync/mutex.h"

namespace phalanx::server {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

const char* CodeName(grpc::StatusCode code) {
  static constexpr const char* kNames[] = {"OK",
                                           "CANCELLED",
                                           "UNKNOWN",
                                           "INVALID_ARGUMENT",
                                           "DEADLINE_EXCEEDED",
                                           "NOT_FOUND",
                                           "ALREADY_EXISTS",
                                           "PERMISSION_DENIED",
                                           "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION",
                                           "ABORTED",
                                           "OUT_OF_RANGE",
                                           "UNIMPLEMENTED",
                                           "INTERNAL",
                                           "UNAVAILABLE",
                                           "DATA_LOSS",
                                           "UNAUTHENTICATED"};
  const int index = static_cast<int>(code);
  return index >= 0 && index < 17 ? kNames[index] : "UNKNOWN";
}

Histogram::BucketBoundaries LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
          0.025,  0.05,    0.1,    0.25,  0.5,    1,     2.5};
}

Histogram::BucketBoundaries WaitBuckets() {
  return {1, 10, 60, 300, 900, 1800, 3600, 7200, 14400, 43200, 86400, 259200};
}

// Times one server call and reports it at PRE_SEND_STATUS.
class RpcInterceptor : public grpc::experimental::Interceptor {
 public:
  RpcInterceptor(Metrics* metrics, const char* method)
      : metrics_(metrics), method_(method), start_(absl::Now()) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      metrics_->ObserveRpc(method_, methods->GetSendStatus().error_code(),
                           absl::Now() - start_);
    }
    methods->Proceed();
  }

 private:
  Metrics* metrics_;
  const char* method_;  // a registered method's name, or "unknown"
  absl::Time start_;
};

class RpcInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcInterceptorFactory(Metrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    // Never a label value from the caller: an unknown method name would
    // make a new time series per name.
    const char* method = info->method();
    return new RpcInterceptor(metrics_,
                              IsKnownMethod(method) ? method : "unknown");
  }

 private:
  Metrics* metrics_;
};

}  // namespace

Metrics::Metrics(const std::string& listen, const WatchHub* hub)
    : registry_(std::make_shared<prometheus::Registry>()),
      exposer_(std::make_unique<prometheus::Exposer>(listen)),
      listen_host_(listen.substr(0, listen.rfind(':'))),
      hub_(hub),
      gangs_(BuildGauge()
                 .Name("phalanx_gangs")
                 .Help("Gangs by queue and state")
                 .Register(*registry_)),
      gpus_(BuildGauge()
                .Name("phalanx_gpus")
                .Help("GPUs by state (allocated, free, unavailable, "
                      "unhealthy) and model")
                .Register(*registry_)),
      queue_gpus_(BuildGauge()
                      .Name("phalanx_queue_held_gpus")
                      .Help("GPUs held by a queue's gangs, by model")
                      .Register(*registry_)),
      admission_wait_(BuildHistogram()
                          .Name("phalanx_admission_wait_seconds")
                          .Help("Submit (or requeue) to admission, by queue")
                          .Register(*registry_)),
      events_(BuildCounter()
                  .Name("phalanx_events_total")
                  .Help("Gang events by type")
                  .Register(*registry_)),
      vacated_gangs_(BuildCounter()
                         .Name("phalanx_node_failure_gangs_total")
                         .Help("Gangs moved off failed or drained nodes, by "
                               "outcome (repaired, evicted) and cause "
                               "(unhealthy, drain_deadline, unhealthy_gpu)")
                         .Register(*registry_)),
      rpc_latency_(BuildHistogram()
                       .Name("phalanx_rpc_seconds")
                       .Help("RPC latency by method and status code")
                       .Register(*registry_)),
      fragmentation_(BuildGauge()
                         .Name("phalanx_fragmentation")
                         .Help("node: free GPUs on partly used nodes / all "
                               "free; <level>: free whole nodes outside the "
                               "best domain / all free whole nodes")
                         .Register(*registry_)),
      queue_figures_(BuildGauge()
                         .Name("phalanx_queue")
                         .Help("Per queue: figure=fair_share_score, "
                               "decayed_usage_gpus, borrowed_gpus, "
                               "nominal_gpus (by model)")
                         .Register(*registry_)),
      pending_reasons_(BuildGauge()
                           .Name("phalanx_pending_gangs_by_reason")
                           .Help("Pending gangs by reason code (NO_FIT, "
                                 "QUOTA, RESERVED, RESERVED_FOR, ...)")
                           .Register(*registry_)),
      reservations_(BuildGauge()
                        .Name("phalanx_reservations")
                        .Help("Domains reserved for waiting gangs")
                        .Register(*registry_)
                        .Add({})),
      cycle_seconds_(BuildHistogram()
                         .Name("phalanx_cycle_seconds")
                         .Help("Admission cycle duration")
                         .Register(*registry_)
                         .Add({}, LatencyBuckets())),
      commit_seconds_(BuildHistogram()
                          .Name("phalanx_storage_commit_seconds")
                          .Help("Durable commit of one loop batch")
                          .Register(*registry_)
                          .Add({}, LatencyBuckets())),
      batch_commands_(
          BuildHistogram()
              .Name("phalanx_storage_batch_commands")
              .Help("Commands per committed batch")
              .Register(*registry_)
              .Add({}, Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64, 128,
                                                   256})),
      watchers_(BuildGauge()
                    .Name("phalanx_watchers")
                    .Help("Open WatchGangs streams")
                    .Register(*registry_)
                    .Add({})),
      revision_(BuildGauge()
                    .Name("phalanx_revision")
                    .Help("Revision of the last committed event")
                    .Register(*registry_)
                    .Add({})),
      auth_denied_(BuildCounter()
                       .Name("phalanx_auth_denied_total")
                       .Help("Refused calls by method and reason "
                             "(unauthenticated, role, queue, node_state, "
                             "rate)")
                       .Register(*registry_)),
      rate_limited_(BuildCounter()
                        .Name("phalanx_rate_limited_total")
                        .Help("Calls refused for a principal's request rate")
                        .Register(*registry_)
                        .Add({})),
      certificate_expiry_(
          BuildGauge()
              .Name("phalanx_tls_certificate_expiry_timestamp_seconds")
              .Help("notAfter of the serving TLS certificate (Unix seconds; "
                    "0 without TLS)")
              .Register(*registry_)
              .Add({})),
      audit_dropped_(BuildGauge()
                         .Name("phalanx_audit_dropped")
                         .Help("Audit records dropped by the per-principal "
                               "bound since start")
                         .Register(*registry_)
                         .Add({})),
      wal_syncs_(BuildCounter()
                     .Name("phalanx_storage_wal_syncs_total")
                     .Help("fsyncs of the RocksDB write-ahead log since start "
                           "(one per committed batch; concurrent writers "
                           "share one)")
                     .Register(*registry_)
                     .Add({})),
      writes_refused_(BuildGauge()
                          .Name("phalanx_storage_writes_refused")
                          .Help("Whether the store refuses writes: 1 while "
                                "its disk is full (calls fail UNAVAILABLE, the "
                                "refused batch is retried), else 0")
                          .Register(*registry_)
                          .Add({})),
      leader_(BuildGauge()
                  .Name("phalanx_leader")
                  .Help("1 while this replica leads (always, without HA), "
                        "0 while it follows")
                  .Register(*registry_)
                  .Add({})),
      leader_term_(BuildGauge()
                       .Name("phalanx_leader_term")
                       .Help("HA mode: the term this replica leads in (the "
                             "etcd create revision of the leader key); 0 "
                             "while following")
                       .Register(*registry_)
                       .Add({})),
      follower_applied_seq_(
          BuildGauge()
              .Name("phalanx_follower_applied_seq")
              .Help("HA mode: the last replicated log entry applied here")
              .Register(*registry_)
              .Add({})),
      follower_lag_entries_(
          BuildGauge()
              .Name("phalanx_follower_lag_entries")
              .Help("HA mode: log entries seen but not applied yet (0 on "
                    "the leader)")
              .Register(*registry_)
              .Add({})) {
  leader_.Set(1);
  BuildGauge()
      .Name("phalanx_build_info")
      .Help("Always 1; labels say which build runs")
      .Register(*registry_)
      .Add({{"version", PHALANX_VERSION}, {"commit", PHALANX_COMMIT}})
      .Set(1);
  // Every known label set starts at 0, so rate() sees the first increment.
  for (int type = 0; type <= static_cast<int>(core::EventType::kResized);
       ++type) {
    event_counters_.push_back(&events_.Add(
        {{"type", core::EventTypeName(static_cast<core::EventType>(type))}}));
  }
  for (const char* outcome : {"repaired", "evicted"}) {
    for (const char* cause : {"unhealthy", "drain_deadline", "unhealthy_gpu"}) {
      vacated_gangs_.Add({{"outcome", outcome}, {"cause", cause}});
    }
  }
  exposer_->RegisterCollectable(registry_);
}

Metrics::~Metrics() = default;

int Metrics::port() const {
  if (exposer_ == nullptr) return 0;
  std::vector<int> ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

void Metrics::StopServing() {
  if (exposer_ == nullptr) return;
  // civetweb's threads notice the stop only when their poll of the listening
  // socket times out (measured here: 0.9 s of a 1 s SIGTERM) or a
  // connection arrives; so connections are made until it has stopped.
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port()));
  const std::string host =
      listen_host_.empty() || listen_host_ == "0.0.0.0" || listen_host_ == "*"
          ? "127.0.0.1"
          : listen_host_;
  const bool can_wake =
      inet_pton(AF_INET, host.c_str(), &address.sin_addr) == 1;
  std::atomic<bool> stopped{false};
  std::thread stopper([this, &stopped] {
    exposer_.reset();
    stopped = true;
  });
  // Bounded: 200 wake-ups 5 ms apart, then the stopper is only waited for.
  for (int i = 0; can_wake && i < 200 && !stopped; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
      (void)connect(fd, reinterpret_cast<const sockaddr*>(&address),
                    sizeof(address));
      close(fd);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stopper.join();
}

void Metrics::ObserveRpc(const char* method, grpc::StatusCode code,
                         absl::Duration latency) {
  RpcLatency(method, code).Observe(absl::ToDoubleSeconds(latency));
}

// The family's Add builds a label map and hashes it: done once per
// (method, code); later calls find the histogram by the method's name.
Histogram& Metrics::RpcLatency(const char* method, grpc::StatusCode code) {
  const int index = static_cast<int>(code);
  const size_t slot = static_cast<size_t>(
      index >= 0 && index < kRpcCodes - 1 ? index : kRpcCodes - 1);
  const absl::string_view name(method);
  {
    ReaderMutexLock lock(&rpc_mu_);
    if (auto it = rpc_histograms_.find(name);
        it != rpc_histograms_.end() && it->second[slot] != nullptr) {
      return *it->second[slot];
    }
  }
  Histogram& histogram = rpc_latency_.Add(
      {{"method", method}, {"code", CodeName(code)}}, LatencyBuckets());
  MutexLock lock(&rpc_mu_);
  rpc_histograms_[name][slot] = &histogram;
  return histogram;
}

void Metrics::OnDenied(const RpcMethod& method, absl::string_view reason) {
  auth_denied_.Add({{"method", method.name}, {"reason", std::string(reason)}})
      .Increment();
  if (reason == "rate") rate_limited_.Increment();
}

void Metrics::SetCertificateExpiry(absl::Time not_after) {
  certificate_expiry_.Set(static_cast<double>(absl::ToUnixSeconds(not_after)));
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
Metrics::InterceptorFactory() {
  return std::make_unique<RpcInterceptorFactory>(this);
}

void Metrics::CountVacatedGangs(const core::Scheduler& scheduler) {
  for (const auto& [key, count] : scheduler.vacate_counts()) {
    int64_t& reported = reported_vacates_[key];
    if (count == reported) continue;
    vacated_gangs_.Add({{"outcome", key.first}, {"cause", key.second}})
        .Increment(static_cast<double>(count - reported));
    reported = count;
  }
}

void Metrics::OnApplied(const core::Mutation&, const core::Scheduler& scheduler,
                        absl::Duration cycle, int) {
  if (cycle > absl::ZeroDuration()) {
    cycle_seconds_.Observe(absl::ToDoubleSeconds(cycle));
  }
  CountVacatedGangs(scheduler);
  revision_.Set(static_cast<double>(scheduler.revision()));
  refresh_after_commit_ = &scheduler;
}

void Metrics::OnIdleCycle(const core::Scheduler& scheduler) {
  revision_.Set(static_cast<double>(scheduler.revision()));
  MaybeRefreshGauges(scheduler);
}

// Gauges scan the fleet: at most once a second, after a batch or on an
// idle timer cycle (so they do not stay stale once the commands stop).
void Metrics::MaybeRefreshGauges(const core::Scheduler& scheduler) {
  if (hub_ != nullptr) watchers_.Set(hub_->watchers());
  if (audit_dropped_source_) {
    audit_dropped_.Set(static_cast<double>(audit_dropped_source_()));
  }
  const absl::Time now = absl::Now();
  if (now - last_refresh_ < absl::Seconds(1)) return;
  last_refresh_ = now;
  RefreshGauges(scheduler);
}

void Metrics::OnDurable(const core::Mutation& mutation, absl::Duration commit,
                        int commands) {
  if (!mutation.empty()) {
    commit_seconds_.Observe(absl::ToDoubleSeconds(commit));
    batch_commands_.Observe(commands);
  }
  if (applied_seq_source_) SetReplication(applied_seq_source_(), 0);
  if (wal_syncs_source_) {
    const uint64_t syncs = wal_syncs_source_();
    if (syncs > reported_wal_syncs_) {
      wal_syncs_.Increment(static_cast<double>(syncs - reported_wal_syncs_));
      reported_wal_syncs_ = syncs;
    }
  }
  for (const core::Event& event : mutation.events) {
    event_counters_[static_cast<size_t>(event.type)]->Increment();
    if (event.type == core::EventType::kAdmitted && event.gang->admit_time) {
      const absl::Duration wait =
          *event.gang->admit_time - event.gang->submit_time;
      admission_wait_
          .Add({{"queue", event.gang->spec.queue.value()}}, WaitBuckets())
          .Observe(absl::ToDoubleSeconds(wait));
    }
  }
  if (refresh_after_commit_ != nullptr) {
    MaybeRefreshGauges(*refresh_after_commit_);
    refresh_after_commit_ = nullptr;
  }
}

void Metrics::RefreshGauges(const core::Scheduler& scheduler) {
  std::set<std::pair<core::QueueName, core::GangState>> present;
  for (const auto& [key, count] : scheduler.gang_counts()) {
    gangs_
        .Add({{"queue", key.first.value()},
              {"state", core::GangStateName(key.second)}})
        .Set(static_cast<double>(count));
    present.insert(key);
  }
  for (const auto& key : reported_gang_counts_) {
    if (present.contains(key)) continue;
    gangs_
        .Add({{"queue", key.first.value()},
              {"state", core::GangStateName(key.second)}})
        .Set(0);
  }
  reported_gang_counts_.insert(present.begin(), present.end());
  const core::FleetReport report = core::DescribeFleet(scheduler.fleet());
  for (const auto& [model, counts] : report.gpus_by_model) {
    gpus_.Add({{"state", "allocated"}, {"model", model}}).Set(counts.allocated);
    gpus_.Add({{"state", "free"}, {"model", model}}).Set(counts.free);
    gpus_.Add({{"state", "unavailable"}, {"model", model}})
        .Set(counts.unavailable);
    gpus_.Add({{"state", "unhealthy"}, {"model", model}}).Set(counts.unhealthy);
  }
  fragmentation_.Add({{"level", "node"}}).Set(report.node_fragmentation);
  for (const core::LevelFragmentation& level : report.levels) {
    fragmentation_.Add({{"level", level.level}})
        .Set(level.stranded_whole_node_fraction);
  }
  reservations_.Set(static_cast<double>(scheduler.reservations().size()));
  RefreshQueues(scheduler);
  RefreshPendingReasons(scheduler);
}

// Counts pending gangs by reason code (docs/reasons.md); a code once
// reported and now unused reads 0.
void Metrics::RefreshPendingReasons(const core::Scheduler& scheduler) {
  std::array<int, core::kReasonCodeCount> counts{};
  for (const auto& [id, gang] : scheduler.gangs()) {
    if (gang->state != core::GangState::kPending) continue;
    const int code = static_cast<int>(gang->reason_code);
    if (code >= 0 && code < core::kReasonCodeCount) ++counts[code];
  }
  for (int code = 0; code < core::kReasonCodeCount; ++code) {
    const std::string name =
        core::ReasonCodeName(static_cast<core::ReasonCode>(code));
    if (counts[code] == 0 && !reported_reasons_.contains(name)) continue;
    pending_reasons_.Add({{"reason", name}}).Set(counts[code]);
    reported_reasons_.insert(name);
  }
}

void Metrics::RefreshQueues(const core::Scheduler& scheduler) {
  for (const auto& [name, queue] : scheduler.queues()) {
    const std::string& q = name.value();
    for (const auto& [model, gpus] : scheduler.Usage(name).held_gpus) {
      queue_gpus_.Add({{"queue", q}, {"model", model}}).Set(gpus);
    }
    for (const auto& [model, gpus] : queue.nominal_gpus) {
      queue_figures_
          .Add({{"queue", q}, {"figure", "nominal_gpus"}, {"model", model}})
          .Set(gpus);
    }
    queue_figures_.Add({{"queue", q}, {"figure", "borrowed_gpus"}})
        .Set(scheduler.quotas().BorrowedGpus(name));
    queue_figures_.Add({{"queue", q}, {"figure", "fair_share_score"}})
        .Set(scheduler.quotas().Score(name).value);
    queue_figures_.Add({{"queue", q}, {"figure", "decayed_usage_gpus"}})
        .Set(scheduler.quotas().ledger().DecayedUsage(name));
  }
}

}  // namespace phalanx::server
