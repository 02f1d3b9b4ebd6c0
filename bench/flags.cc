#include "bench/flags.h"

#include <algorithm>

namespace phalanx::bench {

std::vector<std::string> UnderscoreFlagNames(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& arg = args[i];
    if (arg == "--") break;
    if (arg.size() < 3 || arg[0] != '-' || arg[1] != '-') continue;
    const size_t end = std::min(arg.find('='), arg.size());
    std::replace(arg.begin() + 2, arg.begin() + end, '-', '_');
  }
  return args;
}

}  // namespace phalanx::bench
