#pragma once
// What the tests of the controller's parts share: a part's context over a
// FakeStoreView and a FakeClock, and reading the commands a part returned.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/clock.h"
#include "controller/app/effects.h"
#include "controller/app/fake_store_view.h"
#include "controller/app/hello_spec_test_util.h"
#include "controller/app/loop_context.h"
#include "controller/app/sbatch_template.h"

namespace trellis::controller {

// A part's world: configuration, the store as read, the clock, and an
// output root in a temporary directory.
class PartTest : public ::testing::Test {
 protected:
  PartTest() {
    root_ = std::filesystem::temp_directory_path() /
            ("part_test_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    config_.output_root = (root_ / "out").string();
    config_.data_roots = {root_.string()};
    config_.worker_bin = "/opt/trellis/bin/trellis-worker";
    config_.advertise_addr = "127.0.0.1:7000";
    config_.sbatch_template = kSbatchTemplate;
  }
  ~PartTest() override { std::filesystem::remove_all(root_); }

  // A run "hello-<seq>" of kSpec (or `spec`) in `state`.
  RunRecord& AddRun(RunState state, int64_t seq = 1, const std::string& spec = kSpec) {
    std::string id = "hello-" + std::to_string(seq);
    RunRecord& run = store_.AddRun("hello", seq, spec, state, config_.output_root + "/" + id);
    run.nodes = 2;  // as kSpec says
    run.ranks_per_node = 2;
    return run;
  }

  std::filesystem::path root_;
  ControllerConfig config_;
  FakeStoreView store_;
  FakeClock clock_;
  LoopContext ctx_{config_, store_, clock_};
};

// The only command of kind C in `fx` (a test failure if there is not exactly one).
template <typename C>
C Only(const Effects& fx) {
  auto all = fx.All<C>();
  EXPECT_EQ(all.size(), 1u) << "commands of the kind asked for";
  return all.empty() ? C{} : *all[0];
}

// The value a SendReply carries, as T (a test failure if it is an error or another type).
template <typename T>
T Replied(const SendReply& r) {
  if (auto* error = std::get_if<absl::Status>(&r.value)) {
    ADD_FAILURE() << "replied with an error: " << error->ToString();
    return T{};
  }
  const T* v = std::get_if<T>(&r.value);
  EXPECT_NE(v, nullptr) << "replied with another type";
  return v ? *v : T{};
}
inline absl::Status RepliedError(const SendReply& r) {
  auto* error = std::get_if<absl::Status>(&r.value);
  return error ? *error : absl::OkStatus();
}

}  // namespace trellis::controller
