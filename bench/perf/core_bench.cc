// Google Benchmark suites for core/ (docs/design.md §11): admission throughput
// from an empty fleet, sustained admissions in a steady churn, the cycle where
// nothing changed, placement per shape, and the fair-share ledger.
//
// `--quick` (ours, removed before Google Benchmark sees the flags) runs fewer
// iterations and sizes; every other flag goes to Google Benchmark.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "bench/perf/workload.h"
#include "core/fair_share.h"
#include "core/placement.h"
#include "core/scheduler.h"

namespace phalanx::perf {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// With PHALANX_PERF_CTL naming the control FIFO of
// `perf record|stat -D -1 --control=fifo:FIFO`, the churn and unchanged-cycle
// suites switch perf on for their timed loops only (not the set-up).
void PerfControl(const char* command) {
  const char* fifo = std::getenv("PHALANX_PERF_CTL");
  if (fifo == nullptr) return;
  if (FILE* f = std::fopen(fifo, "w")) {
    std::fprintf(f, "%s\n", command);
    std::fclose(f);
  }
}

// Gangs admitted by `mutation`, appended to `active`.
int CollectAdmitted(const core::Mutation& mutation,
                    std::vector<core::GangId>* active) {
  int admitted = 0;
  for (const core::Event& event : mutation.events) {
    if (event.type != core::EventType::kAdmitted) continue;
    ++admitted;
    if (active != nullptr) active->push_back(event.gang->id);
  }
  return admitted;
}

// One cycle on a fresh copy: how fast the pending gangs fill an empty fleet.
void BM_AdmitIntoEmptyFleet(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int pending = static_cast<int>(state.range(1));
  int64_t admitted = 0;
  for (auto _ : state) {
    // A fresh scheduler each time (Scheduler has no copy contract).
    state.PauseTiming();
    auto scheduler = MakeScheduler(nodes, pending, /*seed=*/42);
    state.ResumeTiming();
    scheduler->RunCycle(BenchStart() + absl::Seconds(1));
    admitted += CollectAdmitted(scheduler->TakeMutation(), nullptr);
    state.PauseTiming();
    scheduler.reset();
    state.ResumeTiming();
  }
  state.counters["gangs_per_s"] = benchmark::Counter(
      static_cast<double>(admitted), benchmark::Counter::kIsRate);
  state.counters["admitted_per_cycle"] =
      static_cast<double>(admitted) / static_cast<double>(state.iterations());
}

// Steady churn: each step completes `completions` random active gangs,
// submits as many gangs as the last step admitted (pending stays constant),
// runs a cycle and takes the mutation — the scheduler thread's whole work per
// batch, minus I/O. The fleet is filled once before timing starts.
void BM_SteadyChurn(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int pending = static_cast<int>(state.range(1));
  const int completions = static_cast<int>(state.range(2));
  auto scheduler = MakeScheduler(nodes, pending, /*seed=*/42);
  GangMix mix(/*seed=*/7);
  std::vector<core::GangId> active;
  absl::Time now = BenchStart() + absl::Seconds(1);
  scheduler->RunCycle(now);
  // Refill what the fill admitted, so timing starts at `pending` pending.
  SubmitMany(*scheduler, mix,
             CollectAdmitted(scheduler->TakeMutation(), &active), now);
  scheduler->TakeMutation();
  int refill = 0;
  int64_t admitted = 0;
  int64_t written = 0;
  double cycle_seconds = 0;
  PerfControl("enable");
  for (auto _ : state) {
    now += absl::Milliseconds(100);
    CompleteRandom(*scheduler, active, mix, completions, now);
    SubmitMany(*scheduler, mix, refill, now);
    const Clock::time_point cycle_start = Clock::now();
    scheduler->RunCycle(now);
    core::Mutation mutation = scheduler->TakeMutation();
    cycle_seconds += SecondsSince(cycle_start);
    written += static_cast<int64_t>(mutation.gangs_put.size());
    refill = CollectAdmitted(mutation, &active);
    admitted += refill;
  }
  PerfControl("disable");
  state.counters["gangs_per_s"] = benchmark::Counter(
      static_cast<double>(admitted), benchmark::Counter::kIsRate);
  state.counters["cycle_only_gangs_per_s"] =
      cycle_seconds > 0 ? static_cast<double>(admitted) / cycle_seconds : 0;
  state.counters["admitted_per_step"] =
      static_cast<double>(admitted) / static_cast<double>(state.iterations());
  state.counters["gangs_written_per_step"] =
      static_cast<double>(written) / static_cast<double>(state.iterations());
  int64_t pending_now = 0;
  for (const auto& [id, gang] : scheduler->gangs()) {
    pending_now += gang->state == core::GangState::kPending ? 1 : 0;
  }
  state.counters["pending_at_end"] = static_cast<double>(pending_now);
  state.counters["active_at_end"] = static_cast<double>(active.size());
}

// A full plan from scratch (core/plan.h): the fleet filled, the pending
// gangs behind it walked in admission order up to planning.max_gangs, on a
// scheduler that never made a plan (set up outside the timing).
void BM_FullPlan(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int pending = static_cast<int>(state.range(1));
  const absl::Time now = BenchStart() + absl::Seconds(1);
  std::unique_ptr<core::Scheduler> scheduler;
  for (auto _ : state) {
    state.PauseTiming();
    scheduler = MakeScheduler(nodes, pending, /*seed=*/42);
    scheduler->RunCycle(now);
    scheduler->TakeMutation();
    state.ResumeTiming();
    scheduler->UpdatePlan(now);
  }
  state.counters["planned"] = scheduler->plan().size();
}

// The plan made again when due with nothing changed: each gang first tries
// its previous start and nodes (Plan::KeepPrevious).
void BM_Replan(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int pending = static_cast<int>(state.range(1));
  auto scheduler = MakeScheduler(nodes, pending, /*seed=*/42);
  absl::Time now = BenchStart() + absl::Seconds(1);
  scheduler->RunCycle(now);
  scheduler->TakeMutation();
  scheduler->UpdatePlan(now);
  for (auto _ : state) {
    now += scheduler->config().planning.interval;  // due again
    scheduler->UpdatePlan(now);
  }
  state.counters["planned"] = scheduler->plan().size();
}

// A cycle on the timer with nothing changed since the last one (the clock
// moves one cycle_interval, 1 s).
void BM_UnchangedCycle(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int pending = static_cast<int>(state.range(1));
  auto scheduler = MakeScheduler(nodes, pending, /*seed=*/42);
  absl::Time now = BenchStart() + absl::Seconds(1);
  scheduler->RunCycle(now);
  scheduler->TakeMutation();
  int64_t admitted = 0;
  PerfControl("enable");
  for (auto _ : state) {
    now += absl::Seconds(1);
    scheduler->RunCycle(now);
    admitted += CollectAdmitted(scheduler->TakeMutation(), nullptr);
  }
  PerfControl("disable");
  state.counters["admitted_total"] = static_cast<double>(admitted);
}

// A 10k-node fleet about half allocated, for placement.
core::Fleet& HalfFullFleet() {
  static core::Fleet* fleet = [] {
    auto scheduler = MakeScheduler(10'000, 0, /*seed=*/42);
    GangMix mix(11);
    int64_t gpus = 0;
    while (gpus < 10'000 * kGpusPerNode / 2) {
      core::GangSpec spec = mix.Next();
      gpus += spec.TotalGpus();
      (void)scheduler->Submit(std::move(spec), BenchStart());
    }
    scheduler->RunCycle(BenchStart() + absl::Seconds(1));
    return new core::Fleet(scheduler->fleet());
  }();
  return *fleet;
}

// PlaceGang for one shape of the mix on a half-full 10k-node fleet.
void BM_PlaceShape(benchmark::State& state) {
  const Shape& shape = ShapeMix()[state.range(0)];
  state.SetLabel(shape.name);
  core::Fleet& fleet = HalfFullFleet();
  const core::GangSpec spec = SpecOf(shape, "team-0", 0);
  int64_t placed = 0;
  for (auto _ : state) {
    core::PlacementResult result = core::PlaceGang(spec, fleet);
    placed += result.placed ? 1 : 0;
    benchmark::DoNotOptimize(result);
  }
  state.counters["placed_fraction"] =
      static_cast<double>(placed) / static_cast<double>(state.iterations());
}

// One ledger update (Accrue) and one score, as admission does per gang.
void BM_FairShareLedgerUpdate(benchmark::State& state) {
  core::FairShareLedger ledger;
  std::vector<core::QueueName> queues;
  for (int i = 0; i < kTeams; ++i) {
    queues.push_back(core::QueueName(absl::StrFormat("team-%d", i)));
  }
  const core::HeldGpus held = {{"H100", 4096}, {"H200", 512}};
  absl::Time now = BenchStart();
  size_t i = 0;
  for (auto _ : state) {
    now += absl::Seconds(1);
    const core::QueueName& queue = queues[i++ % queues.size()];
    ledger.Accrue(queue, held, now);
    benchmark::DoNotOptimize(ledger.Score(queue, 1.0, held));
  }
}

void RegisterAll(bool quick) {
  const std::vector<int> node_counts = {1'000, 10'000};
  const std::vector<int> pending_counts = {1'000, 10'000, 100'000};
  for (int nodes : node_counts) {
    for (int pending : pending_counts) {
      if (quick && (pending != 100'000 || nodes != 10'000)) continue;
      benchmark::RegisterBenchmark(
          absl::StrFormat("BM_AdmitIntoEmptyFleet/nodes:%d/pending:%d", nodes,
                          pending)
              .c_str(),
          BM_AdmitIntoEmptyFleet)
          ->Args({nodes, pending})
          ->Iterations(quick ? 1 : 3)
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (int completions : {32, 256}) {
    if (quick && completions != 256) continue;
    benchmark::RegisterBenchmark(
        absl::StrFormat("BM_SteadyChurn/nodes:10000/pending:100000/"
                        "completions:%d",
                        completions)
            .c_str(),
        BM_SteadyChurn)
        ->Args({10'000, 100'000, completions})
        ->Iterations(quick ? 20 : 100)
        ->Unit(benchmark::kMicrosecond);
  }
  using Bench = void (*)(benchmark::State&);
  for (auto [name, bench] :
       {std::pair<const char*, Bench>{"BM_FullPlan", BM_FullPlan},
        std::pair<const char*, Bench>{"BM_Replan", BM_Replan}}) {
    benchmark::RegisterBenchmark(
        absl::StrFormat("%s/nodes:10000/pending:100000", name).c_str(), bench)
        ->Args({10'000, 100'000})
        ->Iterations(quick ? 1 : 5)
        ->Unit(benchmark::kMillisecond);
  }
  for (int pending : pending_counts) {
    if (quick && pending != 100'000) continue;
    benchmark::RegisterBenchmark(
        absl::StrFormat("BM_UnchangedCycle/nodes:10000/pending:%d", pending)
            .c_str(),
        BM_UnchangedCycle)
        ->Args({10'000, pending})
        ->Iterations(1'000)  // ~50 ms: cheap in both modes
        ->Unit(benchmark::kMicrosecond);
  }
  for (size_t s = 0; s < ShapeMix().size(); ++s) {
    benchmark::RegisterBenchmark(
        absl::StrFormat("BM_PlaceShape/%s", ShapeMix()[s].name).c_str(),
        BM_PlaceShape)
        ->Arg(static_cast<int64_t>(s))
        ->MinTime(quick ? 0.05 : 0.5)
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("BM_FairShareLedgerUpdate",
                               BM_FairShareLedgerUpdate)
      ->MinTime(quick ? 0.05 : 0.5);
}

}  // namespace
}  // namespace phalanx::perf

int main(int argc, char** argv) {
  bool quick = false;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  phalanx::perf::RegisterAll(quick);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
