// DescribeFleet: free capacity and fragmentation per topology domain and
// level, and GPUs by state and model (docs/design.md §6 "Fragmentation"). Used
// by GetTopology, the metrics and the simulator. Pure function; O(nodes).
#ifndef PHALANX_CORE_FLEET_REPORT_H_
#define PHALANX_CORE_FLEET_REPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/fleet.h"

namespace phalanx::core {

struct DomainReport {
  std::string path;
  std::string level;
  int nodes = 0;
  int64_t gpus_total = 0;
  int64_t gpus_free = 0;     // on READY nodes
  int free_whole_nodes = 0;  // READY nodes with every GPU free
};

struct LevelFragmentation {
  std::string level;
  int largest_free_whole_nodes = 0;         // in the best domain of the level
  double stranded_whole_node_fraction = 0;  // outside it ÷ all free whole
};

// GPUs of one model by state.
struct GpuCounts {
  int64_t allocated = 0;
  int64_t free = 0;         // on READY nodes
  int64_t unavailable = 0;  // free but on CORDONED or DRAINING nodes
  // On UNHEALTHY nodes (allocated or not), and GPUs reported unhealthy on
  // other nodes.
  int64_t unhealthy = 0;
};

struct FleetReport {
  std::vector<DomainReport> domains;  // parents before children, root omitted
  std::vector<LevelFragmentation> levels;
  double node_fragmentation = 0;  // free GPUs on partly used READY nodes ÷ all
  std::map<std::string, GpuCounts> gpus_by_model;
};

FleetReport DescribeFleet(const Fleet& fleet);

}  // namespace phalanx::core

#endif  // PHALANX_CORE_FLEET_REPORT_H_
