// `gpugeek images [--server URL] [--json]`: the container images each node can run (job spec `image:`),
// from GET /v1/nodes (each node's `images`, which its agent reads with `podman images`), and the images a
// node holds but whose CUDA/ROCm/driver labels its driver does not meet (`unfit_images`, with the reason).

#include <iostream>

#include <fmt/format.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "common/table.h"

namespace gpugeek::cli {

void RegisterImagesCommand(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  CLI::App* sub = app.add_subcommand("images", "List the container images each node can run (job spec image:)");
  AddClientFlags(sub, flags.get());
  sub->callback([flags] {
    const std::string cmd = "images";
    nlohmann::json nodes = OrFail(cmd, Connect(cmd, *flags)->Get("/v1/nodes"));
    nlohmann::json rows = nlohmann::json::array();
    for (const nlohmann::json& n : nodes["nodes"]) {
      for (const nlohmann::json& image : n.value("images", nlohmann::json::array())) {
        rows.push_back({{"node", n["name"]}, {"image", image}, {"fits", true}});
      }
      const nlohmann::json unfit = n.value("unfit_images", nlohmann::json::object());
      for (const auto& [image, why] : unfit.items()) {
        rows.push_back({{"node", n["name"]}, {"image", image}, {"fits", false}, {"why", why}});
      }
    }
    if (flags->json) {
      PrintJson({{"images", rows}});
      return;
    }
    if (rows.empty()) {
      std::cout << "No node has container images (an agent runs containers with --podman; see "
                   "scripts/build-pytorch-image.sh).\n";
      return;
    }
    TextTable table({"NODE", "IMAGE", "FITS"});
    for (const nlohmann::json& r : rows) {
      table.AddRow({Text(r["node"]), Text(r["image"]), r["fits"].get<bool>() ? "yes" : "no: " + Text(r["why"])});
    }
    std::cout << table.Render();
  });
}

}  // namespace gpugeek::cli
