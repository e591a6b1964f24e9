#include "common/unix_socket_liveness.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace trellis {
namespace {

namespace fs = std::filesystem;

// A unix socket bound at `path`, listening or not; -1 on failure.
int BoundSocket(const std::string& path, bool listening) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return -1;
  if (listening && ::listen(fd, 4) != 0) return -1;
  return fd;
}

class UnixSocketLivenessTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = "/tmp/usl_" + std::to_string(::getpid());  // short: sun_path holds 107 bytes
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(UnixSocketLivenessTest, NothingThereIsAbsent) {
  EXPECT_EQ(ProbeUnixSocket(dir_ + "/none.sock"), UnixSocketState::kAbsent);
}

TEST_F(UnixSocketLivenessTest, ASocketListenedOnIsServedAndOneLeftBehindIsStale) {
  const std::string path = dir_ + "/c.sock";
  int fd = BoundSocket(path, /*listening=*/true);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(ProbeUnixSocket(path), UnixSocketState::kServed);
  ::close(fd);  // the server died: its file stays
  ASSERT_TRUE(fs::exists(path));
  EXPECT_EQ(ProbeUnixSocket(path), UnixSocketState::kStale);
}

TEST_F(UnixSocketLivenessTest, ABoundSocketNobodyListensOnIsStale) {
  const std::string path = dir_ + "/b.sock";
  int fd = BoundSocket(path, /*listening=*/false);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(ProbeUnixSocket(path), UnixSocketState::kStale);
  ::close(fd);
}

TEST_F(UnixSocketLivenessTest, AFileOrALinkIsNotASocket) {
  const std::string file = dir_ + "/file";
  std::ofstream(file) << "x";
  EXPECT_EQ(ProbeUnixSocket(file), UnixSocketState::kNotASocket);
  // A link to a live socket is not followed: removing "it" would remove the link only.
  const std::string served = dir_ + "/s.sock";
  int fd = BoundSocket(served, /*listening=*/true);
  ASSERT_GE(fd, 0);
  fs::create_symlink(served, dir_ + "/link.sock");
  EXPECT_EQ(ProbeUnixSocket(dir_ + "/link.sock"), UnixSocketState::kNotASocket);
  ::close(fd);
}

}  // namespace
}  // namespace trellis
