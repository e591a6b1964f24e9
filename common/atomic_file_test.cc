#include "common/atomic_file.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/atomic_file_writer.h"

namespace trellis {
namespace {

namespace fs = std::filesystem;

// A file-size limit for this process while it lives, SIGXFSZ ignored, so that a
// write past it fails part way with EFBIG; both restored at the end.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ok_ = ::sigaction(SIGXFSZ, &ignore, &old_action_) == 0 &&
          ::getrlimit(RLIMIT_FSIZE, &old_limit_) == 0;
    rlimit small = old_limit_;
    small.rlim_cur = bytes;
    ok_ = ok_ && ::setrlimit(RLIMIT_FSIZE, &small) == 0;
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_limit_);
    ::sigaction(SIGXFSZ, &old_action_, nullptr);
  }
  bool ok() const { return ok_; }

 private:
  struct sigaction old_action_ {};
  rlimit old_limit_{};
  bool ok_ = false;
};

class AtomicFileTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() / ("atomic_file_test_" + std::to_string(::getpid()) + "_" +
                                     testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    old_umask_ = ::umask(022);
  }
  void TearDown() override {
    ::umask(old_umask_);
    fs::remove_all(dir_);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  // The names in the directory: a temporary file left behind shows here.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path dir_;
  mode_t old_umask_ = 0;
};

std::string Read(const std::string& path) {
  std::stringstream s;
  s << std::ifstream(path).rdbuf();
  return s.str();
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

TEST_F(AtomicFileTest, WritesTheBytesWithTheModeLessTheUmask) {
  ASSERT_TRUE(WriteFileAtomically(Path("secret"), "s3cret\n", 0600).ok());
  ASSERT_TRUE(WriteFileAtomically(Path("batch.sh"), "#!/bin/sh\n", 0777).ok());
  EXPECT_EQ(Read(Path("secret")), "s3cret\n");
  EXPECT_EQ(ModeOf(Path("secret")), 0600u);
  EXPECT_EQ(ModeOf(Path("batch.sh")), 0755u) << "0777 less the umask 022";
  EXPECT_EQ(Names(), (std::vector<std::string>{"batch.sh", "secret"}));
}

TEST_F(AtomicFileTest, ReplacesAnExistingFileAndItsMode) {
  std::ofstream(Path("port")) << "a much longer old content\n";
  ::chmod(Path("port").c_str(), 0644);
  ASSERT_TRUE(WriteFileAtomically(Path("port"), "50151\n", 0600).ok());
  EXPECT_EQ(Read(Path("port")), "50151\n");
  EXPECT_EQ(ModeOf(Path("port")), 0600u);
  EXPECT_EQ(Names(), std::vector<std::string>{"port"});
}

TEST_F(AtomicFileTest, AFailedWriteLeavesTheOldFileWholeAndNoTemporaryFile) {
  std::ofstream(Path("report.html")) << "the old page";
  absl::Status st;
  {
    FileSizeLimit limit(4096);  // the write fails part way
    ASSERT_TRUE(limit.ok());
    st = WriteFileAtomically(Path("report.html"), std::string(1 << 20, 'x'));
  }

  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(Path("report.html")), std::string::npos) << st;
  EXPECT_NE(st.message().find("too large"), std::string::npos) << st << ": errno's words";
  EXPECT_EQ(Read(Path("report.html")), "the old page");
  EXPECT_EQ(Names(), std::vector<std::string>{"report.html"});
}

TEST_F(AtomicFileTest, AFailedRenameLeavesNoTemporaryFile) {
  fs::create_directories(Path("taken/inside"));  // a directory cannot be replaced by a file
  absl::Status st = WriteFileAtomically(Path("taken"), "text");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot rename"), std::string::npos) << st;
  EXPECT_TRUE(fs::is_directory(Path("taken/inside")));
  EXPECT_EQ(Names(), std::vector<std::string>{"taken"});
}

