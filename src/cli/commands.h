#pragma once
// Each subcommand of the `gpugeek` binary registers itself on the root CLI11 app through one
// function declared here and defined in its own `*_command.cc`. The CLI holds no business logic:
// it parses flags, calls a component, and renders the result (table on a terminal, or --json).

#include <CLI/CLI.hpp>

namespace gpugeek::cli {

void RegisterCatalogCommand(CLI::App& app);
void RegisterPlanCommand(CLI::App& app);
void RegisterDevicesCommand(CLI::App& app);
void RegisterSimCommand(CLI::App& app);
void RegisterAgentCommand(CLI::App& app);  // `gpugeek agent` (agent_command.cc)
// `gpugeek server` (server_command.cc).
void RegisterServerCommand(CLI::App& app);
// `gpugeek openapi`: prints the server's OpenAPI document, as GET /v1/openapi.json serves it, without a
// server (server_command.cc).
void RegisterOpenApiCommand(CLI::App& app);
void RegisterUpCommand(CLI::App& app);  // `gpugeek up`: server + agent in one process (up_command.cc)
// Client commands against a server: submit, jobs, job, logs, cancel, events (jobs_command.cc).
void RegisterJobCommands(CLI::App& app);
// Client commands against a server: nodes, node, cordon, uncordon, drain, pool (nodes_command.cc).
void RegisterNodeCommands(CLI::App& app);
void RegisterTopCommand(CLI::App& app);
// Accounts: login, whoami, tenants, users, tokens, join tokens, audit (account_commands.cc).
void RegisterAccountCommands(CLI::App& app);
// Tenants' quotas and fair share: quota, quota set (quota_command.cc).
void RegisterQuotaCommands(CLI::App& app);

// Secrets and master keys: secret set/delete, secrets, keys init/rotate (secret_commands.cc).
void RegisterSecretCommands(CLI::App& app);

}  // namespace gpugeek::cli
