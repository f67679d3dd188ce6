// The single `gpugeek` binary (ARCHITECTURE.md, layer L4).

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "common/version.h"

int main(int argc, char** argv) {
  CLI::App app{"gpugeek: one pool of heterogeneous GPUs for AI work", "gpugeek"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("gpugeek ") + gpugeek::kVersion);

  gpugeek::cli::RegisterCatalogCommand(app);
  gpugeek::cli::RegisterPlanCommand(app);
  gpugeek::cli::RegisterDevicesCommand(app);
  gpugeek::cli::RegisterSimCommand(app);
  gpugeek::cli::RegisterAgentCommand(app);
  gpugeek::cli::RegisterSlurmBridgeCommand(app);
  gpugeek::cli::RegisterServerCommand(app);
  gpugeek::cli::RegisterOpenApiCommand(app);
  gpugeek::cli::RegisterUpCommand(app);
  gpugeek::cli::RegisterJobCommands(app);
  gpugeek::cli::RegisterExecCommand(app);
  gpugeek::cli::RegisterCheckpointCommand(app);
  gpugeek::cli::RegisterReportCommand(app);
  gpugeek::cli::RegisterHpoCommands(app);
  gpugeek::cli::RegisterServeCommands(app);
  gpugeek::cli::RegisterPortCommands(app);
  gpugeek::cli::RegisterNodeCommands(app);
  gpugeek::cli::RegisterImagesCommand(app);
  gpugeek::cli::RegisterTopCommand(app);
  gpugeek::cli::RegisterGatewayCommand(app);
  gpugeek::cli::RegisterAccountCommands(app);
  gpugeek::cli::RegisterSecretCommands(app);
  gpugeek::cli::RegisterQuotaCommands(app);
  gpugeek::cli::RegisterBillingCommands(app);
  gpugeek::cli::RegisterBudgetCommands(app);
  gpugeek::cli::RegisterReservationCommands(app);
  gpugeek::cli::RegisterOffersCommand(app);
  gpugeek::cli::RegisterQuantizeCommand(app);
  gpugeek::cli::RegisterModelCommands(app);
  gpugeek::cli::RegisterWatermarkCommands(app);
  gpugeek::cli::RegisterModelRegistryCommands(app);
  gpugeek::cli::RegisterDataCommands(app);

  CLI11_PARSE(app, argc, argv);
  return 0;
}
