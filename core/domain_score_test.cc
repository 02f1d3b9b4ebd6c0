#include "core/domain_score.h"

#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'700'000'000);
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(DomainScoreTest, TableRankDomain) {
  const absl::Time gang_end = kNow + absl::Hours(4);
  struct Case {
    std::string name;
    absl::Time latest_end;
    absl::Time gang_end;
    double extension_h;
    double gap_h;
  } cases[] = {
      {"busy until after the gang: no extension", kNow + absl::Hours(6),
       gang_end, 0, 2},
      {"busy until exactly its end", gang_end, gang_end, 0, 0},
      {"frees an hour from now: extended 3 h", kNow + absl::Hours(1), gang_end,
       3, 3},
      {"idle: extended by the whole run", absl::InfinitePast(), gang_end, 4, 4},
      {"overdue gangs count as ending now", kNow - absl::Hours(2), gang_end, 4,
       4},
      {"a gang there without estimate: never extended, gap unknown",
       absl::InfiniteFuture(), gang_end, 0, kInf},
      {"the gang has no estimate: every domain ties", kNow + absl::Hours(6),
       absl::InfiniteFuture(), kInf, kInf},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const DomainRank rank = RankDomain(c.latest_end, c.gang_end, kNow, 3);
    EXPECT_EQ(rank.extension_seconds, c.extension_h * 3600);
    EXPECT_EQ(rank.gap_seconds, c.gap_h * 3600);
    EXPECT_EQ(rank.best_fit_order, 3);
  }
}

TEST(DomainScoreTest, TableOrderPrefersNoExtensionThenClosestEndThenBestFit) {
  const absl::Time end = kNow + absl::Hours(4);
  struct Case {
    std::string name;
    DomainRank better;
    DomainRank worse;
  } cases[] = {
      {"a busy domain before an idle one",
       RankDomain(kNow + absl::Hours(5), end, kNow, 5),
       RankDomain(absl::InfinitePast(), end, kNow, 0)},
      {"the domain ending closest after the gang",
       RankDomain(kNow + absl::Hours(5), end, kNow, 2),
       RankDomain(kNow + absl::Hours(9), end, kNow, 1)},
      {"less extension before a closer end",
       RankDomain(kNow + absl::Hours(3), end, kNow, 2),
       RankDomain(kNow + absl::Hours(1), end, kNow, 1)},
      {"ties go to best fit's order",
       RankDomain(kNow + absl::Hours(5), end, kNow, 0),
       RankDomain(kNow + absl::Hours(5), end, kNow, 1)},
      {"without an estimate best fit's choice wins",
       RankDomain(absl::InfinitePast(), absl::InfiniteFuture(), kNow, 0),
       RankDomain(kNow + absl::Hours(5), absl::InfiniteFuture(), kNow, 1)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(c.better < c.worse);
    EXPECT_FALSE(c.worse < c.better);
  }
}

}  // namespace
}  // namespace phalanx::core
