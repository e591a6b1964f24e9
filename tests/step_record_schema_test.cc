// The step record's one schema (common/step_fields.h) against every encoding
// of it: each field, with a value of its own, through the JSON codec, the
// proto message, the store's JSON column and step history, StepPoint, the
// rank metrics it maps to and the CLI's JSON. A field added to one encoding
// and not the others fails here: the proto message must have exactly the
// table's fields (by descriptor), StepPoint's figures must be table fields.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

#include "cli/format.h"
#include "common/clock.h"
#include "common/step_record.h"
#include "controller/store/step_writer.h"
#include "controller/store/store.h"
#include "proto/step_record_proto.h"
#include "trellis/v1/controller.pb.h"
#include "worker/metrics/rank_metrics.h"

namespace trellis {
namespace {

using google::protobuf::FieldDescriptor;

// Field i's own value: no two fields share one, none is a default.
int64_t CountOf(size_t i) { return 1001 + 37 * static_cast<int64_t>(i); }
double NumberOf(size_t i) { return 0.5 + 0.125 * static_cast<double>(i); }

// A record with every field set to its own value.
StepRecord Distinct() {
  StepRecord r;
  for (size_t i = 0; i < kStepFieldCount; ++i) {
    const StepField& f = kStepFields[i];
    if (f.is_count()) {
      f.set_int(&r, CountOf(i));
    } else {
      f.set_double(&r, NumberOf(i));
    }
  }
  return r;
}

// Every field of `got` holds field i's own value.
void ExpectDistinct(const StepRecord& got, const std::string& encoding) {
  for (size_t i = 0; i < kStepFieldCount; ++i) {
    const StepField& f = kStepFields[i];
    if (f.is_count()) {
      EXPECT_EQ(f.get_int(got), CountOf(i)) << encoding << ": " << f.name;
    } else {
      EXPECT_EQ(f.get_double(got), NumberOf(i)) << encoding << ": " << f.name;
    }
  }
}

TEST(StepRecordSchemaTest, TheTableNamesEachFieldOnceWithItsKind) {
  std::set<std::string_view> names;
  for (const StepField& f : kStepFields) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
    EXPECT_EQ(FindStepField(f.name), &f);
  }
  EXPECT_EQ(FindStepField("v"), nullptr);
  StepRecord empty;
  for (const StepField& f : kStepFields) EXPECT_EQ(f.Has(empty), f.required) << f.name;
}

TEST(StepRecordSchemaTest, JsonCarriesEveryField) {
  const std::string line = EncodeStepRecord(Distinct());
  nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j.size(), kStepFieldCount + 1) << line;  // and "v"
  for (const StepField& f : kStepFields) EXPECT_TRUE(j.contains(std::string(f.name))) << f.name;
  std::string error;
  auto back = DecodeStepRecord(line, &error);
  ASSERT_TRUE(back) << error;
  ExpectDistinct(*back, "JSON");
  EXPECT_TRUE(CheckStepRecord(*back, &error)) << error;
}

TEST(StepRecordSchemaTest, TheProtoMessageHasExactlyTheTablesFields) {
  const auto& d = *v1::StepRecord::descriptor();
  EXPECT_EQ(static_cast<size_t>(d.field_count()), kStepFieldCount)
      << "v1.StepRecord and the table (common/step_fields.h) must list the same fields";
  for (int i = 0; i < d.field_count(); ++i)
    EXPECT_NE(FindStepField(d.field(i)->name()), nullptr)
        << "v1.StepRecord." << d.field(i)->name() << " is not in common/step_fields.h";
  for (const StepField& f : kStepFields) {
    const FieldDescriptor* fd = d.FindFieldByName(std::string(f.name));
    ASSERT_NE(fd, nullptr) << "v1.StepRecord has no field " << f.name;
    EXPECT_EQ(fd->cpp_type(),
              f.is_count() ? FieldDescriptor::CPPTYPE_INT64 : FieldDescriptor::CPPTYPE_DOUBLE)
        << f.name;
    // Presence as the record's: an absent figure stays absent on the wire.
    EXPECT_EQ(fd->has_presence(), !f.required) << f.name;
  }
}

TEST(StepRecordSchemaTest, ProtoCarriesEveryField) {
  v1::StepRecord message;
  ToProto(Distinct(), &message);
  const auto* reflection = message.GetReflection();
  for (const StepField& f : kStepFields) {
    const FieldDescriptor* fd = message.GetDescriptor()->FindFieldByName(std::string(f.name));
    ASSERT_NE(fd, nullptr) << f.name;
    if (fd->has_presence()) {
      EXPECT_TRUE(reflection->HasField(message, fd)) << f.name;
    }
  }
  ExpectDistinct(FromProto(message), "proto");
  // A record with only the required fields comes back without the others.
  StepRecord bare;
  bare.step = 3;
  v1::StepRecord small;
  ToProto(bare, &small);
  EXPECT_EQ(EncodeStepRecord(FromProto(small)), EncodeStepRecord(bare));
}

