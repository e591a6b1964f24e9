#pragma once
// Whether a unix socket's path belongs to a live server. A server that died
// leaves its socket file behind; the next one must tell that stale file from a
// socket that another live process still serves (two servers on one path: the
// second's bind would take the path from the first's clients).

#include <string>

namespace trellis {

enum class UnixSocketState {
  kAbsent,      // nothing at the path
  kServed,      // a socket a process accepts connections on
  kStale,       // a socket nobody listens on: safe to remove
  kNotASocket,  // something else: never removed
};

// Looks at `path` (without following a link) and, for a socket, connects to it.
UnixSocketState ProbeUnixSocket(const std::string& path);

}  // namespace trellis
