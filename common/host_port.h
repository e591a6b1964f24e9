#pragma once
// HOST:PORT as the controller and worker take it on their command lines.

#include <string_view>

namespace trellis {

// HOST:PORT or [IPv6]:PORT, with a port in [min_port, 65535], a host of
// letters, digits, '.', '-' and '_' (or hex digits, ':' and '.' in brackets),
// and at most 255 characters in all.
bool IsHostPort(std::string_view address, int min_port = 1);

}  // namespace trellis
