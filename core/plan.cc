#include "core/plan.h"

namespace phalanx::core {

const char* PlanStatusName(PlanStatus status) {
  switch (status) {
    case PlanStatus::kNotPending:
      return "NOT_PENDING";
    case PlanStatus::kUnplanned:
      return "UNPLANNED";
    case PlanStatus::kPlanned:
      return "PLANNED";
    case PlanStatus::kBeyondDepth:
      return "BEYOND_DEPTH";
    case PlanStatus::kBeyondWindow:
      return "BEYOND_WINDOW";
    case PlanStatus::kNeverFits:
      return "NEVER_FITS";
  }
  return "UNPLANNED";
}

}  // namespace phalanx::core
