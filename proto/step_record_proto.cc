#include "proto/step_record_proto.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace trellis {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "step record schema: %s\n", message.c_str());
  std::abort();
}

// The message's field of each table entry's name, nullptr where it has none
// (all present when `all`); a field of another type than the entry's is a
// build that does not match its proto: stop.
std::vector<const FieldDescriptor*> FieldsOf(const Descriptor& d, bool all) {
  std::vector<const FieldDescriptor*> out;
  for (const StepField& f : kStepFields) {
    const FieldDescriptor* fd = d.FindFieldByName(std::string(f.name));
    if (fd == nullptr && all) Die(d.full_name() + " has no field " + std::string(f.name));
    auto want = f.is_count() ? FieldDescriptor::CPPTYPE_INT64 : FieldDescriptor::CPPTYPE_DOUBLE;
    if (fd != nullptr && (fd->cpp_type() != want || fd->is_repeated()))
      Die(fd->full_name() + " is not a " + (f.is_count() ? "int64" : "double"));
    out.push_back(fd);
  }
  return out;
}

void Copy(const StepRecord& r, const std::vector<const FieldDescriptor*>& fields, Message* out) {
  const Reflection* reflection = out->GetReflection();
  for (size_t i = 0; i < kStepFieldCount; ++i) {
    const FieldDescriptor* fd = fields[i];
    if (fd == nullptr) continue;
    const StepField& f = kStepFields[i];
    if (f.is_count()) {
      if (auto v = f.get_int(r)) reflection->SetInt64(out, fd, *v);
    } else if (auto v = f.get_double(r)) {
      reflection->SetDouble(out, fd, *v);
    }
  }
}

void Read(const Message& in, const std::vector<const FieldDescriptor*>& fields, StepRecord* r) {
  const Reflection* reflection = in.GetReflection();
  for (size_t i = 0; i < kStepFieldCount; ++i) {
    const FieldDescriptor* fd = fields[i];
    if (fd == nullptr || (fd->has_presence() && !reflection->HasField(in, fd))) continue;
    const StepField& f = kStepFields[i];
    if (f.is_count()) {
      f.set_int(r, reflection->GetInt64(in, fd));
    } else {
      f.set_double(r, reflection->GetDouble(in, fd));
    }
  }
}

// The message's fields named like the table's optional ones.
std::vector<const FieldDescriptor*> FiguresOf(const Descriptor& d) {
  std::vector<const FieldDescriptor*> fields = FieldsOf(d, false);
  for (size_t i = 0; i < kStepFieldCount; ++i)
    if (kStepFields[i].required) fields[i] = nullptr;
  return fields;
}

const std::vector<const FieldDescriptor*>& RecordFields() {
  static const auto* fields =
      new std::vector<const FieldDescriptor*>(FieldsOf(*v1::StepRecord::descriptor(), true));
  return *fields;
}

}  // namespace

void ToProto(const StepRecord& in, v1::StepRecord* out) { Copy(in, RecordFields(), out); }

StepRecord FromProto(const v1::StepRecord& in) {
  StepRecord r;
  Read(in, RecordFields(), &r);
  return r;
}

void CopyStepFigures(const StepRecord& record, Message* out) {
  Copy(record, FiguresOf(*out->GetDescriptor()), out);
}

void ReadStepFigures(const Message& in, StepRecord* out) {
  Read(in, FiguresOf(*in.GetDescriptor()), out);
}

}  // namespace trellis
