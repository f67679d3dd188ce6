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
void RegisterAgentCommand(CLI::App& app);        // `gpugeek agent` (agent_command.cc)
void RegisterSlurmBridgeCommand(CLI::App& app);  // `gpugeek slurm-bridge` (slurm_bridge_command.cc)
// `gpugeek server` (server_command.cc).
void RegisterServerCommand(CLI::App& app);
// `gpugeek openapi`: prints the server's OpenAPI document, as GET /v1/openapi.json serves it, without a
// server (server_command.cc).
void RegisterOpenApiCommand(CLI::App& app);
void RegisterUpCommand(CLI::App& app);  // `gpugeek up`: server + agent in one process (up_command.cc)
// Client commands against a server: submit, jobs, job, logs, cancel, events (jobs_command.cc).
void RegisterJobCommands(CLI::App& app);
// `gpugeek exec JOB -- CMD...`: a command beside a running member, through the server (exec_command.cc).
void RegisterExecCommand(CLI::App& app);
// `gpugeek checkpoint --step N`: inside a member, reports a complete checkpoint to its node's agent
// (checkpoint_command.cc; docs/checkpointing.md).
void RegisterCheckpointCommand(CLI::App& app);
// `gpugeek report --step N --value V`: inside a trial, reports its objective (report_command.cc; docs/hpo.md).
void RegisterReportCommand(CLI::App& app);
// `gpugeek hpo run|list|status|export|stop`: hyper-parameter experiments (hpo_command.cc; docs/hpo.md).
void RegisterHpoCommands(CLI::App& app);
// `gpugeek serve SPEC`, services, endpoints, replicas, traffic set, scale, service delete: model services
// (serve_commands.cc; docs/service-spec.md).
void RegisterServeCommands(CLI::App& app);
// `gpugeek ports JOB` and `gpugeek port-forward JOB [LOCAL:]REMOTE...`: a member's ports, through the
// server (ports_command.cc).
void RegisterPortCommands(CLI::App& app);
// Client commands against a server: nodes, node, cordon, uncordon, drain, pool (nodes_command.cc).
void RegisterNodeCommands(CLI::App& app);
// `gpugeek images`: container images per node (images_command.cc).
void RegisterImagesCommand(CLI::App& app);
void RegisterTopCommand(CLI::App& app);
// `gpugeek gateway`: the serving gateway with a route table from a file (gateway_command.cc; docs/gateway.md).
void RegisterGatewayCommand(CLI::App& app);
// Accounts: login, whoami, tenants, users, tokens, join tokens, audit (account_commands.cc).
void RegisterAccountCommands(CLI::App& app);
// Tenants' quotas and fair share: quota, quota set (quota_command.cc).
void RegisterQuotaCommands(CLI::App& app);
// The marketplace's money: balance, ledger, bill, top-up, grant, payout (billing_commands.cc).
void RegisterBillingCommands(CLI::App& app);
void RegisterBudgetCommands(CLI::App& app);
void RegisterReservationCommands(CLI::App& app);
// `gpugeek offers`: what can be rented now, with prices (offers_command.cc).
void RegisterOffersCommand(CLI::App& app);

// Secrets and master keys: secret set/delete, secrets, keys init/rotate (secret_commands.cc).
void RegisterSecretCommands(CLI::App& app);

// `gpugeek quantize`: INT8 / INT4 weights of a safetensors model, with a report (quantize_command.cc).
void RegisterQuantizeCommand(CLI::App& app);
// `gpugeek model sign` / `gpugeek model verify`: signed manifests of a model's files (model_commands.cc).
void RegisterModelCommands(CLI::App& app);
// `gpugeek model watermark embed/detect` (watermark_command.cc); after RegisterModelCommands.
void RegisterWatermarkCommands(CLI::App& app);
// `gpugeek model push/ls/pull/share/unshare/grants/pulls`: the server's model registry
// (model_registry_commands.cc); after RegisterModelCommands.
void RegisterModelRegistryCommands(CLI::App& app);
// `gpugeek data dedup`: exact and near-duplicate documents among files (data_command.cc).
void RegisterDataCommands(CLI::App& app);
// `gpugeek data push/log/diff/checkout/branch/tag/gc/fsck`: dataset versions (data_version_commands.cc);
// called by RegisterDataCommands on the `data` subcommand.
void RegisterDataVersionCommands(CLI::App* data_cmd);
// `gpugeek data shard` / `gpugeek data order`: sharded dataset files and a rank's samples
// (data_shard_commands.cc); called by RegisterDataCommands on the `data` subcommand.
void RegisterDataShardCommands(CLI::App* data_cmd);

}  // namespace gpugeek::cli
