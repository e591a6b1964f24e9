// How long a checkpoint takes to write and to read back: the state of one
// rank of the spec's model (its parameters and both optimizers' slots, the
// tensors a trainer saves) is saved with SaveCheckpoint and loaded with
// LoadCheckpoint into zeroed tensors of the same shapes, --repeats times. Each
// load is checked equal to what was saved. A read is timed twice: from the
// page cache (a rank relaunched on the node that wrote it) and after the
// shard's pages are dropped (posix_fadvise DONTNEED; the disk, or a node
// that did not write it). Each save and page-cache read also gives the host
// memory it added at its peak (resident set, Linux's VmHWM reset before it):
// what a checkpoint costs a node's host memory. One JSON object per repeat on
// standard output (bench/checkpoint/run.sh tables them).
//   checkpoint_io SPEC --layers 2 --device cuda --dir /tmp/ckpt --repeats 3
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "common/spec/trainer_spec.h"
#include "trainer_core/checkpoint/checkpoint.h"
#include "trainer_core/error.h"
#include "trainer_core/files.h"
#include "trainer_core/model/model.h"
#include "trainer_core/optim/optim.h"

using namespace trellis;
using namespace trellis::train;

namespace {

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void Sync(torch::Device device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

// Drops the step's files from the page cache (they were fsynced: clean pages).
void DropFromPageCache(const std::string& step_dir) {
  for (const auto& name : ListDir(step_dir)) {
    const std::string path = JoinPath(step_dir, name);
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) throw TrainError(path + ": cannot open");
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM").
int64_t StatusBytes(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(key + ":", 0) == 0) return std::stoll(line.substr(key.size() + 1)) * 1024;
  throw TrainError("/proc/self/status has no " + key);
}

// Runs `f` and returns the resident memory it added at its peak.
template <typename F>
int64_t PeakAddedBytes(F f) {
  std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM := VmRSS
  const int64_t before = StatusBytes("VmRSS");
  f();
  return StatusBytes("VmHWM") - before;
}

bool AllEqual(const NamedTensors& a, const NamedTensors& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (!torch::equal(a[i].second, b[i].second)) return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Times SaveCheckpoint and LoadCheckpoint on one rank's state of a model"};
  std::string spec_path, dir, device_name = "cpu";
  int layers = 0, repeats = 3;
  app.add_option("spec", spec_path, "trainer spec (TOML) whose model is saved")->required();
  app.add_option("--dir", dir, "checkpoint directory (emptied first)")->required();
  app.add_option("--layers", layers, "override model.layers (0: the spec's)");
  app.add_option("--device", device_name, "where the state lives: cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--repeats", repeats, "save + load rounds")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    spec::FieldErrors errors;
    auto spec = spec::ParseTrainerSections(toml::parse_file(spec_path), &errors);
    if (!errors.empty()) throw TrainError(spec_path + ": " + spec::JoinErrors(errors));
    if (layers > 0) spec.model.layers = layers;
    const torch::Device device(device_name == "cuda" ? torch::kCUDA : torch::kCPU);
    if (device.is_cuda() && !torch::cuda::is_available())
      throw TrainError("--device cuda: no CUDA device is visible");

    torch::NoGradGuard no_grad;
    Model model(spec.model, spec.training.seq_len, spec.training.seed, device, torch::kFloat);
    Muon muon(SlotsFor(model.blocks(), Optim::kMuon), {});
    AdamW adamw(SlotsFor(model.blocks(), Optim::kAdamW), {});
    NamedTensors state;
    for (auto& b : model.blocks()) state.emplace_back("param." + b.layout->name, b.flat);
    for (auto& t : muon.State()) state.push_back(t);
    for (auto& t : adamw.State()) state.push_back(t);
    uint64_t bytes = 0;
    NamedTensors loaded;
    for (auto& [name, t] : state) {
      if (t.is_floating_point()) t.normal_();  // optimizer slots start at zero: fill them too
      bytes += t.nbytes();
      loaded.emplace_back(name, torch::zeros_like(t));
    }
    Sync(device);

    RemoveTree(dir);
    MakeDirs(dir);
    for (int i = 0; i < repeats; ++i) {
      const int64_t step = i + 1;
      auto start = std::chrono::steady_clock::now();
      const int64_t save_peak = PeakAddedBytes(
          [&] { SaveCheckpoint(dir, spec, {step, 0, 0}, state, /*keep=*/1); });
      const double save_s = Since(start);

      for (auto& [name, t] : loaded) t.zero_();
      Sync(device);
      start = std::chrono::steady_clock::now();
      CheckpointMeta warm;
      const int64_t load_peak = PeakAddedBytes([&] {
        warm = LoadCheckpoint(dir, step, spec, loaded);
        Sync(device);
      });
      const double load_warm_s = Since(start);
      const bool warm_equal = AllEqual(state, loaded);

      for (auto& [name, t] : loaded) t.zero_();
      DropFromPageCache(StepDir(dir, step));
      Sync(device);
      start = std::chrono::steady_clock::now();
      LoadCheckpoint(dir, step, spec, loaded);
      Sync(device);
      const double load_cold_s = Since(start);
      const bool cold_equal = AllEqual(state, loaded);
      if (!warm_equal || !cold_equal)
        throw TrainError("a loaded tensor differs from the saved one");

      const double gib = static_cast<double>(bytes) / (1ull << 30);
      nlohmann::json row = {{"repeat", i + 1},
                            {"device", device_name},
                            {"layers", spec.model.layers},
                            {"tensors", state.size()},
                            {"state_gib", gib},
                            {"shard_gib", static_cast<double>(warm.bytes_read) / (1ull << 30)},
                            {"save_s", save_s},
                            {"load_page_cache_s", load_warm_s},
                            {"load_disk_s", load_cold_s},
                            {"save_gib_per_s", gib / save_s},
                            {"load_page_cache_gib_per_s", gib / load_warm_s},
                            {"load_disk_gib_per_s", gib / load_cold_s},
                            {"save_host_peak_added_gib", save_peak / double(1ull << 30)},
                            {"load_host_peak_added_gib", load_peak / double(1ull << 30)}};
      std::cout << row.dump() << std::endl;
    }
    RemoveTree(dir);
  } catch (const std::exception& e) {
    std::cerr << "checkpoint_io: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
