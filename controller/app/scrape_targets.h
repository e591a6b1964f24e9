#pragma once
// The Prometheus file-based service-discovery file of the live workers'
// /metrics (docs/architecture.md, "The controller's metrics"): one entry per worker of a
// running launch (a GO node) that sent its address in Register, labelled with
// its run and node:
//   [{"targets": ["host-a:9400"], "labels": {"run": "hello-1", "node": "node1"}}, ...]
// A launch's entries come with its GO and go when it settles or its run is
// aborted or ends. The file is replaced whole (written beside it, renamed),
// so Prometheus never reads half of it. Loop thread only.

#include <map>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/host_port.h"
#include "controller/app/effects.h"

namespace trellis::controller {

class ScrapeTargets {
 public:
  // An empty `path`: no file is written.
  explicit ScrapeTargets(std::string path) : path_(std::move(path)) {}

  // A launch passed the gate: node -> host:port of its worker's /metrics.
  void Add(const LaunchRef& launch, std::map<std::string, std::string> addresses);
  void Remove(const LaunchRef& launch);
  void RemoveRun(const std::string& run_id);
  // Rewrites the file if the targets changed since it was last written (the
  // first call always writes it, empty at start).
  absl::Status Flush();
  std::string Json() const;

 private:
  std::string path_;
  std::map<LaunchRef, std::map<std::string, std::string>> launches_;
  bool dirty_ = true;
};

}  // namespace trellis::controller