TEST_F(AtomicFileTest, AMissingDirectoryIsAnErrorNamingThePath) {
  absl::Status st = WriteFileAtomically(Path("absent/file"), "text");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(Path("absent/file")), std::string::npos) << st;
  EXPECT_FALSE(fs::exists(Path("absent")));
}

TEST_F(AtomicFileTest, AStreamedFileAppearsOnlyAtCommitWithItsHeaderCompleted) {
  std::ofstream(Path("shard")) << "old";
  {
    AtomicFileWriter writer(Path("shard"), 0600);
    ASSERT_TRUE(writer.ok()) << writer.error();
    ASSERT_TRUE(writer.Write("HDR?"));
    ASSERT_TRUE(writer.Write(std::string(10000, 'd')));
    ASSERT_TRUE(writer.WriteAt(3, "!", 1));
    EXPECT_EQ(Read(Path("shard")), "old") << "not in place before Commit";
    ASSERT_TRUE(writer.Commit()) << writer.error();
  }
  const std::string text = Read(Path("shard"));
  EXPECT_EQ(text.substr(0, 4), "HDR!");
  EXPECT_EQ(text.size(), 10004u);
  EXPECT_EQ(Names(), std::vector<std::string>{"shard"});
}

TEST_F(AtomicFileTest, AWriterNotCommittedLeavesThePathAsItWas) {
  std::ofstream(Path("export.safetensors")) << "old";
  {
    AtomicFileWriter writer(Path("export.safetensors"));
    ASSERT_TRUE(writer.Write("half of a new file"));
  }  // an exception, say, before Commit
  {
    AtomicFileWriter writer(Path("fresh"));
    ASSERT_TRUE(writer.Write("never finished"));
  }
  EXPECT_EQ(Read(Path("export.safetensors")), "old");
  EXPECT_EQ(Names(), std::vector<std::string>{"export.safetensors"});
}

TEST_F(AtomicFileTest, TwoWritersOfOnePathEachHaveTheirOwnTemporaryFile) {
  AtomicFileWriter first(Path("f")), second(Path("f"));
  EXPECT_NE(first.temp_path(), second.temp_path());
  ASSERT_TRUE(first.Write("first") && second.Write("second"));
  ASSERT_TRUE(second.Commit());
  ASSERT_TRUE(first.Commit());
  EXPECT_EQ(Read(Path("f")), "first");
  EXPECT_EQ(Names(), std::vector<std::string>{"f"});
}

TEST_F(AtomicFileTest, AfterAFailureEveryCallFailsWithTheFirstError) {
  AtomicFileWriter writer(Path("absent/file"));
  EXPECT_FALSE(writer.ok());
  const std::string first = writer.error();
  EXPECT_NE(first.find("cannot create"), std::string::npos) << first;
  EXPECT_FALSE(writer.Write("x"));
  EXPECT_FALSE(writer.WriteAt(0, "x", 1));
  EXPECT_FALSE(writer.Commit());
  EXPECT_EQ(writer.error(), first);
}

// The bytes as given, whatever the mix of piece sizes: small ones gathered,
// large ones written through, a header completed over buffered bytes.
TEST_F(AtomicFileTest, PiecesOfEverySizeStreamInOrder) {
  std::string expected;
  AtomicFileWriter writer(Path("shard"));
  ASSERT_TRUE(writer.Write(std::string(8, '\0')));  // a header, completed below
  expected += std::string(8, '\0');
  size_t n = 1;
  for (int piece = 0; piece < 20; ++piece, n = n * 3 % (3 * AtomicFileWriter::kBufferBytes)) {
    const std::string bytes(n, static_cast<char>('a' + piece % 26));
    ASSERT_TRUE(writer.Write(bytes)) << writer.error();
    expected += bytes;
    EXPECT_EQ(writer.bytes_written(), expected.size());
  }
  ASSERT_TRUE(writer.WriteAt(0, "HEADER!!", 8));
  expected.replace(0, 8, "HEADER!!");
  ASSERT_TRUE(writer.Write("tail"));
  expected += "tail";
  EXPECT_EQ(writer.bytes_written(), expected.size());
  ASSERT_TRUE(writer.Commit()) << writer.error();
  EXPECT_TRUE(Read(Path("shard")) == expected) << "the file differs from the pieces written";
}

