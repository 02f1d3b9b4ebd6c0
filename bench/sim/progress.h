// ProgressBar: a one-line progress bar on stderr for long replays. It stays
// silent for the first `delay` (short runs print nothing), then redraws the
// line at most every 200 ms on a terminal, or prints a plain line every 10 s
// when stderr is a file or pipe. Reads the wall clock; used only by the
// phalanx-sim binary. Not thread-safe.
#ifndef PHALANX_BENCH_SIM_PROGRESS_H_
#define PHALANX_BENCH_SIM_PROGRESS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace phalanx::bench {

class ProgressBar {
 public:
  ProgressBar(std::string label, absl::Duration delay = absl::Seconds(2));
  // Ends the line if anything was drawn.
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Reports `done` of `total`.
  void Update(int64_t done, int64_t total);

 private:
  void Draw(int64_t done, int64_t total, absl::Time now);

  std::string label_;
  absl::Time start_;
  absl::Time show_after_;
  absl::Time last_draw_ = absl::InfinitePast();
  bool tty_ = false;
  bool drawn_ = false;
};

}  // namespace phalanx::bench

#endif  // PHALANX_BENCH_SIM_PROGRESS_H_
