// Builders for core tests: fleets and gang specs in one line each. Test-only.
#ifndef PHALANX_CORE_TESTING_H_
#define PHALANX_CORE_TESTING_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/model.h"

namespace phalanx::core::testing {

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

}  // namespace phalanx::core::testing

#endif  // PHALANX_CORE_TESTING_H_
