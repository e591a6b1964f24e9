#pragma once
// Test helper: a gloo Comm for a rank forked by testing::RunRanks
// (multiprocess.h), meeting the others on 127.0.0.1:`port`.

#include <chrono>
#include <memory>

#include "trainer_core/parallel/comm.h"
#include "trainer_core/torch_api.h"

namespace trellis::train::testing {

inline std::unique_ptr<Comm> ConnectLocalRank(int rank, int world, int port,
                                              std::chrono::seconds timeout) {
  torch::set_num_threads(1);  // ranks share the machine's cores
  CommOptions o;
  o.rank = rank;
  o.world = world;
  o.master_port = port;
  o.timeout = timeout;
  return ConnectComm(o);
}

}  // namespace trellis::train::testing
