#include "bench/sim_policies.h"

#include <limits>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace phalanx::bench {
namespace {

// Which configuration fields core::Config has (C is always core::Config; a
// template, so that a missing field makes a concept false rather than the
// build fail).
template <typename C>
concept HasStrictFifo = requires(C c) {
  c.admission.strict_fifo = true;
};
template <typename C>
concept HasSubmitOrder = requires(C c) {
  c.admission.ordering = decltype(c.admission.ordering)::kSubmitOrder;
};
template <typename C>
concept HasFirstFit = requires(C c) {
  c.placement.first_fit = true;
};
template <typename C>
concept HasFairShare = requires(C c) {
  c.fair_share.half_life;
};
template <typename C>
concept HasFairShareSwitch = requires(C c) {
  c.fair_share.enabled = true;
};
template <typename C>
concept HasReservation = requires(C c) {
  c.reservation.depth = 1;
};
template <typename C>
concept HasReservationMinPriority = requires(C c) {
  c.reservation.min_priority = 0;
};
template <typename C>
concept HasReservationAfter = requires(C c) {
  c.reservation.after = absl::ZeroDuration();
};
template <typename C>
concept HasPreemption = requires(C c) {
  c.preemption.enabled = true;
};

using Config = core::Config;

// Setters that do nothing when core lacks the field (the policy's "missing"
// list decides whether that makes it unavailable).
template <typename C>
void SetOrderAndFit(C& c, bool fifo) {
  if constexpr (HasStrictFifo<C>) c.admission.strict_fifo = fifo;
  if constexpr (HasFirstFit<C>) c.placement.first_fit = fifo;
  if constexpr (HasSubmitOrder<C>) {
    using Ordering = decltype(c.admission.ordering);
    c.admission.ordering =
        fifo ? Ordering::kSubmitOrder : C().admission.ordering;
  }
}

template <typename C>
void SetFairShare(C& c, bool on) {
  if constexpr (HasFairShareSwitch<C>) c.fair_share.enabled = on;
}

// depth 0 = no reservations. With `every_head`, any head gang may reserve
// (EASY backfill), whatever its priority or age.
template <typename C>
void SetReservations(C& c, int depth, bool every_head) {
  if constexpr (HasReservation<C>) {
    if (depth >= 0) c.reservation.depth = depth;
  }
  if constexpr (HasReservationMinPriority<C>) {
    using P = std::remove_cvref_t<decltype(c.reservation.min_priority)>;
    if (every_head)
      c.reservation.min_priority = std::numeric_limits<P>::lowest();
  }
  if constexpr (HasReservationAfter<C>) {
    if (every_head) c.reservation.after = absl::ZeroDuration();
  }
}

template <typename C>
void SetPreemption(C& c, bool on) {
  if constexpr (HasPreemption<C>) c.preemption.enabled = on;
}

PolicyChoice Unavailable(const std::vector<std::string>& missing) {
  return {std::nullopt, absl::StrCat("core::Config has no ",
                                     absl::StrJoin(missing, ", "), " yet")};
}

PolicyChoice Fifo(Config c) {
  std::vector<std::string> missing;
  if (!HasStrictFifo<Config>) missing.push_back("admission.strict_fifo");
  if (!HasSubmitOrder<Config>) missing.push_back("Ordering::kSubmitOrder");
  if (!HasFirstFit<Config>) missing.push_back("placement.first_fit");
  if (!missing.empty()) return Unavailable(missing);
  SetOrderAndFit(c, /*fifo=*/true);
  SetFairShare(c, false);
  SetReservations(c, 0, false);
  SetPreemption(c, false);
  return {c, ""};
}

PolicyChoice KueueLike(Config c) {
  std::vector<std::string> missing;
  if (!HasFairShare<Config>) missing.push_back("fair_share");
  if (!missing.empty()) return Unavailable(missing);
  SetOrderAndFit(c, /*fifo=*/false);
  SetFairShare(c, true);
  SetReservations(c, 0, false);
  SetPreemption(c, false);
  return {c, ""};
}

PolicyChoice SlurmLike(Config c) {
  std::vector<std::string> missing;
  if (!HasReservation<Config>) missing.push_back("reservation.depth");
  // Priority and age only: fair sharing must be off (or absent).
  if (HasFairShare<Config> && !HasFairShareSwitch<Config>) {
    missing.push_back("fair_share.enabled");
  }
  if (!missing.empty()) return Unavailable(missing);
  SetOrderAndFit(c, /*fifo=*/false);
  SetFairShare(c, false);
  SetReservations(c, 1, /*every_head=*/true);
  SetPreemption(c, false);
  return {c, ""};
}

PolicyChoice Phalanx(Config c) {
  std::vector<std::string> missing;
  if (!HasFairShare<Config>) missing.push_back("fair_share");
  if (!HasReservation<Config>) missing.push_back("reservation.depth");
  if (!HasPreemption<Config>) missing.push_back("preemption.enabled");
  if (!missing.empty()) return Unavailable(missing);
  SetOrderAndFit(c, /*fifo=*/false);
  SetFairShare(c, true);
  SetReservations(c, -1, false);  // core's defaults
  SetPreemption(c, true);
  return {c, ""};
}

}  // namespace

const std::vector<std::string>& PolicyNames() {
  static const std::vector<std::string>* names = new std::vector<std::string>{
      "fifo", "kueue-like", "slurm-like", "phalanx"};
  return *names;
}

PolicyChoice PolicyConfig(absl::string_view name, const core::Config& base) {
  if (name == "fifo") return Fifo(base);
  if (name == "kueue-like") return KueueLike(base);
  if (name == "slurm-like") return SlurmLike(base);
  if (name == "phalanx") return Phalanx(base);
  return {std::nullopt, absl::StrCat("unknown policy \"", name, "\" (known: ",
                                     absl::StrJoin(PolicyNames(), ", "), ")")};
}

}  // namespace phalanx::bench
