#pragma once
// Whether a host allocation of a given size fits the memory this rank may
// still take, before it is made. A rank bound to one socket (numactl
// --membind, as the worker launches ranks on a node with sockets) is killed
// when that NUMA node runs out, however much the others have; a Slurm job
// with its memory constrained is killed at its cgroup's limit. A copy that
// would not fit is better not taken: checkpoint.async writes in place then.
// Torch-free.

#include <cstdint>
#include <string>
#include <vector>

namespace trellis::train {

// One limit on the host memory this rank can take.
struct MemoryBound {
  std::string where;       // "NUMA node 1", "cgroup /slurm/job_7", "the host"
  int64_t available = 0;   // bytes it can still give (free, plus page cache it can drop)
  int64_t total = 0;       // the limit itself
  // The ranks that take the same allocation from it at once, this one
  // included (SetRanksSharing): the ranks of one host share its memory and
  // its job's cgroups, the ranks bound to one socket its NUMA node.
  int ranks = 1;
};

// The bounds on this process, read under `root` ("" or "/": the machine;
// a test's fixture tree otherwise): the NUMA nodes in `bound_nodes` (their
// sum), else the host (/proc/meminfo); and every cgroup (v2 or v1 memory)
// from the process's own up to the root that has a limit. Figures that
// cannot be read are left out (no bound known there).
std::vector<MemoryBound> ReadMemoryBounds(const std::string& root,
                                          const std::vector<int>& bound_nodes);

// The NUMA nodes the calling thread's memory policy binds it to
// (MPOL_BIND, as numactl --membind sets); empty when it is not bound (any
// node may serve it).
std::vector<int> MemoryBindNodes();

// Empty when `bytes` from each of a bound's `ranks` fit every bound with
// `keep_free` bytes left; otherwise why not, naming the tightest bound:
// "NUMA node 1 has 5.10 GiB available of 120.00 GiB; 6.20 GiB would leave
// less than 4.00 GiB free" ("2 ranks x 6.20 GiB" where ranks share it).
std::string WhyItDoesNotFit(int64_t bytes, const std::vector<MemoryBound>& bounds,
                            int64_t keep_free);

// A key for each bound that names it machine-wide: `host` (this machine's
// name) and the bound's `where`; never 0.
std::vector<uint64_t> BoundKeys(const std::string& host, const std::vector<MemoryBound>& bounds);

// Sets bound i's `ranks` to the number of ranks whose keys hold mine[i]:
// `all` is every rank's keys (BoundKeys) side by side, 0 where a rank has
// fewer. A rank's keys are distinct, so each rank counts once.
void SetRanksSharing(const std::vector<uint64_t>& all, const std::vector<uint64_t>& mine,
                     std::vector<MemoryBound>* bounds);

// Gives each of `bounds` (read now) the `ranks` of the bound of `counted`
// (read when the ranks were counted) with the same `where`; 1 where none.
void CopyRanks(const std::vector<MemoryBound>& counted, std::vector<MemoryBound>* bounds);

// This rank's bounds as they are now (ReadMemoryBounds of its binding), each
// with the ranks counted in `counted` (memory/shared_bounds.h).
std::vector<MemoryBound> ReadMemoryBoundsCounted(const std::vector<MemoryBound>& counted);

// Parsers, for the tests: kB figures of /proc/meminfo or a node's meminfo
// ("Node 0 MemFree: 123 kB"); -1 when the key is absent.
int64_t MeminfoBytes(const std::string& text, const std::string& key);
// A cgroup's memory.stat figure (bytes); -1 when absent.
int64_t CgroupStat(const std::string& text, const std::string& key);

}  // namespace trellis::train
