// HealthTracker: turns the node agent's health checks into what it
// reports. A failure is reported at once; a return to health only after
// `passes_to_recover` passing checks in a row — for the node as a whole
// and for each GPU alike — so a flapping check does not flap the node.
// The report stays the same, text included, while nothing changes, so
// repeating it changes nothing on the daemon. Not thread-safe.
#ifndef PHALANX_CLIENTS_NODE_AGENT_HEALTH_TRACKER_H_
#define PHALANX_CLIENTS_NODE_AGENT_HEALTH_TRACKER_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "clients/node_agent/health_check.h"

namespace phalanx::node_agent {

// The longest reason reported (the daemon's default limit is 1024 bytes).
inline constexpr size_t kMaxReasonBytes = 1000;

// What the agent reports (Fleet.ReportNodeHealth).
struct HealthReport {
  bool healthy = true;
  std::vector<int> unhealthy_gpus;  // ascending
  std::string reason;
  bool operator==(const HealthReport&) const = default;
};

class HealthTracker {
 public:
  // `passes_to_recover` >= 1.
  explicit HealthTracker(int passes_to_recover);

  // Takes one check's result; returns the report to send now.
  HealthReport Observe(const CheckResult& result);

 private:
  // A failure still being reported: its reason and the passing checks
  // seen since it was last seen failing.
  struct Failure {
    std::string reason;
    int passes = 0;
  };

  // Counts a pass for `failure`; returns whether it has recovered.
  bool Passed(Failure& failure) const;
  HealthReport Current() const;

  const int passes_to_recover_;
  std::optional<Failure> node_;
  std::map<int, Failure> gpus_;  // by GPU index
};

}  // namespace phalanx::node_agent

#endif  // PHALANX_CLIENTS_NODE_AGENT_HEALTH_TRACKER_H_
