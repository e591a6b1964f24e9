#include "controller/shell/socket_path.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace trellis::controller {
namespace {

namespace fs = std::filesystem;

class SocketPathTest : public testing::Test {
 protected:
  void SetUp() override {
    root_ = "/tmp/sp_" + std::to_string(::getpid());  // short: sun_path holds 107 bytes
    fs::remove_all(root_);
    fs::create_directories(root_);
    ::chmod(root_.c_str(), 0700);
  }
  void TearDown() override {
    if (fd_ >= 0) ::close(fd_);
    fs::remove_all(root_);
  }
  // Binds a unix socket at `path`; listening: a live controller.
  void Bind(const std::string& path, bool listening) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    if (listening) {
      ASSERT_EQ(::listen(fd_, 4), 0);
    }
  }
  std::string root_;
  int fd_ = -1;
};

TEST_F(SocketPathTest, MakesTheDirectoryPrivate) {
  const std::string path = root_ + "/ctl/controller.sock";
  ASSERT_TRUE(PrepareSocketPath(path).ok());
  struct stat st {};
  ASSERT_EQ(::stat((root_ + "/ctl").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(SocketPathTest, RemovesTheSocketOfAControllerThatDied) {
  const std::string path = root_ + "/controller.sock";
  Bind(path, /*listening=*/true);
  ::close(fd_);
  fd_ = -1;
  ASSERT_TRUE(fs::exists(path));
  ASSERT_TRUE(PrepareSocketPath(path).ok());
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(SocketPathTest, RefusesTheSocketOfARunningControllerAndKeepsIt) {
  const std::string path = root_ + "/controller.sock";
  Bind(path, /*listening=*/true);
  absl::Status st = PrepareSocketPath(path);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("served by a running controller"), std::string::npos) << st;
  EXPECT_TRUE(fs::exists(path));
}

TEST_F(SocketPathTest, LeavesAnythingElseAlone) {
  const std::string path = root_ + "/controller.sock";
  std::ofstream(path) << "a user's file";
  absl::Status st = PrepareSocketPath(path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("is not a socket"), std::string::npos) << st;
  EXPECT_TRUE(fs::exists(path));
  EXPECT_FALSE(PrepareSocketPath("relative/controller.sock").ok());
}

}  // namespace
}  // namespace trellis::controller
