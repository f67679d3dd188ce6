#pragma once
// The accounts' routes (access.h says who may call each):
//
//   GET    /v1/whoami                                        -> {user, tenant, role, token_id}
//   GET    /v1/tenants?after=&limit=                         -> {tenants, next_after}        admin
//   POST   /v1/tenants   {name}                              -> 201 tenant                  admin
//   GET    /v1/users?after=&limit=                           -> {users, next_after}          admin
//   POST   /v1/users     {name, tenant, role}                -> 201 user                    admin
//   GET    /v1/tokens?after=&limit=                          -> {tokens, next_after}  the caller's (admin: all)
//   POST   /v1/tokens    {user?, description?, expires_in_s?} -> 201 {token, id, ...}  `token` shown only here
//   DELETE /v1/tokens/{id}                                   -> the revoked token
//
// Lists are ordered by id/name and paged: ?limit=1..1000 (default 100), &after=<the last one seen>;
// next_after names the last item of a full page, null on the last page.

#include "controlplane/accounts.h"
#include "controlplane/node_authority.h"
#include "http/server.h"

namespace gpugeek::controlplane {

// Registers the routes above on `server` behind their rules. `accounts` must outlive the server.
void RegisterAccountRoutes(http::Server& server, Accounts& accounts);

// Join tokens (node_authority.h), admin only:
//   GET    /v1/join-tokens?after=&limit=                     -> {join_tokens, next_after}
//   POST   /v1/join-tokens {description?, expires_in_s?, uses?} -> 201 {token, id, uses_left, ...}
//   DELETE /v1/join-tokens/{id}                              -> {}
void RegisterJoinTokenRoutes(http::Server& server, Accounts& accounts, NodeAuthority& nodes);

}  // namespace gpugeek::controlplane
