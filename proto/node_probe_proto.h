#pragma once
// The node probe (common/node_probe.h), a shape the controller and workers
// share, to and from its message: the only conversion of it. Each side's
// rpc/ converts its own types and, on the controller, bounds what a worker
// sends (docs/architecture.md, "Layout").

#include "common/node_probe.h"
#include "trellis/v1/types.pb.h"

namespace trellis {

void ToProto(const NodeProbe& in, v1::NodeProbe* out);
// Field for field: no bounds (the controller applies its own, controller/rpc/app_proto).
NodeProbe FromProto(const v1::NodeProbe& in);

}  // namespace trellis
