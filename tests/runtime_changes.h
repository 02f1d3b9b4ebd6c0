// Changes an operator makes at run time over the API — queue "a" held and
// reweighted (a masked PutQueue), the cycle interval updated (a masked
// UpdateConfig), node "node-000" cordoned (SetNodeState) — and a read of
// those fields, for the suites that check that restarts and failovers keep
// them (startup_files_test.cc, ha_test.cc). Expects the demo files of
// tests/daemon.h. Not thread-safe.
#ifndef PHALANX_TESTS_RUNTIME_CHANGES_H_
#define PHALANX_TESTS_RUNTIME_CHANGES_H_

#include <cstdint>
#include <ostream>

#include "phalanx/v1/types.pb.h"
#include "tests/daemon.h"

namespace phalanx::testing {

// The fields the run-time changes touch, as a daemon reports them.
struct OperatorFields {
  double queue_a_weight = 0;
  bool queue_a_held = false;
  int64_t cycle_interval_ms = 0;
  v1::NodeState node_000_state = v1::NODE_STATE_UNSPECIFIED;
  bool operator==(const OperatorFields&) const = default;
};
std::ostream& operator<<(std::ostream& out, const OperatorFields& fields);

// The demo files' values: weight 1, not held, 200 ms, READY.
OperatorFields FileFields();
// The values ChangeAtRunTime sets: weight 7, held, 300 ms, CORDONED.
OperatorFields ChangedFields();

// Makes the three changes on `daemon` (which must lead); expects each call
// to succeed.
void ChangeAtRunTime(const DaemonProcess& daemon);
// Reads the fields from `daemon`; expects each call to succeed.
OperatorFields ReadOperatorFields(const DaemonProcess& daemon);

}  // namespace phalanx::testing

#endif  // PHALANX_TESTS_RUNTIME_CHANGES_H_
