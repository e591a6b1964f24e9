#pragma once
// The run spec most controller tests submit: "hello", 2 nodes x 2 ranks. Shared
// by the whole-controller tests (controller_fixture.h) and the part tests
// (part_test_util.h).

namespace trellis::controller {

inline const char* kSpec = R"(
[job]
name = "hello"
command = "echo hi"
[slurm]
nodes = 2
ranks_per_node = 2
)";

}  // namespace trellis::controller
