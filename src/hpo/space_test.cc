#include "hpo/space.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpugeek::hpo {
namespace {

using ::testing::HasSubstr;

SearchSpace Tree() {
  return *SearchSpace::FromJson(nlohmann::json::parse(R"([
    {"name": "opt", "type": "categorical", "choices": ["adam", "sgd"]},
    {"name": "lr", "type": "float", "low": 1e-5, "high": 1e-1, "log": true},
    {"name": "layers", "type": "int", "low": 1, "high": 3},
    {"name": "momentum", "type": "float", "low": 0, "high": 0.99, "parent": "opt", "when": ["sgd"]}
  ])"));
}

TEST(SearchSpaceTest, RefusesBadSpecsNamingTheField) {
  auto err = [](const char* json) {
    return std::string(SearchSpace::FromJson(nlohmann::json::parse(json)).status().message());
  };
  EXPECT_THAT(err(R"([{"name": "a", "type": "float", "low": 1, "high": 1}])"), HasSubstr("low 1 must be below high 1"));
  EXPECT_THAT(err(R"([{"name": "a", "type": "float", "low": 0, "high": 1, "log": true}])"),
              HasSubstr("log scale needs low > 0"));
  EXPECT_THAT(err(R"([{"name": "a", "type": "int", "low": 0.5, "high": 3}])"),
              HasSubstr("int bounds must be integers"));
  EXPECT_THAT(err(R"([{"name": "a", "type": "categorical", "choices": []}])"), HasSubstr("choices is empty"));
  EXPECT_THAT(err(R"([{"name": "a", "type": "categorical", "choices": ["x", "x"]}])"), HasSubstr("repeat"));
  EXPECT_THAT(
      err(R"([{"name": "a", "type": "float", "low": 0, "high": 1}, {"name": "a", "type": "float", "low": 0, "high": 1}])"),
      HasSubstr("defined twice"));
  EXPECT_THAT(err(R"([{"name": "a", "type": "float", "low": 0, "high": 1, "parent": "b", "when": ["x"]}])"),
              HasSubstr("parent \"b\" is not a parameter before it"));
  EXPECT_THAT(
      err(R"([{"name": "b", "type": "categorical", "choices": ["x"]}, {"name": "a", "type": "int", "low": 0, "high": 1, "parent": "b", "when": ["y"]}])"),
      HasSubstr("when \"y\" is not a choice of \"b\""));
  EXPECT_THAT(err(R"([{"name": "a", "type": "quantum"}])"),
              HasSubstr("space[0].type: must be float, int or categorical"));
  EXPECT_THAT(err(R"([{"name": "a", "type": "float", "low": 0, "high": 1, "step": 2}])"),
              HasSubstr("space[0].step: unknown field"));
  EXPECT_THAT(err(R"({"a": 1})"), HasSubstr("must be a list"));
  EXPECT_THAT(err("[]"), HasSubstr("no parameters"));
}

TEST(SearchSpaceTest, JsonRoundTrip) {
  const SearchSpace space = Tree();
  EXPECT_EQ(SearchSpace::FromJson(space.ToJson())->ToJson(), space.ToJson());
  EXPECT_EQ(space.parent(3), 0);
  EXPECT_TRUE(space.has_conditions());
  EXPECT_FALSE(space.all_numeric());
}

TEST(SearchSpaceTest, UnitCoordinatesWidenIntegers) {
  const SearchSpace space = Tree();
  // layers in {1, 2, 3}: each integer owns a third of [0, 1].
  EXPECT_DOUBLE_EQ(space.ToUnit(2, 1), 0.5 / 3);
  EXPECT_DOUBLE_EQ(space.ToUnit(2, 3), 2.5 / 3);
  EXPECT_EQ(space.FromUnit(2, 0.0), 1);
  EXPECT_EQ(space.FromUnit(2, 0.34), 2);
  EXPECT_EQ(space.FromUnit(2, 1.0), 3);
  // lr on a log scale: 1e-3 is the middle of [1e-5, 1e-1].
  EXPECT_NEAR(space.ToUnit(1, 1e-3), 0.5, 1e-12);
  EXPECT_NEAR(space.FromUnit(1, 0.25), 1e-4, 1e-15);
}

TEST(SearchSpaceTest, ConditionalParametersFollowTheirParent) {
  const SearchSpace space = Tree();
  Point p = {0, 1e-3, 2, 0.9};  // adam: momentum inactive
  space.Deactivate(p);
  EXPECT_TRUE(IsInactive(p[3]));
  Point q = {1, 1e-3, 2, 0.9};  // sgd
  space.Deactivate(q);
  EXPECT_EQ(q[3], 0.9);
  EXPECT_EQ(space.PointToJson(p), nlohmann::json::parse(R"({"opt": "adam", "lr": 0.001, "layers": 2})"));
  EXPECT_EQ(space.PointToJson(q),
            nlohmann::json::parse(R"({"opt": "sgd", "lr": 0.001, "layers": 2, "momentum": 0.9})"));
  EXPECT_EQ(space.PointFromJson(space.PointToJson(q))->at(3), 0.9);
}

TEST(SearchSpaceTest, PointFromJsonNamesTheParameter) {
  const SearchSpace space = Tree();
  auto err = [&](const char* json) {
    return std::string(space.PointFromJson(nlohmann::json::parse(json)).status().message());
  };
  EXPECT_THAT(err(R"({"opt": "adam", "lr": 0.5, "layers": 2})"), HasSubstr("params.lr: 0.5 is outside [1e-05, 0.1]"));
  EXPECT_THAT(err(R"({"opt": "adam", "lr": 0.001, "layers": 2.5})"), HasSubstr("params.layers: must be an integer"));
  EXPECT_THAT(err(R"({"opt": "rmsprop", "lr": 0.001, "layers": 2})"),
              HasSubstr("params.opt: \"rmsprop\" is not one of the choices"));
  EXPECT_THAT(err(R"({"opt": "adam", "lr": 0.001, "layers": 2, "momentum": 0.5})"),
              HasSubstr("params.momentum: given but inactive"));
  EXPECT_THAT(err(R"({"opt": "sgd", "lr": 0.001, "layers": 2})"), HasSubstr("params.momentum: missing"));
  EXPECT_THAT(err(R"({"opt": "adam", "lr": 0.001, "layers": 2, "depth": 1})"),
              HasSubstr("params.depth: not a parameter"));
}

}  // namespace
}  // namespace gpugeek::hpo
