#include "core/node_vacator.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/check.h"
#include "core/repair.h"

namespace phalanx::core {
namespace {

const char* CauseName(NodeVacator::Cause cause) {
  switch (cause) {
    case NodeVacator::Cause::kUnhealthy:
      return "unhealthy";
    case NodeVacator::Cause::kDrainDeadline:
      return "drain_deadline";
    case NodeVacator::Cause::kUnhealthyGpu:
      return "unhealthy_gpu";
  }
  return "unhealthy";
}

// Why a gang's pods had to leave `node`, for its eviction reason.
const char* LeaveReason(NodeVacator::Cause cause) {
  switch (cause) {
    case NodeVacator::Cause::kUnhealthy:
      return " is unhealthy";
    case NodeVacator::Cause::kDrainDeadline:
      return " passed its drain deadline";
    case NodeVacator::Cause::kUnhealthyGpu:
      return " has an unhealthy GPU";
  }
  return " is unhealthy";
}

// Which slots' pods must move: `slots` and every UNHEALTHY node.
std::vector<char> VacateMask(const Fleet& fleet,
                             const std::vector<int>& slots) {
  std::vector<char> vacate(fleet.slots().size());
  for (size_t i = 0; i < vacate.size(); ++i) {
    vacate[i] = fleet.slots()[i].node.state == NodeState::kUnhealthy;
  }
  for (int slot : slots) vacate[slot] = true;
  return vacate;
}

// The gangs with pods on `slots`, each once with the first such node it is
// on; highest priority first (it has the first pick of the free capacity),
// then by id.
std::vector<std::pair<GangId, NodeId>> GangsOn(const Fleet& fleet,
                                               const GangTable& gangs,
                                               const std::vector<int>& slots) {
  std::vector<std::tuple<int, GangId, NodeId>> found;
  for (int slot : slots) {
    for (const Fleet::GangPods& on : fleet.slots()[slot].gang_pods) {
      const Gang& gang = *gangs.At(on.gang);
      found.emplace_back(-gang.spec.priority, gang.id,
                         fleet.slots()[slot].node.spec.id);
    }
  }
  std::sort(found.begin(), found.end());
  std::vector<std::pair<GangId, NodeId>> out;
  for (const auto& [priority, id, node] : found) {
    if (out.empty() || out.back().first != id) out.emplace_back(id, node);
  }
  return out;
}

}  // namespace

void NodeVacator::Vacate(const std::vector<int>& slots, Cause cause) {
  MoveGangs(GangsOn(s_.fleet_, s_.gangs_, slots), VacateMask(s_.fleet_, slots),
            cause);
}

void NodeVacator::VacateUnhealthyGpus(int slot) {
  const std::vector<char> vacate = VacateMask(s_.fleet_, {});
  std::vector<std::pair<GangId, NodeId>> hit;
  for (const auto& [id, node] : GangsOn(s_.fleet_, s_.gangs_, {slot})) {
    const std::vector<PodPlacement>& pods = s_.gangs_.At(id)->placement;
    if (std::any_of(pods.begin(), pods.end(), [&](const PodPlacement& pod) {
          return PodMustMove(s_.fleet_, vacate, pod);
        })) {
      hit.emplace_back(id, node);
    }
  }
  MoveGangs(hit, vacate, Cause::kUnhealthyGpu);
}

void NodeVacator::MoveGangs(const std::vector<std::pair<GangId, NodeId>>& gangs,
                            const std::vector<char>& vacate, Cause cause) {
  for (const auto& [id, node] : gangs) {
    const GangPtr gang = s_.gangs_.At(id);
    const absl::Status repair =
        gang->state == GangState::kPreempting
            ? absl::FailedPreconditionError("it is being preempted")
            : TryRepair(gang, vacate);
    ++s_.vacate_counts_[{repair.ok() ? "repaired" : "evicted",
                         CauseName(cause)}];
    if (repair.ok()) continue;
    Gang evicted = *gang;
    s_.ReleaseCapacity(evicted, now_);
    evicted.state = GangState::kPending;
    evicted.reason_code = ReasonCode::kEvicted;
    evicted.reason =
        absl::StrCat("EVICTED: node ", node.value(), LeaveReason(cause),
                     "; not repaired: ", repair.message());
    s_.Transition(std::move(evicted), EventType::kEvicted, now_);
  }
}

absl::Status NodeVacator::TryRepair(const GangPtr& current,
                                    const std::vector<char>& vacate) {
  Fleet& fleet = s_.fleet_;
  RepairOptions options;
  options.vacate = vacate;
  options.allowed = RepairTargets(*current);
  options.first_fit = s_.config_.placement.first_fit;
  std::vector<PodPlacement> moved;
  for (const PodPlacement& pod : current->placement) {
    if (PodMustMove(fleet, vacate, pod)) moved.push_back(pod);
  }
  options.model_gate = RepairQuotaGate(*current, moved);
  RepairResult plan = PlanRepair(*current, fleet, options);
  if (!plan.repaired) return absl::FailedPreconditionError(plan.reason);
  if (plan.moved_pods == 0) return absl::OkStatus();
  Gang gang = *current;
  s_.quotas_.Accrue(gang.spec.queue, now_);
  s_.quotas_.Charge(gang, fleet, -1);
  const GangHandle handle = s_.gangs_.HandleOf(gang.id);
  fleet.Release(gang, handle, gang.placement);
  gang.placement = std::move(plan.placement);
  PHALANX_CHECK(fleet.Allocate(gang, handle, gang.placement).ok());
  s_.quotas_.Charge(gang, fleet, +1);
  s_.Transition(std::move(gang), EventType::kRepaired, now_);
  return absl::OkStatus();
}

std::vector<char> NodeVacator::RepairTargets(const Gang& gang) const {
  const Fleet& fleet = s_.fleet_;
  std::vector<char> allowed(fleet.slots().size(), 1);
  for (size_t slot = 0; slot < allowed.size(); ++slot) {
    if (s_.preemptions_.HeldForOther(static_cast<int>(slot), gang.id, fleet)) {
      allowed[slot] = 0;
    }
  }
  // A reservation's nodes only for a gang expected to end before it starts.
  for (const Reservation& reservation : s_.reservations_.all()) {
    if (gang.spec.estimated_runtime > absl::ZeroDuration() &&
        ExpectedEnd(gang, now_) <= reservation.start) {
      continue;
    }
    for (int slot : ReservationBook::SlotsOf(reservation, fleet)) {
      allowed[slot] = 0;
    }
  }
  return allowed;
}

ModelGate NodeVacator::RepairQuotaGate(
    const Gang& gang, const std::vector<PodPlacement>& moved) const {
  const Fleet& fleet = s_.fleet_;
  std::map<std::string, int64_t> freed;
  for (const PodPlacement& pod : moved) {
    const std::string& model =
        fleet.slots()[fleet.Find(pod.node)].node.spec.gpu_model;
    freed[model] += static_cast<int64_t>(pod.gpu_indices.size());
  }
  const Queue& queue = s_.quotas_.queues().at(gang.spec.queue);
  const QuotaBook& quotas = s_.quotas_;
  return [&quotas, &queue, freed = std::move(freed)](const std::string& model,
                                                     int64_t gpus) {
    auto it = freed.find(model);
    const int64_t grow = gpus - (it == freed.end() ? 0 : it->second);
    return grow <= 0 ? std::string() : quotas.QuotaReason(queue, model, grow);
  };
}

}  // namespace phalanx::core
