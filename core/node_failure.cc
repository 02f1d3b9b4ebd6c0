// Node failure and drain deadlines (docs/design.md §3, §6): gangs leave a node that
// failed, or a draining node whose deadline passed, by repair in place when
// their topology constraints allow (only their pods on that node move), else
// by eviction and requeue in their old place in line.
#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/check.h"
#include "core/repair.h"
#include "core/scheduler.h"

namespace phalanx::core {
namespace {

const char* CauseName(bool drain_deadline) {
  return drain_deadline ? "drain_deadline" : "unhealthy";
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
std::vector<std::pair<GangId, NodeId>> GangsOn(
    const Fleet& fleet, const absl::flat_hash_map<GangId, GangPtr>& gangs,
    const std::vector<int>& slots) {
  std::vector<std::tuple<int, GangId, NodeId>> found;
  for (int slot : slots) {
    for (const auto& [id, pods] : fleet.slots()[slot].gang_pods) {
      found.emplace_back(-gangs.at(id)->spec.priority, id,
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

void Scheduler::MarkNode(int slot, NodeState state, absl::string_view reason,
                         std::optional<absl::Time> drain_deadline) {
  Node node = fleet_.slots()[slot].node;
  node.state = state;
  node.state_reason = std::string(reason);
  node.drain_deadline = drain_deadline;
  if (drain_deadline) drain_timers_.insert({*drain_deadline, node.spec.id});
  dirty_nodes_.insert(node.spec.id);
  fleet_.Upsert({std::move(node)});
}

void Scheduler::ExpireDrains(absl::Time now) {
  std::vector<int> due;
  while (!drain_timers_.empty() && drain_timers_.begin()->first <= now) {
    const auto [when, id] = *drain_timers_.begin();
    drain_timers_.erase(drain_timers_.begin());
    // Timers are not removed when a node changes: check it still applies.
    const int slot = fleet_.Find(id);
    if (slot < 0) continue;
    const Node& node = fleet_.slots()[slot].node;
    if (node.state == NodeState::kDraining && node.drain_deadline == when) {
      due.push_back(slot);
    }
  }
  if (!due.empty()) VacateNodes(due, VacateCause::kDrainDeadline, now);
}

void Scheduler::VacateNodes(const std::vector<int>& slots, VacateCause cause,
                            absl::Time now) {
  const bool drained = cause == VacateCause::kDrainDeadline;
  const std::vector<char> vacate = VacateMask(fleet_, slots);
  for (const auto& [id, node] : GangsOn(fleet_, gangs_, slots)) {
    const GangPtr gang = gangs_.at(id);
    const absl::Status repair =
        gang->state == GangState::kPreempting
            ? absl::FailedPreconditionError("it is being preempted")
            : TryRepair(gang, vacate, now);
    ++vacate_counts_[{repair.ok() ? "repaired" : "evicted",
                      CauseName(drained)}];
    if (repair.ok()) continue;
    Gang evicted = *gang;
    ReleaseCapacity(evicted, now);
    evicted.state = GangState::kPending;
    evicted.reason =
        absl::StrCat("EVICTED: node ", node.value(),
                     drained ? " passed its drain deadline" : " is unhealthy",
                     "; not repaired: ", repair.message());
    Transition(std::move(evicted), EventType::kEvicted, now);
  }
}

absl::Status Scheduler::TryRepair(const GangPtr& current,
                                  const std::vector<char>& vacate,
                                  absl::Time now) {
  RepairOptions options;
  options.vacate = vacate;
  options.allowed = RepairTargets(*current, now);
  options.first_fit = config_.placement.first_fit;
  std::vector<PodPlacement> moved;
  for (const PodPlacement& pod : current->placement) {
    if (vacate[fleet_.Find(pod.node)]) moved.push_back(pod);
  }
  options.model_gate = RepairQuotaGate(*current, moved);
  RepairResult plan = PlanRepair(*current, fleet_, options);
  if (!plan.repaired) return absl::FailedPreconditionError(plan.reason);
  if (plan.moved_pods == 0) return absl::OkStatus();
  Gang gang = *current;
  ledger_.Accrue(gang.spec.queue, Held(gang.spec.queue), now);
  Charge(gang, -1);
  fleet_.Release(gang, gang.placement);
  gang.placement = std::move(plan.placement);
  PHALANX_CHECK(fleet_.Allocate(gang, gang.placement).ok());
  Charge(gang, +1);
  Transition(std::move(gang), EventType::kRepaired, now);
  return absl::OkStatus();
}

std::vector<char> Scheduler::RepairTargets(const Gang& gang,
                                           absl::Time now) const {
  std::vector<char> allowed(fleet_.slots().size(), 1);
  for (size_t slot = 0; slot < allowed.size(); ++slot) {
    if (HeldForOther(static_cast<int>(slot), gang.id)) allowed[slot] = 0;
  }
  // A reservation's nodes only for a gang expected to end before it starts.
  for (const Reservation& reservation : reservations_) {
    if (gang.spec.estimated_runtime > absl::ZeroDuration() &&
        ExpectedEnd(gang, now) <= reservation.start) {
      continue;
    }
    for (int slot : ReservedSlots(reservation)) allowed[slot] = 0;
  }
  return allowed;
}

ModelGate Scheduler::RepairQuotaGate(
    const Gang& gang, const std::vector<PodPlacement>& moved) const {
  std::map<std::string, int64_t> freed;
  for (const PodPlacement& pod : moved) {
    const std::string& model =
        fleet_.slots()[fleet_.Find(pod.node)].node.spec.gpu_model;
    freed[model] += static_cast<int64_t>(pod.gpu_indices.size());
  }
  const Queue& queue = queues_.at(gang.spec.queue);
  return [this, &queue, freed = std::move(freed)](const std::string& model,
                                                  int64_t gpus) {
    auto it = freed.find(model);
    const int64_t grow = gpus - (it == freed.end() ? 0 : it->second);
    return grow <= 0 ? std::string() : QuotaReason(queue, model, grow);
  };
}

}  // namespace phalanx::core
