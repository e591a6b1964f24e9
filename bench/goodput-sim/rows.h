#pragma once
// The rows the benchmark reports: the three strategies of the scenario, and
// the extra rows, each changing one stated assumption.

#include <string>
#include <vector>

#include "bench/goodput-sim/scenario.h"

namespace trellis::bench {

struct Row {
  Strategy strategy;
  Scenario scenario;
};

std::vector<Row> BenchRows();

}  // namespace trellis::bench
