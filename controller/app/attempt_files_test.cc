// The shell's writing of an attempt's files, on a real directory: the
// directory made, the files and their modes, a kept secret checked.
#include "controller/app/attempt_files.h"

#include <sys/stat.h>

#include <fstream>

#include "common/sha256.h"
#include "controller/app/part_test_util.h"

namespace trellis::controller {
namespace {

class AttemptFilesTest : public PartTest {
 protected:
  std::string Read(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  int ModeOf(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 0777) : -1;
  }
  std::string dir_ = config_.output_root + "/run-1/attempt-1";
};

TEST_F(AttemptFilesTest, MakesTheDirectoryAndWritesEachFileWithItsMode) {
  ::umask(022);
  WriteAttemptFiles w{"run-1", 1, dir_, {}, "", ""};
  w.files.push_back({dir_ + "/secret", "s3cret\n", 0600});
  w.files.push_back({dir_ + "/batch.sh", "#!/bin/bash\n", 0700});
  ASSERT_TRUE(WriteAttemptFilesNow(w).ok());
  EXPECT_EQ(Read(dir_ + "/secret"), "s3cret\n");
  EXPECT_EQ(ModeOf(dir_ + "/secret"), 0600);
  EXPECT_EQ(Read(dir_ + "/batch.sh"), "#!/bin/bash\n");
  EXPECT_EQ(ModeOf(dir_ + "/batch.sh"), 0700);
}

TEST_F(AttemptFilesTest, AKeptSecretMustStillHoldItsDigest) {
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ + "/secret") << "s3cret\n";
  WriteAttemptFiles w{"run-1", 1, dir_, {}, dir_ + "/secret", Sha256Hex("s3cret")};
  w.files.push_back({dir_ + "/batch.sh", "#!/bin/bash\n", 0700});
  EXPECT_TRUE(WriteAttemptFilesNow(w).ok());

  std::ofstream(dir_ + "/secret") << "altered\n";
  std::filesystem::remove(dir_ + "/batch.sh");
  absl::Status altered = WriteAttemptFilesNow(w);
  EXPECT_EQ(altered.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(altered.message(),
            "attempt 1's secret file " + dir_ + "/secret is missing or altered");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/batch.sh")) << "nothing written after";

  std::filesystem::remove(dir_ + "/secret");
  EXPECT_EQ(WriteAttemptFilesNow(w).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(AttemptFilesTest, ADirectoryThatCannotBeMadeIsNamed) {
  std::ofstream(root_ / "file") << "x";
  const std::string under_a_file = (root_ / "file" / "attempt-1").string();
  WriteAttemptFiles w{"run-1", 1, under_a_file, {{under_a_file + "/batch.sh", "", 0700}}, "", ""};
  absl::Status st = WriteAttemptFilesNow(w);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot create " + under_a_file), std::string::npos) << st;
}

}  // namespace
}  // namespace trellis::controller
