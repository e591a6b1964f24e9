// Spec paths limited to the configured roots, on real files and symlinks.
#include "controller/app/spec_paths.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "controller/app/corpus_file_test_util.h"

namespace trellis::controller {
namespace {

namespace fs = std::filesystem;

TEST(SpecPathsTest, UnderARootByWholeComponents) {
  EXPECT_TRUE(IsUnderRoot("/data/a/b.corpus", "/data"));
  EXPECT_TRUE(IsUnderRoot("/data/a/b.corpus", "/data/"));
  EXPECT_TRUE(IsUnderRoot("/data", "/data"));
  EXPECT_TRUE(IsUnderRoot("/anything", "/"));
  EXPECT_FALSE(IsUnderRoot("/data2/b.corpus", "/data"));
  EXPECT_FALSE(IsUnderRoot("/dat", "/data"));
  EXPECT_FALSE(IsUnderRoot("/etc/passwd", "/data"));
}

class SpecPathsFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spec_paths_test_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "data");
    fs::create_directories(dir_ / "out");
    fs::create_directories(dir_ / "elsewhere");
    test_files::WriteCorpusShapedFile(dir_ / "data/ok.corpus");
    std::ofstream(dir_ / "elsewhere/secret.corpus") << "bytes";
    roots_ = {(dir_ / "data").string()};
  }
  void TearDown() override { fs::remove_all(dir_); }

  absl::Status Data(const std::string& path) {
    spec::RunSpec s;
    s.has_model = true;
    s.trainer.training.data = path;
    return CheckSpecPaths(s, roots_, (dir_ / "out").string());
  }

  fs::path dir_;
  std::vector<std::string> roots_;
};

TEST_F(SpecPathsFiles, ACorpusUnderARootIsAccepted) {
  EXPECT_TRUE(Data((dir_ / "data/ok.corpus").string()).ok());
  // A link inside the root to a file inside it.
  fs::create_symlink(dir_ / "data/ok.corpus", dir_ / "data/link.corpus");
  EXPECT_TRUE(Data((dir_ / "data/link.corpus").string()).ok());
}

TEST_F(SpecPathsFiles, ACorpusOutsideTheRootsIsRefusedNamingFieldPathAndRoots) {
  const std::string path = (dir_ / "elsewhere/secret.corpus").string();
  absl::Status st = Data(path);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "training.data: " + path +
                              " is not under a data root of this controller (--data-root) (" +
                              roots_[0] + ")");
  // Outside the roots nothing is said about the file: absent reads the same.
  st = Data((dir_ / "elsewhere/absent.corpus").string());
  EXPECT_NE(st.message().find("is not under a data root"), std::string::npos) << st.message();
}

