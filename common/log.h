#pragma once
// Logging: spdlog, one line per event, to stderr. Components call
// InitLogging once in main.

#include <string>

#include <spdlog/spdlog.h>

namespace trellis {

// level: trace, debug, info, warn, error. Prefixes lines with `component`.
void InitLogging(const std::string& component, const std::string& level = "info");

}  // namespace trellis
