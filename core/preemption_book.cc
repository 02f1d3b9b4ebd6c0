#include "core/preemption_book.h"

#include "absl/strings/str_cat.h"

namespace phalanx::core {

void PreemptionBook::AddVictim(const GangId& victim, const GangId& preemptor,
                               absl::Time deadline) {
  preemptor_of_[victim] = Preemption{preemptor, deadline};
}

const PreemptionBook::Preemption* PreemptionBook::VictimOf(
    const GangId& victim) const {
  auto it = preemptor_of_.find(victim);
  return it == preemptor_of_.end() ? nullptr : &it->second;
}

std::string PreemptionBook::RequeuedReason(const GangId& victim) const {
  const Preemption* preemption = VictimOf(victim);
  if (preemption == nullptr || preemption->preemptor.empty()) {
    return "REQUEUED: preempted";
  }
  return absl::StrCat("REQUEUED: preempted by ", preemption->preemptor.value());
}

void PreemptionBook::Hold(const GangId& preemptor, const NodeId& node) {
  held_for_[preemptor].insert(node);
  held_slots_.clear();
  ++hold_changes_;
}

bool PreemptionBook::DropHolds(const GangId& preemptor) {
  if (held_for_.erase(preemptor) == 0) return false;
  held_slots_.clear();
  ++hold_changes_;
  return true;
}

std::vector<GangId> PreemptionBook::ReadyPreemptors() const {
  std::set<GangId> waiting;
  for (const auto& [victim, preemption] : preemptor_of_) {
    waiting.insert(preemption.preemptor);
  }
  std::vector<GangId> ready;
  for (const auto& [preemptor, nodes] : held_for_) {
    if (!waiting.contains(preemptor)) ready.push_back(preemptor);
  }
  return ready;
}

bool PreemptionBook::HeldForOther(int slot, const GangId& gang,
                                  const Fleet& fleet) const {
  if (held_for_.empty()) return false;
  if (held_slots_.size() != fleet.slots().size()) {
    held_slots_.assign(fleet.slots().size(), {});
    for (const auto& [preemptor, nodes] : held_for_) {
      for (const NodeId& node : nodes) {
        const int held = fleet.Find(node);
        if (held >= 0) held_slots_[held].push_back(preemptor);
      }
    }
  }
  for (const GangId& preemptor : held_slots_[slot]) {
    if (preemptor != gang) return true;
  }
  return false;
}

std::vector<int> PreemptionBook::HeldSlots(const Fleet& fleet) const {
  std::vector<int> slots;
  for (const auto& [preemptor, nodes] : held_for_) {
    for (const NodeId& node : nodes) {
      if (const int slot = fleet.Find(node); slot >= 0) slots.push_back(slot);
    }
  }
  return slots;
}

bool PreemptionBook::TakeWakeup(absl::Time now) {
  if (now < wakeup_) return false;
  wakeup_ = absl::InfiniteFuture();
  return true;
}

}  // namespace phalanx::core
