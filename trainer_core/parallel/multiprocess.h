#pragma once
// Test helper: runs a body in `world` forked rank processes and collects each
// one's outcome, killing them all if any is still running at the deadline.
// The parent does no LibTorch work (a forked child cannot use an OpenMP pool
// its parent started), so every tensor lives in the children. Torch-free.

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace trellis::train::testing {

struct RankOutcome {
  bool ok = false;
  std::string message;  // what the body returned or threw; "killed: ..." on timeout
};

// Binds a loopback socket to `port` (0: any the kernel gives) and closes it;
// the port it got, 0 when the bind failed.
inline int BindLoopbackOnce(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                     ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  return bound ? ntohs(addr.sin_port) : 0;
}

// A port nothing listens on right now, for a rendezvous the ranks bind
// later. Drawn below the kernel's ephemeral range (32768 and up): a port from
// port 0 is ephemeral, and any process's outgoing connection may take it
// before the rank binds it (a test that failed with "Address already in use"
// beside the e2e tests). Random, so that tests drawing at once rarely meet.
inline int FreePort() {
  std::random_device seed;
  std::mt19937 gen(seed() ^ static_cast<unsigned>(::getpid()));
  std::uniform_int_distribution<int> below_ephemeral(20000, 32000);
  for (int tries = 0; tries < 100; ++tries) {
    const int port = below_ephemeral(gen);
    if (BindLoopbackOnce(port) == port) return port;
  }
  return BindLoopbackOnce(0);  // all taken: any the kernel gives
}

// Reads every pipe until its writer closes it or `timeout` passes; returns
// what each sent and sets closed[r] for the ones that finished in time.
// `on_data(r, bytes)` sees each chunk as it arrives and `on_closed(r)` each
// pipe as it closes (either may be empty).
inline std::vector<std::string> ReadUntilClosed(
    const std::vector<int>& fds, std::chrono::milliseconds timeout, std::vector<bool>* closed,
    const std::function<void(size_t, std::string_view)>& on_data = nullptr,
    const std::function<void(size_t)>& on_closed = nullptr) {
  const size_t world = fds.size();
  std::vector<std::string> text(world);
  closed->assign(world, false);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (size_t open = world; open > 0;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    std::vector<pollfd> pfds;
    std::vector<size_t> who;
    for (size_t r = 0; r < world; ++r)
      if (!(*closed)[r]) {
        pfds.push_back({fds[r], POLLIN, 0});
        who.push_back(r);
      }
    if (::poll(pfds.data(), pfds.size(), static_cast<int>(left.count())) <= 0) continue;
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (pfds[i].revents == 0) continue;
      char buf[4096];
      ssize_t n = ::read(pfds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        text[who[i]].append(buf, n);
        if (on_data) on_data(who[i], std::string_view(buf, n));
      } else {
        (*closed)[who[i]] = true;
        --open;
        if (on_closed) on_closed(who[i]);
      }
    }
  }
  return text;
}

// body(rank) returns "" on success or a failure message; exceptions count as
// failures. Children end with _exit, never returning into the test runner.
inline std::vector<RankOutcome> RunRanks(int world, std::chrono::seconds timeout,
                                         const std::function<std::string(int)>& body) {
  std::vector<pid_t> pids(world, -1);
  std::vector<int> fds(world, -1);
  for (int r = 0; r < world; ++r) {
    int p[2];
    if (::pipe(p) != 0) std::abort();
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      for (int i = 0; i < r; ++i) ::close(fds[i]);
      std::string msg;
      try {
        msg = body(r);
      } catch (const std::exception& e) {
        msg = std::string("exception: ") + e.what();
      }
      if (msg.empty()) msg = "\x01";  // success marker
      (void)!::write(p[1], msg.data(), msg.size());
      ::close(p[1]);
      ::_exit(msg == "\x01" ? 0 : 1);
    }
    ::close(p[1]);
    pids[r] = pid;
    fds[r] = p[0];
  }
  std::vector<RankOutcome> out(world);
  std::vector<bool> done;
  std::vector<std::string> text = ReadUntilClosed(fds, timeout, &done);
  for (int r = 0; r < world; ++r) {
    if (!done[r]) {
      ::kill(pids[r], SIGKILL);
      out[r].message = "killed: still running after " + std::to_string(timeout.count()) + "s";
    }
    int status = 0;
    ::waitpid(pids[r], &status, 0);
    ::close(fds[r]);
    if (done[r]) {
      out[r].ok = text[r] == "\x01" && WIFEXITED(status) && WEXITSTATUS(status) == 0;
      out[r].message = text[r] == "\x01" ? "" : text[r];
      if (!out[r].ok && out[r].message.empty())
        out[r].message = "exited without a report (status " + std::to_string(status) + ")";
    }
  }
  return out;
}

// All ranks' failures as one string ("" when every rank succeeded).
inline std::string Failures(const std::vector<RankOutcome>& outcomes) {
  std::string s;
  for (size_t r = 0; r < outcomes.size(); ++r)
    if (!outcomes[r].ok) s += "rank " + std::to_string(r) + ": " + outcomes[r].message + "\n";
  return s;
}

}  // namespace trellis::train::testing
