#include "gateway/h2_proxy.h"

#include <unistd.h>

#include "gateway/proxy.h"

namespace gpugeek::gateway::detail {

struct H2Proxy::Impl {
  Proxy* proxy = nullptr;
};

H2Proxy::H2Proxy(Proxy* proxy) : impl_(std::make_unique<Impl>()) { impl_->proxy = proxy; }
H2Proxy::~H2Proxy() = default;

void H2Proxy::Adopt(int fd, std::string, std::string) { close(fd); }
void H2Proxy::Tick() {}
void H2Proxy::CloseAll() {}

}  // namespace gpugeek::gateway::detail
