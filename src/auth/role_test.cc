#include "auth/role.h"

#include <gtest/gtest.h>

namespace gpugeek::auth {
namespace {

TEST(RoleTest, NamesRoundTripAndOrder) {
  for (Role r : {Role::kViewer, Role::kMember, Role::kAdmin}) EXPECT_EQ(ParseRole(RoleName(r)), r);
  EXPECT_EQ(ParseRole("Admin"), std::nullopt);
  EXPECT_EQ(ParseRole(""), std::nullopt);
  EXPECT_TRUE(Grants(Role::kAdmin, Role::kMember));
  EXPECT_TRUE(Grants(Role::kMember, Role::kMember));
  EXPECT_FALSE(Grants(Role::kViewer, Role::kMember));
  EXPECT_FALSE(Grants(Role::kMember, Role::kAdmin));
}

}  // namespace
}  // namespace gpugeek::auth
