// Command-line spelling shared by the bench programs: Abseil flags are
// spelled with '_', and these programs take '-' too (as phalanxd does).
// Pure functions; thread-safe.
#ifndef PHALANX_BENCH_FLAGS_H_
#define PHALANX_BENCH_FLAGS_H_

#include <string>
#include <vector>

namespace phalanx::bench {

// Returns argv with '-' turned into '_' in every "--name" before its '='
// ("--gpus-per-node=8" → "--gpus_per_node=8"); values, single-dash
// arguments and everything after "--" stay as they are.
std::vector<std::string> UnderscoreFlagNames(int argc, char** argv);

}  // namespace phalanx::bench

#endif  // PHALANX_BENCH_FLAGS_H_