TEST_F(AtomicFileTest, SmallPiecesWaitInTheBufferAndLargeOnesGoStraightToTheFile) {
  AtomicFileWriter writer(Path("corpus"));
  ASSERT_TRUE(writer.Write("a few ids"));
  EXPECT_EQ(fs::file_size(writer.temp_path()), 0u) << "one write(2) per small piece";
  const std::string large(AtomicFileWriter::kBufferBytes, 'x');
  ASSERT_TRUE(writer.Write(large));
  EXPECT_EQ(fs::file_size(writer.temp_path()), 9 + large.size());
  EXPECT_FALSE(fs::exists(Path("corpus"))) << "in place only at Commit";
  ASSERT_TRUE(writer.Commit());
  EXPECT_EQ(fs::file_size(Path("corpus")), 9 + large.size());
}

TEST_F(AtomicFileTest, AFailedStreamedWriteNamesTheFileAndLeavesNoTemporaryFile) {
  std::ofstream(Path("model.safetensors")) << "the last export";
  bool wrote = true, committed = true;
  std::string error, temp_path;
  {
    FileSizeLimit limit(AtomicFileWriter::kBufferBytes / 2);
    ASSERT_TRUE(limit.ok());
    AtomicFileWriter writer(Path("model.safetensors"), 0644, TempName::kDotTmp);
    temp_path = writer.temp_path();
    for (int i = 0; i < 1000 && wrote; ++i) wrote = writer.Write(std::string(4096, 'w'));
    committed = writer.Commit();
    error = writer.error();
  }

  EXPECT_FALSE(wrote);
  EXPECT_FALSE(committed);
  EXPECT_EQ(temp_path, Path("model.safetensors.tmp"));
  EXPECT_EQ(error.rfind(Path("model.safetensors.tmp") + ": cannot write: ", 0), 0u) << error;
  EXPECT_NE(error.find("too large"), std::string::npos) << error << ": errno's words";
  EXPECT_EQ(Read(Path("model.safetensors")), "the last export");
  EXPECT_EQ(Names(), std::vector<std::string>{"model.safetensors"});
}

TEST_F(AtomicFileTest, ADotTmpWriterOverwritesACrashedWritersLeftoverAndRemovesItsOwn) {
  std::ofstream(Path("s.bin")) << "step 2";
  std::ofstream(Path("s.bin.tmp")) << "half of step 4, its writer killed";
  {
    AtomicFileWriter writer(Path("s.bin"), 0644, TempName::kDotTmp);
    ASSERT_TRUE(writer.Write("half of step 4 again"));
  }  // dropped before Commit
  EXPECT_EQ(Names(), std::vector<std::string>{"s.bin"});
  EXPECT_EQ(Read(Path("s.bin")), "step 2");
  AtomicFileWriter writer(Path("s.bin"), 0644, TempName::kDotTmp);
  ASSERT_TRUE(writer.Write("step 4") && writer.Commit()) << writer.error();
  EXPECT_EQ(Read(Path("s.bin")), "step 4");
  EXPECT_EQ(Names(), std::vector<std::string>{"s.bin"});
}

TEST_F(AtomicFileTest, AnErrorSaysTheFileWhatFailedAndWhy) {
  fs::create_directories(Path("s.bin.tmp"));  // where the temporary file would go
  AtomicFileWriter writer(Path("s.bin"), 0644, TempName::kDotTmp);
  EXPECT_FALSE(writer.ok());
  EXPECT_EQ(writer.error(), Path("s.bin.tmp") + ": cannot create: Is a directory");
  EXPECT_TRUE(fs::is_directory(Path("s.bin.tmp"))) << "not the writer's to remove";
}

}  // namespace
}  // namespace trellis
