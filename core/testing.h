// Test-only helpers for core tests, owned by the tests that include them:
// builders for fleets, queues, gang specs and a preemption config in one line
// each, the start of the virtual clock (kT0), and SchedulerFixture, a gtest
// fixture holding one Scheduler driven by Submit / Get / Cycle on that clock.
// Nothing here is thread-safe; each test owns its fixture.
#ifndef PHALANX_CORE_TESTING_H_
#define PHALANX_CORE_TESTING_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "core/model.h"
#include "core/scheduler.h"
#include "gtest/gtest.h"

namespace phalanx::core::testing {

// Where every core test's virtual clock starts.
inline const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

// Nodes "n-<block><rack><node>" labelled block "b<i>" and rack "r<i>-<j>".
inline std::vector<Node> MakeNodes(int blocks, int racks_per_block,
                                   int nodes_per_rack, int gpus = 8,
                                   const std::string& model = "H100") {
  std::vector<Node> nodes;
  for (int b = 0; b < blocks; ++b) {
    for (int r = 0; r < racks_per_block; ++r) {
      for (int n = 0; n < nodes_per_rack; ++n) {
        Node node;
        node.spec.id = NodeId(absl::StrFormat("%s-%d%d%02d", model, b, r, n));
        node.spec.gpu_model = model;
        node.spec.gpu_count = gpus;
        node.spec.labels = {{"block", absl::StrFormat("b%d", b)},
                            {"rack", absl::StrFormat("r%d-%d", b, r)}};
        nodes.push_back(std::move(node));
      }
    }
  }
  return nodes;
}

// A fluent GangSpec builder: Spec("q").Pods(4, 8).Required("rack").Build().
class Spec {
 public:
  explicit Spec(const std::string& queue) { spec_.queue = QueueName(queue); }
  // Adds a pod set of `count` pods with `gpus` GPUs each.
  Spec& Pods(int count, int gpus, const std::string& name = "") {
    PodSetSpec set;
    set.name =
        name.empty() ? absl::StrFormat("set-%d", spec_.pod_sets.size()) : name;
    set.count = count;
    set.gpus = gpus;
    spec_.pod_sets.push_back(std::move(set));
    return *this;
  }
  Spec& Required(const std::string& level) {
    spec_.pod_sets.back().topology = {TopologyMode::kRequired, level};
    return *this;
  }
  Spec& Preferred(const std::string& level) {
    spec_.pod_sets.back().topology = {TopologyMode::kPreferred, level};
    return *this;
  }
  // Cuts the last pod set into slices of `size` pods, each in one `level`.
  Spec& Slices(int size, const std::string& level) {
    spec_.pod_sets.back().slice = {size, level};
    return *this;
  }
  // Ties the last pod set to the others of `group` (one shared domain).
  Spec& Group(const std::string& group) {
    spec_.pod_sets.back().group = group;
    return *this;
  }
  Spec& Models(std::vector<std::string> models) {
    spec_.pod_sets.back().gpu_models = std::move(models);
    return *this;
  }
  // Makes the last pod set elastic down to `min_count` pods.
  Spec& Elastic(int min_count) {
    spec_.pod_sets.back().min_count = min_count;
    return *this;
  }
  Spec& Priority(int priority) {
    spec_.priority = priority;
    return *this;
  }
  Spec& RequestId(const std::string& id) {
    spec_.request_id = id;
    return *this;
  }
  GangSpec Build() const { return spec_; }
  operator GangSpec() const { return spec_; }  // NOLINT: builder

 private:
  GangSpec spec_;
};

// `spec` with `estimate` as its estimated_runtime.
inline GangSpec WithEstimate(GangSpec spec, absl::Duration estimate) {
  spec.estimated_runtime = estimate;
  return spec;
}

// Preemption on (grace period 5 min, victims must have run 10 min) and no
// reservations, so a preemptor's only way in is its victims' GPUs.
inline Config PreemptionConfig() {
  Config config;
  config.reservation.depth = 0;
  config.preemption.enabled = true;
  config.preemption.grace_period = absl::Minutes(5);
  config.preemption.min_runtime = absl::Minutes(10);
  return config;
}

// A queue `name` of `weight` under `parent` ("" for none), with a nominal
// quota of `nominal` H100 GPUs (none when negative).
inline Queue MakeQueue(const std::string& name, int64_t nominal = -1,
                       const std::string& parent = "", double weight = 1.0) {
  Queue queue;
  queue.name = QueueName(name);
  queue.parent = QueueName(parent);
  queue.weight = weight;
  if (nominal >= 0) queue.nominal_gpus = {{"H100", nominal}};
  return queue;
}

// A gtest fixture of one Scheduler on a virtual clock starting at kT0. Init
// builds it; every command runs at now_.
class SchedulerFixture : public ::testing::Test {
 protected:
  // Builds the scheduler from `config`, adds `nodes` (heard from at now_)
  // and puts `queues`; a failure fails the test.
  void Init(const Config& config, std::vector<Node> nodes,
            const std::vector<Queue>& queues) {
    scheduler_ = std::make_unique<Scheduler>(config);
    ASSERT_TRUE(scheduler_->UpsertNodes(std::move(nodes), now_).ok());
    for (const Queue& queue : queues) {
      ASSERT_TRUE(scheduler_->PutQueue(queue).ok());
    }
  }
  // Submits `spec` at now_ and expects it accepted. Returns the gang as
  // submitted (its id names it), or nullptr after a refusal.
  GangPtr Submit(const GangSpec& spec) {
    auto result = scheduler_->Submit(spec, now_);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? result->gang : nullptr;
  }
  // Returns the current version of `gang` (nullptr once it is gone).
  GangPtr Get(const GangPtr& gang) const { return Get(gang->id); }
  GangPtr Get(const GangId& id) const { return scheduler_->FindGang(id); }
  GangState StateOf(const GangPtr& gang) const { return Get(gang)->state; }
  // The pending group `gang` is filed in, or null when it is not pending.
  const PendingGroup* GroupOf(const GangPtr& gang) const {
    for (const auto& [key, group] : scheduler_->pending().groups()) {
      for (const PendingKey& member : group.members) {
        if (member.id == gang->id) return &group;
      }
    }
    return nullptr;
  }
  // Moves the clock `step` on and runs one cycle.
  void Cycle(absl::Duration step = absl::Seconds(1)) {
    scheduler_->RunCycle(now_ += step);
  }
  // Sets the clock to `when` and runs one cycle.
  void CycleAt(absl::Time when) {
    now_ = when;
    scheduler_->RunCycle(now_);
  }

  std::unique_ptr<Scheduler> scheduler_;
  absl::Time now_ = kT0;
};

}  // namespace phalanx::core::testing

#endif  // PHALANX_CORE_TESTING_H_
