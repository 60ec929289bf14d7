#include "core/json_input.h"

#include <gtest/gtest.h>

#include <string>

#include "core/check.h"

namespace nanovllm {
namespace {

using Json = nlohmann::ordered_json;

std::string nested(int depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

std::string error_of(const std::string& text, int max_depth = kMaxJsonDepth) {
  try {
    parse_json<Json>(text, max_depth);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(ParseJson, NestingUpToTheLimitParses) {
  EXPECT_EQ(parse_json<Json>(nested(kMaxJsonDepth)).dump().size(), 2u * kMaxJsonDepth);
  EXPECT_EQ(parse_json<nlohmann::json>("{\"a\": {\"b\": [1]}}", 3)["a"]["b"][0], 1);
}

TEST(ParseJson, NestingPastTheLimitIsRefusedWhileParsing) {
  EXPECT_EQ(error_of(nested(kMaxJsonDepth + 1)),
            "the JSON nests deeper than 128 levels, the limit");
  EXPECT_NE(error_of("{\"a\": {\"b\": [1]}}", 2).find("deeper than 2 levels"), std::string::npos);
  // A million levels: refused at level 129, long before the end of the text.
  EXPECT_NE(error_of(nested(1'000'000)).find("deeper than 128"), std::string::npos);
  EXPECT_NE(error_of("{\"x\": " + nested(1'000'000) + "}").find("deeper than 128"),
            std::string::npos);
}

TEST(ParseJson, NumbersOutOfRangeAndSyntaxErrorsAreNamed) {
  EXPECT_NE(error_of("{\"t\": 1e400}").find("a number in the JSON is out of range"),
            std::string::npos);
  EXPECT_NE(error_of("[-1e400]").find("out of range"), std::string::npos);
  const std::string syntax = error_of("{\"a\": \xff}");
  EXPECT_NE(syntax.find("invalid JSON"), std::string::npos);
  for (char c : syntax) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << syntax;  // ASCII only
}

TEST(JsonExcerpt, ScalarsAsJsonAndLongStringsCut) {
  EXPECT_EQ(json_excerpt(Json(-3)), "-3");
  EXPECT_EQ(json_excerpt(Json(nullptr)), "null");
  EXPECT_EQ(json_excerpt(Json("hi")), "\"hi\"");
  const std::string cut = json_excerpt(Json(std::string(10'000, 'x')));
  EXPECT_LT(cut.size(), 100u);
  EXPECT_TRUE(cut.ends_with("...")) << cut;
  // A cut never splits a UTF-8 character (each 'é' is two bytes).
  std::string accents;
  for (int i = 0; i < 100; ++i) accents += "\xc3\xa9";
  EXPECT_EQ(json_excerpt(Json(accents)).find("\\ufffd"), std::string::npos);
}

TEST(JsonExcerpt, ContainersShowOneLevel) {
  EXPECT_EQ(json_excerpt(Json::parse("[1, 2, -3]")), "[1, 2, -3]");
  EXPECT_EQ(json_excerpt(Json::parse("{\"a\": [1], \"b\": {}}")), "{\"a\": [...], \"b\": {}}");
  EXPECT_EQ(json_excerpt(Json::parse("[]")), "[]");
  const std::string long_list = json_excerpt(Json(std::vector<int>(1000, 7)));
  EXPECT_LT(long_list.size(), 100u);
  EXPECT_TRUE(long_list.ends_with(", ...]")) << long_list;
}

TEST(JsonExcerpt, DeepValuesCostOneLevel) {
  // Built without the parser's limit: the excerpt must not recurse into it.
  Json deep = Json::array();
  for (int i = 0; i < 100'000; ++i) deep = Json::array({std::move(deep)});
  EXPECT_EQ(json_excerpt(deep), "[[...]]");
}

}  // namespace
}  // namespace nanovllm
