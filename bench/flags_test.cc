#include "bench/flags.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::bench {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> Rewrite(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  return UnderscoreFlagNames(static_cast<int>(argv.size()), argv.data());
}

TEST(UnderscoreFlagNamesTest, RewritesNamesOnlyUpToTheValue) {
  EXPECT_THAT(Rewrite({"prog", "--gpus-per-node=8", "--out", "a-b",
                       "--trace=x-y.csv", "-v-x", "--plot"}),
              ElementsAre("prog", "--gpus_per_node=8", "--out", "a-b",
                          "--trace=x-y.csv", "-v-x", "--plot"));
}

TEST(UnderscoreFlagNamesTest, StopsAtDoubleDash) {
  EXPECT_THAT(Rewrite({"prog-name", "--max-jobs", "--", "--keep-me"}),
              ElementsAre("prog-name", "--max_jobs", "--", "--keep-me"));
}

}  // namespace
}  // namespace phalanx::bench
