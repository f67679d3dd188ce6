#pragma once
// Roles of the access rule. Every object belongs to a tenant; a user belongs to one tenant and has one
// role there:
//   viewer  reads its tenant's objects (jobs, logs, events) and the shared pool;
//   member  also changes them (submit, cancel) and manages its own API tokens;
//   admin   the operator: every tenant's objects, nodes, tenants, users and tokens.
// A principal of another tenant never learns that an object exists (the routes answer 404, not 403).

#include <optional>
#include <string_view>

namespace gpugeek::auth {

enum class Role { kViewer = 0, kMember = 1, kAdmin = 2 };

// "viewer", "member", "admin".
std::string_view RoleName(Role role);
// The role of a name; nullopt for anything else (names are case-sensitive).
std::optional<Role> ParseRole(std::string_view name);
// Whether `role` grants at least what `needed` does (admin > member > viewer).
inline bool Grants(Role role, Role needed) { return static_cast<int>(role) >= static_cast<int>(needed); }

}  // namespace gpugeek::auth
