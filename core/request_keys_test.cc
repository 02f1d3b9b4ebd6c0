#include "core/request_keys.h"

#include "core/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::core {
namespace {

using ::testing::IsEmpty;

using testing::kT0;

RequestRecord Record(const std::string& request, const std::string& gang,
                     absl::Time expires) {
  return RequestRecord{QueueName("q"), request, GangId(gang), 7, expires};
}

TEST(RequestKeysTest, FindsAKeyUntilItExpires) {
  RequestKeys keys;
  keys.Put(Record("r1", "g-1", kT0 + absl::Hours(1)));
  ASSERT_NE(keys.Find({QueueName("q"), "r1"}), nullptr);
  EXPECT_EQ(keys.Find({QueueName("q"), "r1"})->gang_id, GangId("g-1"));
  EXPECT_EQ(keys.Find({QueueName("other"), "r1"}), nullptr);
  EXPECT_THAT(keys.TakeExpired(kT0), IsEmpty());
  const auto expired = keys.TakeExpired(kT0 + absl::Hours(1));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].request_id, "r1");
  EXPECT_EQ(keys.Find({QueueName("q"), "r1"}), nullptr);
}

TEST(RequestKeysTest, AKeyPutAgainLaterLivesToItsNewExpiry) {
  RequestKeys keys;
  keys.Put(Record("r1", "g-1", kT0 + absl::Hours(1)));
  keys.Put(Record("r1", "g-1", kT0 + absl::Hours(2)));
  EXPECT_THAT(keys.TakeExpired(kT0 + absl::Hours(1)), IsEmpty());
  EXPECT_EQ(keys.TakeExpired(kT0 + absl::Hours(2)).size(), 1u);
}

TEST(RequestKeysTest, NamesGangOnlyForTheGangItsLiveKeyNames) {
  RequestKeys keys;
  keys.Put(Record("r1", "g-1", kT0 + absl::Hours(1)));
  Gang gang;
  gang.id = GangId("g-1");
  gang.spec.queue = QueueName("q");
  EXPECT_FALSE(keys.NamesGang(gang));  // no request_id
  gang.spec.request_id = "r1";
  EXPECT_TRUE(keys.NamesGang(gang));
  gang.id = GangId("g-2");
  EXPECT_FALSE(keys.NamesGang(gang));
}

}  // namespace
}  // namespace phalanx::core
