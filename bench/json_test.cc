#include "bench/json.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace phalanx::bench {
namespace {

using ::testing::HasSubstr;

TEST(ParseJsonTest, ReadsNestedValuesInOrder) {
  auto v = ParseJson(
      R"({"a": [1, -2.5e1, "x\u00e9\ud83d\ude00\n"], "b": {"t": true,
          "f": false, "n": null}, "i": "192000"})");
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->members.size(), 3u);
  EXPECT_EQ(v->members[0].first, "a");
  const JsonValue& a = *v->Find("a");
  ASSERT_EQ(a.items.size(), 3u);
  EXPECT_EQ(a.items[0].AsInt(), 1);
  EXPECT_DOUBLE_EQ(a.items[1].number, -25);
  EXPECT_EQ(a.items[2].text, "x\xC3\xA9\xF0\x9F\x98\x80\n");
  EXPECT_TRUE(v->Find("b")->Find("t")->boolean);
  EXPECT_FALSE(v->Find("b")->Find("f")->boolean);
  EXPECT_EQ(v->Find("b")->Find("n")->type, JsonValue::Type::kNull);
  EXPECT_EQ(v->Find("i")->AsInt(), 192000);  // proto3 int64 as a string
  EXPECT_EQ(v->Find("missing"), nullptr);
}

TEST(ParseJsonTest, RejectsMalformedInputWithItsOffset) {
  for (const char* bad : {"{", "[1,]", "{\"a\" 1}", "tru", "\"open", "1 2",
                          "{\"a\":\"\\x\"}", "[\"\\ud800\"]"}) {
    auto v = ParseJson(bad);
    EXPECT_FALSE(v.ok()) << bad;
    EXPECT_THAT(v.status().message(), HasSubstr("offset")) << bad;
  }
}

TEST(ParseJsonTest, RefusesDeepNesting) {
  EXPECT_FALSE(ParseJson(std::string(100, '[') + std::string(100, ']')).ok());
}

}  // namespace
}  // namespace phalanx::bench
