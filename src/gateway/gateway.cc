#include "gateway/gateway.h"

#include <sys/resource.h>

#include <csignal>

#include <random>
#include <thread>

#include <fmt/format.h>

#include "gateway/proxy.h"
#include "gateway/reactor.h"

namespace gpugeek::gateway {

namespace {

absl::Status CheckAuthRoutes(const RouteTable& routes, bool can_check) {
  if (can_check) return absl::OkStatus();
  for (size_t i = 0; i < routes.routes.size(); ++i) {
    if (!routes.routes[i].auth_tenant.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("routes[{}].auth: this gateway cannot verify tokens; give it the control plane that issues them "
                      "(gpugeek gateway --server URL, or --token-server URL with --routes)",
                      i));
    }
  }
  return absl::OkStatus();
}

}  // namespace

struct Gateway::Impl {
  Reactor reactor;
  std::unique_ptr<TokenCheck> token_check;  // before the proxy, which borrows it; after the reactor it wakes
  std::unique_ptr<detail::Proxy> proxy;
  std::thread loop;
  bool stopped = false;
  std::string instance;
};

Gateway::Gateway(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Gateway::~Gateway() { Stop(); }

absl::StatusOr<std::unique_ptr<Gateway>> Gateway::Start(GatewayOptions options, RouteTable routes) {
  if (auto s = ValidateRouteTable(routes); !s.ok()) return s;
  if (auto s = CheckAuthRoutes(routes, options.token_check.has_value()); !s.ok()) return s;
  if (options.pipeline_depth < 1 || options.pipeline_depth > 1024) {
    return absl::InvalidArgumentError("pipeline_depth: must be 1 (off) to 1024");
  }
  if (options.max_head < 1024 || options.max_client_connections < 1) {
    return absl::InvalidArgumentError("max_head must be at least 1 KiB and max_client_connections at least 1");
  }
  // Each client may hold a replica connection too: take the hard limit of descriptors (Debian's soft default, 1024,
  // is below max_client_connections' default).
  if (rlimit limit{}; getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  if (options.tls) std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a signal
  auto impl = std::make_unique<Impl>();
  std::random_device entropy;
  impl->instance = fmt::format("{:08x}{:08x}", entropy(), entropy());
  if (auto s = impl->reactor.Init(); !s.ok()) return s;
  if (options.token_check) {
    TokenCheckOptions check = *options.token_check;
    check.on_result = [reactor = &impl->reactor] { reactor->Wake(); };  // requests that waited go on
    auto started = TokenCheck::Start(std::move(check));
    if (!started.ok()) return started.status();
    impl->token_check = *std::move(started);
  }
  impl->proxy = std::make_unique<detail::Proxy>(std::move(options), &impl->reactor, impl->token_check.get());
  if (auto s = impl->proxy->Listen(); !s.ok()) return s;
  impl->proxy->StageRoutes(std::move(routes));
  impl->proxy->Tick();  // applies the routes before the first request
  Impl* raw = impl.get();
  impl->loop = std::thread([raw] { raw->reactor.Run(std::chrono::milliseconds(100), [raw] { raw->proxy->Tick(); }); });
  return std::unique_ptr<Gateway>(new Gateway(std::move(impl)));
}

uint16_t Gateway::port() const { return impl_->proxy->port(); }

absl::Status Gateway::SetRoutes(RouteTable routes) {
  if (auto s = ValidateRouteTable(routes); !s.ok()) return s;
  if (auto s = CheckAuthRoutes(routes, impl_->token_check != nullptr); !s.ok()) return s;
  impl_->proxy->StageRoutes(std::move(routes));
  impl_->reactor.Wake();
  return absl::OkStatus();
}

std::map<std::string, ServiceLoad> Gateway::Load() const { return impl_->proxy->Load(); }

const std::string& Gateway::instance() const { return impl_->instance; }

void Gateway::Stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  impl_->reactor.Stop();
  if (impl_->loop.joinable()) impl_->loop.join();
  impl_->proxy->CloseAll();
}

}  // namespace gpugeek::gateway
