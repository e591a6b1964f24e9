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

// Sets the fields of `out` named like a table field (a message that carries a
// few figures of a record, e.g. StepPoint) where `record` has them; leaves
// the others as they are.
void CopyStepFields(const StepRecord& record, google::protobuf::Message* out);
// The reverse: the table fields `in` has a field of the same name for and
// holds (a field without presence always holds), into `out`.
void ReadStepFields(const google::protobuf::Message& in, StepRecord* out);

}  // namespace trellis