// StepPoint (RunSteps) carries some figures of the record by the same names:
// each of its fields is its own or a table figure of the same type, and each
// figure goes there and back.
TEST(StepRecordSchemaTest, StepPointFiguresAreTableFields) {
  const std::set<std::string> own = {"attempt",
                                     "launch",
                                     "step",
                                     "first_step",
                                     "steps",
                                     "ranks",
                                     "loss",
                                     "loss_min",
                                     "loss_max",
                                     "tokens",
                                     "step_seconds_sum",
                                     "step_seconds",
                                     "step_seconds_max",
                                     "updated_unix_ms"};
  const auto& d = *v1::StepPoint::descriptor();
  int figures = 0;
  for (int i = 0; i < d.field_count(); ++i) {
    const FieldDescriptor* fd = d.field(i);
    if (own.count(fd->name()) > 0) continue;
    const StepField* f = FindStepField(fd->name());
    ASSERT_NE(f, nullptr) << "StepPoint." << fd->name() << " is neither its own nor a figure";
    EXPECT_FALSE(f->required) << fd->name();
    EXPECT_EQ(fd->cpp_type(),
              f->is_count() ? FieldDescriptor::CPPTYPE_INT64 : FieldDescriptor::CPPTYPE_DOUBLE)
        << fd->name();
    ++figures;
  }
  EXPECT_GT(figures, 0);
  v1::StepPoint point;
  point.set_loss(-1);  // the point's own: a figure copy leaves it
  CopyStepFigures(Distinct(), &point);
  EXPECT_EQ(point.loss(), -1);
  StepRecord back;
  ReadStepFigures(point, &back);
  for (size_t i = 0; i < kStepFieldCount; ++i) {
    const StepField& f = kStepFields[i];
    if (f.required || d.FindFieldByName(std::string(f.name)) == nullptr) continue;
    EXPECT_EQ(f.Number(back), f.is_count() ? CountOf(i) : NumberOf(i)) << f.name;
  }
}

// The store keeps a step's latest record in its JSON column; its step
// history reads it back through the codec.
TEST(StepRecordSchemaTest, TheStoresColumnCarriesEveryField) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("step_record_schema_test_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "trellis.db").string();
  {
    auto store = controller::Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    FakeClock clock;
    auto run = (*store)->CreateRun(
        "schema", "alice", "[job]\nname='x'\n", 1, 1,
        [](const std::string& id) { return "/out/" + id; }, clock.Now());
    ASSERT_TRUE(run.ok()) << run.status();
    auto writer = controller::StepWriter::Open(path);
    ASSERT_TRUE(writer.ok()) << writer.status();
    controller::StepBatch batch{{run->run_id, 1, 1, "node1"}, 1, {{0, Distinct()}}};
    auto committed = (*writer)->Commit({&batch}, clock.Now());
    ASSERT_TRUE(committed.ok()) << committed.status();

    auto rows = (*store)->RecentSteps(run->run_id, 1);
    ASSERT_TRUE(rows.ok()) << rows.status();
    ASSERT_EQ(rows->size(), 1u);
    std::string error;
    auto stored = DecodeStepRecord(rows->front().last_json, &error);
    ASSERT_TRUE(stored) << error;
    ExpectDistinct(*stored, "store column");

    auto series = controller::ReadStepSeries(**store, run->run_id, 10);
    ASSERT_TRUE(series.ok()) << series.status();
    ASSERT_EQ(series->points.size(), 1u);
    ASSERT_TRUE(series->points[0].last);
    ExpectDistinct(*series->points[0].last, "step history");
  }
  fs::remove_all(dir);
}

// Each metric a field maps to exports that field's value.
TEST(StepRecordSchemaTest, MappedMetricsCarryTheirFields) {
  prometheus::Registry registry;
  worker::RankMetrics metrics(registry, "run-1", "node1");
  const StepRecord record = Distinct();
  metrics.OnStep(0, record, std::chrono::system_clock::now());
  auto value_of = [&](const std::string& name) -> std::optional<double> {
    for (const auto& family : registry.Collect()) {
      if (family.name != name || family.metric.empty()) continue;
      const auto& m = family.metric.front();
      return family.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
    }
    return std::nullopt;
  };
  std::vector<worker::StepFieldMetric> mapped = worker::StepFieldCounters();
  for (const auto& g : worker::StepFieldGauges()) mapped.push_back(g);
  EXPECT_GT(mapped.size(), 0u);
  for (const worker::StepFieldMetric& m : mapped) {
    ASSERT_LT(m.field, kStepFieldCount) << m.name;
    EXPECT_EQ(value_of(m.name), kStepFields[m.field].Number(record))
        << m.name << " <- " << kStepFields[m.field].name;
  }
}

TEST(StepRecordSchemaTest, TheClisJsonCarriesEveryField) {
  v1::StepRecord message;
  ToProto(Distinct(), &message);
  const auto j = cli::StepRecordToJson(message);
  EXPECT_EQ(j.size(), kStepFieldCount) << j.dump();
  for (size_t i = 0; i < kStepFieldCount; ++i) {
    const StepField& f = kStepFields[i];
    const std::string key(f.name);
    ASSERT_TRUE(j.contains(key)) << key;
    if (f.is_count()) {
      EXPECT_EQ(j[key].get<int64_t>(), CountOf(i)) << key;
    } else {
      EXPECT_EQ(j[key].get<double>(), NumberOf(i)) << key;
    }
  }
}

}  // namespace
}  // namespace trellis
