#pragma once
// ControllerContext: what every controller is handed on each pass. Controllers run one at a time under
// the control plane's writer token, so State needs no lock of its own; each controller keeps its
// private state in its own object.

#include "common/clock.h"
#include "controlplane/options.h"
#include "controlplane/state/lease_table.h"
#include "controlplane/state/log_grant_table.h"
#include "controlplane/state/state.h"
#include "hw/gpu_catalog.h"
#include "store/store.h"

namespace gpugeek::controlplane {

class Billing;
class ControlPlaneMetrics;
class LogStore;

struct ControllerContext {
  State& state;
  store::Store& store;
  Clock& clock;
  const ControlPlaneOptions& options;
  const hw::GpuCatalog& catalog;
  LeaseTable& leases;
  LogGrantTable& log_grants;
  LogStore& logs;
  ControlPlaneMetrics* metrics;  // nullptr = none
  Billing* billing;              // nullptr = none (charges, budgets: billing.h)
};

}  // namespace gpugeek::controlplane