TEST_F(SpecPathsFiles, ASymlinkOrDotDotOutOfARootIsRefused) {
  fs::create_symlink(dir_ / "elsewhere/secret.corpus", dir_ / "data/escape.corpus");
  absl::Status st = Data((dir_ / "data/escape.corpus").string());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("(resolves to " + (dir_ / "elsewhere/secret.corpus").string() +
                              ")"),
            std::string::npos)
      << st.message();
  // A linked directory, and "..".
  fs::create_directory_symlink(dir_ / "elsewhere", dir_ / "data/dir");
  EXPECT_EQ(Data((dir_ / "data/dir/secret.corpus").string()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Data((dir_ / "data/../elsewhere/secret.corpus").string()).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SpecPathsFiles, InsideARootTheFileMustBeReadableAndThePathAbsolute) {
  absl::Status st = Data((dir_ / "data/absent.corpus").string());
  EXPECT_NE(st.message().find("is not a readable file"), std::string::npos) << st.message();
  st = Data("data/ok.corpus");
  EXPECT_NE(st.message().find("training.data: must be an absolute path"), std::string::npos);
  spec::RunSpec command_run;  // not [model]: training.data is not read
  command_run.trainer.training.data = "/etc/passwd";
  EXPECT_TRUE(CheckSpecPaths(command_run, roots_, (dir_ / "out").string()).ok());
}

// The corpus's header is read at submit: a file that is no corpus, or one the
// model cannot take, is refused before the run waits in the queue.
TEST_F(SpecPathsFiles, TheCorpusHeaderIsCheckedAgainstTheModel) {
  const std::string path = (dir_ / "data/c.corpus").string();
  auto with = [&](int64_t seq_len = 512) {
    spec::RunSpec s;
    s.has_model = true;
    s.trainer.training.data = path;
    s.trainer.model.vocab = 1000;
    s.trainer.training.seq_len = static_cast<int>(seq_len);
    return CheckSpecPaths(s, roots_, (dir_ / "out").string());
  };
  test_files::WriteCorpusShapedFile(path, 1000, 4096);
  EXPECT_TRUE(with().ok()) << with().message();
  EXPECT_EQ(with(4096).message(),
            "training.data: " + path +
                " has 4096 tokens, fewer than one row of training.seq_len + 1 = 4097");
  test_files::WriteCorpusShapedFile(path, 1001, 4096);
  EXPECT_EQ(with().message(),
            "training.data: " + path + " has vocab 1001, larger than model.vocab = 1000");

  std::ofstream(path) << "a text file, not a corpus: tokenize it first\n";
  absl::Status st = with();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "training.data: " + path +
                              " is not a corpus Trellis can read: not a corpus file (bad magic) "
                              "(write one with trellis-corpus build or synthetic)");
  std::ofstream(path) << "short";
  EXPECT_NE(with().message().find("truncated: 5 bytes, shorter than the header"),
            std::string::npos);
  test_files::WriteCorpusShapedFile(path, 1000, 4096);
  fs::resize_file(path, fs::file_size(path) - 1);
  EXPECT_NE(with().message().find("bytes, the header implies"), std::string::npos)
      << with().message();
}

TEST_F(SpecPathsFiles, AnOutputDirLinkedOutOfTheOutputRootIsRefused) {
  spec::RunSpec s;
  s.job.output_dir = "team/a";
  EXPECT_TRUE(CheckSpecPaths(s, roots_, (dir_ / "out").string()).ok()) << "not made yet: fine";
  fs::create_directory_symlink(dir_ / "elsewhere", dir_ / "out/link");
  s.job.output_dir = "link/runs";
  absl::Status st = CheckSpecPaths(s, roots_, (dir_ / "out").string());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message().rfind("job.output_dir: ", 0), 0u) << st.message();
}

TEST(SpecPathsDefaults, TheOwnersHomeAndTheOutputRoot) {
  auto roots = DefaultDataRoots("/srv/trellis/runs");
  ASSERT_FALSE(roots.empty());
  EXPECT_EQ(roots.back(), "/srv/trellis/runs");
  for (const auto& r : roots) EXPECT_NE(r, "/") << "a home of / would admit every path";
  EXPECT_TRUE(CheckDataRoots(roots).ok());
  absl::Status st = CheckDataRoots({"/data", "relative/dir"});
  EXPECT_EQ(st.message(), "--data-root relative/dir: must be an absolute path");
  st = CheckDataRoots({"/data\n/etc"});
  EXPECT_EQ(st.message(), "--data-root /data\n/etc: must not contain a newline");
}

TEST_F(SpecPathsFiles, ARelativeCorpusIsFoundUnderTheFirstRootThatHasIt) {
  const std::string data = (dir_ / "data").string(), out = (dir_ / "out").string();
  EXPECT_EQ(*ResolveTrainingData("ok.corpus", {out, data}), data + "/ok.corpus");
  EXPECT_EQ(*ResolveTrainingData("/abs/x.corpus", {data}), "/abs/x.corpus") << "as given";
  auto missing = ResolveTrainingData("none.corpus", {data, out});
  EXPECT_EQ(missing.status().message(),
            "training.data: \"none.corpus\" is in no data root of this controller (looked for " +
                data + "/none.corpus, " + out + "/none.corpus); build it in one (trellis-corpus "
                "build " + data + "/none.corpus TEXT_DIR...) or give an absolute path");
  EXPECT_NE(ResolveTrainingData("../elsewhere/secret.corpus", {data}).status().message().find(
                "without '..'"),
            std::string::npos);
}

}  // namespace
}  // namespace trellis::controller
