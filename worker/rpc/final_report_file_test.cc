#include "worker/rpc/final_report_file.h"

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace trellis::worker {
namespace {

namespace fs = std::filesystem;

TEST(FinalReportFile, IsTheReportWithoutItsSecretWrittenWhole) {
  const fs::path dir = fs::temp_directory_path() / ("final_report_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "final-report-n1.json").string();
  std::ofstream(path) << "an older, partial report";

  v1::ReportExitRequest report;
  report.mutable_id()->set_run_id("r-1");
  report.mutable_id()->set_attempt(2);
  report.mutable_id()->set_launch(3);
  report.mutable_id()->set_node("n1");
  report.mutable_id()->set_secret("0123456789abcdef");
  v1::RankExit* rank = report.add_ranks();
  rank->set_rank(1);
  rank->set_exit_code(1);
  rank->add_markers("device_oom");
  rank->set_evidence("CUDA out of memory");
  report.set_exit_code(1);
  report.set_reason("rank 1 exited 1");
  report.set_oom_kills(-1);
  ASSERT_TRUE(WriteFinalReportFile(path, report).ok());

  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  EXPECT_EQ(text.str().find("0123456789abcdef"), std::string::npos) << text.str();
  v1::ReportExitRequest back;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(text.str(), &back).ok()) << text.str();
  report.mutable_id()->clear_secret();
  EXPECT_EQ(back.SerializeAsString(), report.SerializeAsString());
  // Renamed into place: no temporary file is left beside it.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  fs::remove_all(dir);
}

TEST(FinalReportFile, AMissingDirectoryIsAnErrorNamingThePath) {
  absl::Status st = WriteFinalReportFile("/nonexistent-dir/final-report-n1.json", {});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/nonexistent-dir/final-report-n1.json"), std::string::npos) << st;
}

}  // namespace
}  // namespace trellis::worker
