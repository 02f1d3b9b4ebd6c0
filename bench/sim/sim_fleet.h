// SimFleet: the nodes a replay runs on and the shape figures that turn a
// trace job into a gang (pod size, rack and block sizes). Built from flags
// (a regular tree of blocks, racks and nodes) or read from a fleet file in
// the daemon's --fleet format. Plain values; thread-compatible.
#ifndef PHALANX_BENCH_SIM_SIM_FLEET_H_
#define PHALANX_BENCH_SIM_SIM_FLEET_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/model.h"

namespace phalanx::bench {

struct SimFleet {
  std::vector<core::Node> nodes;
  std::vector<std::string> levels;  // topology levels, widest first
  int gpus_per_node = 0;            // G: the pod size of multi-node jobs
  int nodes_per_rack = 0;           // the largest rack, in nodes; 0 = no racks
  int nodes_per_block = 0;          // the largest block; 0 = no blocks
  std::string source;               // "flags" or the fleet file's path

  // Total GPUs over all nodes.
  int64_t TotalGpus() const;
  // GPUs per model over all nodes, sorted by model.
  std::vector<std::pair<std::string, int64_t>> GpusByModel() const;
};

struct FleetOptions {
  int nodes = 256;
  int gpus_per_node = 8;
  int nodes_per_rack = 16;
  int racks_per_block = 4;
  std::string gpu_model = "H100";
};

// Nodes "n0000".. labelled block "b00".. and rack "r000..", filled in order
// (the last rack and block may be partial); levels ["block", "rack"].
// InvalidArgument for a non-positive count or more than 64 GPUs a node.
absl::StatusOr<SimFleet> MakeFleet(const FleetOptions& options);

// Parses the proto3 JSON of phalanx.v1.UpsertNodesRequest ({"nodes": [...]};
// lowerCamel or original field names). Levels: "block" and "rack", each kept
// when every node labels it. InvalidArgument naming the field when malformed.
absl::StatusOr<SimFleet> ParseFleetJson(absl::string_view text);

// Reads and parses a fleet file; NotFound when it cannot be read.
absl::StatusOr<SimFleet> ReadFleetFile(const std::string& path);

}  // namespace phalanx::bench

#endif  // PHALANX_BENCH_SIM_SIM_FLEET_H_
