#include "sched/image_fit.h"

#include <algorithm>

#include <fmt/format.h>

namespace gpugeek::sched {
namespace {

bool HasImage(const NodeSpec& spec, const std::string& image) {
  return std::binary_search(spec.images.begin(), spec.images.end(), image);
}

}  // namespace

void ImageFit::Filter(const PodShape& shape, const Cluster& cluster, std::vector<NodeIndex>& candidates) const {
  if (shape.image == nullptr) return;
  std::erase_if(candidates, [&](NodeIndex n) { return !HasImage(cluster.spec(n), *shape.image); });
}

std::string ImageFit::Explain(const PodShape& shape, const Cluster& cluster, NodeIndex n) const {
  if (shape.image == nullptr || HasImage(cluster.spec(n), *shape.image)) return "";
  const size_t count = cluster.spec(n).images.size();
  if (count == 0) return fmt::format("image {} is not on this node (it runs no containers)", *shape.image);
  return fmt::format("image {} is not on this node (it has {} other image{})", *shape.image, count,
                     count == 1 ? "" : "s");
}

}  // namespace gpugeek::sched
