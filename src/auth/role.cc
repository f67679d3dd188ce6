#include "auth/role.h"

namespace gpugeek::auth {

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kMember:
      return "member";
    case Role::kAdmin:
      return "admin";
  }
  return "viewer";
}

std::optional<Role> ParseRole(std::string_view name) {
  for (Role r : {Role::kViewer, Role::kMember, Role::kAdmin}) {
    if (RoleName(r) == name) return r;
  }
  return std::nullopt;
}

}  // namespace gpugeek::auth
