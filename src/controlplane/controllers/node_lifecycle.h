#pragma once
// NodeLifecycleController: node health from heartbeat leases (state/lease_table.h), on the monotonic
// clock.
//
//   ready   --(no renewal for `lease`)--> suspect: no new placements; its members keep running
//   suspect --(renewed)--> ready
//   suspect --(no renewal for lease + fence_grace + fence_margin)--> down: by now its agent has stopped
//           its members (or their shims have, if the agent died); they are presumed stopped, their
//           GPUs released, and their jobs requeued (placed again once any surviving members of the gang
//           have stopped too)
//   down    --(renewed)--> ready: a returning agent is told what to run; what it ran was moved on
// A wall-clock step changes nothing here: every age is monotonic.

#include "controlplane/controllers/context.h"

namespace gpugeek::controlplane {

class NodeLifecycleController {
 public:
  // One pass at monotonic time `now`.
  void Reconcile(ControllerContext& ctx, MonoTime now);

 private:
  void Lost(ControllerContext& ctx, const std::string& node, Duration silent);
};

}  // namespace gpugeek::controlplane
