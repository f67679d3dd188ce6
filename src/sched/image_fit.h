#pragma once
// ImageFit: a request that runs in a container image (Request::image) fits only nodes that have that
// image (NodeSpec::images, from the agent's `podman images`); no node pulls an image here.

#include <string>
#include <vector>

#include "sched/plugin.h"

namespace gpugeek::sched {

class ImageFit final : public FilterPlugin {
 public:
  std::string_view name() const override { return "ImageFit"; }
  // Keeps the candidates whose image list holds *shape.image; all of them when the shape needs none.
  void Filter(const PodShape& shape, const Cluster& cluster, std::vector<NodeIndex>& candidates) const override;
  // "image localhost/busybox:latest is not on this node (it has 2 images)", or "" when node `n` fits.
  std::string Explain(const PodShape& shape, const Cluster& cluster, NodeIndex n) const override;
};

}  // namespace gpugeek::sched
