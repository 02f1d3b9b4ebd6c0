#include "bench/sim/progress.h"

#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace phalanx::bench {

ProgressBar::ProgressBar(std::string label, absl::Duration delay)
    : label_(std::move(label)),
      start_(absl::Now()),
      show_after_(start_ + delay),
      tty_(isatty(STDERR_FILENO) == 1) {}

ProgressBar::~ProgressBar() {
  if (drawn_ && tty_) std::fputc('\n', stderr);
}

void ProgressBar::Update(int64_t done, int64_t total) {
  // Reading the clock costs ~20 ns; checking every call keeps it simple.
  const absl::Time now = absl::Now();
  const absl::Duration every =
      tty_ ? absl::Milliseconds(200) : absl::Seconds(10);
  if (now < show_after_ || now - last_draw_ < every) return;
  last_draw_ = now;
  Draw(done, total, now);
}

void ProgressBar::Draw(int64_t done, int64_t total, absl::Time now) {
  constexpr int kWidth = 30;
  const double fraction =
      total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  const int filled = static_cast<int>(fraction * kWidth);
  const double elapsed = absl::ToDoubleSeconds(now - start_);
  const std::string eta =
      fraction > 0.01
          ? absl::StrFormat("~%.0fs left", elapsed * (1 - fraction) / fraction)
          : "";
  std::fprintf(stderr, "%s%-12s [%s%s] %5.1f%% %lld/%lld jobs %5.0fs %s%s",
               tty_ ? "\r" : "", label_.c_str(),
               std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '.').c_str(), 100 * fraction,
               static_cast<long long>(done), static_cast<long long>(total),
               elapsed, eta.c_str(), tty_ ? "   " : "\n");
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace phalanx::bench
