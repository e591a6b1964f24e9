#pragma once
// The step record (common/step_record.h) to and from its message, field by
// field from the table (common/step_fields.h) by name through protobuf's
// reflection: the message declares the fields, the table says which exist,
// and nothing spells them again. A table field the message lacks, or one of
// another type, stops the program at the first conversion (and fails
// tests/step_record_schema_test.cc before that).

#include <google/protobuf/message.h>

#include "common/step_record.h"
#include "trellis/v1/types.pb.h"

namespace trellis {

void ToProto(const StepRecord& in, v1::StepRecord* out);
StepRecord FromProto(const v1::StepRecord& in);

// The figures of a record (its optional fields) that `out`'s message has a
// field of the same name for (one that carries a few of them, e.g.
// StepPoint), set where `record` has them; the message's other fields are
// left as they are (StepPoint's own `loss` is not a rank's).
void CopyStepFigures(const StepRecord& record, google::protobuf::Message* out);
// The reverse: the figures `in` has a field of the same name for and holds.
void ReadStepFigures(const google::protobuf::Message& in, StepRecord* out);

}  // namespace trellis
