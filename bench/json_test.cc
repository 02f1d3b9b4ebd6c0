#include "bench/json.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace phalanx::bench {
namespace {

TEST(JsonObjectTest, KeepsOrderAndNests) {
  JsonObject inner;
  inner.Add("clients", 64).Add("quick", true);
  JsonObject outer;
  outer.Add("meta", inner).Add("rate", 1500.5).Add("name", "a\"b");
  EXPECT_EQ(outer.Dump(),
            R"({"meta":{"clients":64,"quick":true},"rate":1500.5,)"
            R"("name":"a\"b"})");
}

TEST(JsonObjectTest, NonFiniteIsNull) {
  JsonObject object;
  object.Add("x", std::numeric_limits<double>::infinity())
      .Add("y", std::nan(""));
  EXPECT_EQ(object.Dump(), R"({"x":null,"y":null})");
}

TEST(JsonObjectTest, EscapesControlCharacters) {
  JsonObject object;
  object.Add("s", "a\nb\x01");
  EXPECT_EQ(object.Dump(), R"({"s":"a\nb\u0001"})");
}

// Each case: the value, its digits, and the text %.Ng prints for it.
TEST(JsonNumberTest, TableDumpsAsPrintfGForMagnitudesBelowTenToTheN) {
  struct Case {
    double value;
    int digits;
    const char* text;
  };
  const Case cases[] = {
      {0.5, 10, "0.5"},
      {3600.0, 10, "3600"},
      {-3.0, 10, "-3"},
      {1.23456789012, 10, "1.23456789"},
      {1.5e-05, 10, "1.5e-05"},
      {0.00015, 10, "0.00015"},
      {1e9 + 0.5, 10, "1000000000"},
      {0.7841234567, 10, "0.7841234567"},
      {1500.5, 6, "1500.5"},
      {2.0 / 3.0, 6, "0.666667"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(DumpJson(JsonNumber(c.value, c.digits)), c.text);
  }
}

TEST(JsonNumberTest, NonFiniteIsNull) {
  EXPECT_TRUE(JsonNumber(std::nan(""), 10).is_null());
  EXPECT_TRUE(
      JsonNumber(-std::numeric_limits<double>::infinity(), 6).is_null());
}

TEST(DumpJsonTest, IndentsNestedObjectsAndKeepsEmptyOnesOnOneLine) {
  Json json = Json::object();
  json["b"] = 1;
  json["a"] = Json::object();
  json["c"] = Json::array();
  EXPECT_EQ(DumpJson(json, 2), "{\n  \"b\": 1,\n  \"a\": {},\n  \"c\": []\n}");
}

}  // namespace
}  // namespace phalanx::bench
