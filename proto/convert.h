#pragma once
// Conversions of the shapes both sides share (common/step_record.h,
// common/node_probe.h) to and from their messages: the only ones. Each side's
// rpc/convert keeps the conversions of its own types and, on the controller,
// the bounds on what a worker sends (docs/architecture.md, "Layout").

#include "common/node_probe.h"
#include "common/step_record.h"
#include "trellis/v1/types.pb.h"

namespace trellis {

void ToProto(const StepRecord& in, v1::StepRecord* out);
StepRecord FromProto(const v1::StepRecord& in);

void ToProto(const NodeProbe& in, v1::NodeProbe* out);
// Field for field: no bounds (the controller applies its own, controller/rpc/convert).
NodeProbe FromProto(const v1::NodeProbe& in);

}  // namespace trellis
