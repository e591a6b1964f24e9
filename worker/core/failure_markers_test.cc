#include "worker/core/failure_markers.h"

#include <gtest/gtest.h>

#include "common/failure_marker_names.h"

namespace trellis::worker {
namespace {

struct TailCase {
  const char* name;
  std::string tail;
  std::vector<std::string> markers;
  std::string line;
};

void PrintTo(const TailCase& c, std::ostream* os) { *os << c.name; }

// Every marker the controller accepts (common/failure_marker_names.h), in its
// order, and no other: a tail with text of each sets all of them.
TEST(ScanLogTail, ReportsTheMarkerNamesTheControllerAccepts) {
  LogEvidence e = ScanLogTail(
      "trellis rank: damaged checkpoint step 4: x\nConnection refused\nXid 79\n"
      "collective operation timeout\nNCCL error\nstd::bad_alloc\nCUDA out of memory\n");
  EXPECT_EQ(e.markers,
            std::vector<std::string>(kFailureMarkerNames.begin(), kFailureMarkerNames.end()));
}

class ScanLogTailTest : public ::testing::TestWithParam<TailCase> {};

TEST_P(ScanLogTailTest, FindsMarkersAndTheLine) {
  LogEvidence e = ScanLogTail(GetParam().tail);
  EXPECT_EQ(e.markers, GetParam().markers);
  EXPECT_EQ(e.line, GetParam().line);
}

INSTANTIATE_TEST_SUITE_P(
    Table, ScanLogTailTest,
    ::testing::Values(
        TailCase{"TorchCudaOom",
                 "step 41 loss 2.31\n"
                 "Traceback (most recent call last):\n"
                 "  File \"/opt/train.py\", line 88, in <module>\n"
                 "    loss.backward()\n"
                 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 "
                 "has a total capacity of 79.15 GiB of which 3.12 GiB is free.\n"
                 "[rank3]:[W1107 10:01:02.123 ProcessGroupNCCL.cpp:1168] Warning: "
                 "WARNING: process group has NOT been destroyed before we destruct "
                 "ProcessGroupNCCL.\n",
                 {"device_oom"},
                 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 "
                 "has a total capacity of 79.15 GiB of which 3.12 GiB is free."},
        TailCase{"LibTorchCudaOom",
                 "terminate called after throwing an instance of 'c10::OutOfMemoryError'\n"
                 "  what():  CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 79.10 GiB "
                 "total capacity)\n"
                 "Exception raised from malloc at ../c10/cuda/CUDACachingAllocator.cpp:1073\n",
                 {"device_oom"},
                 "what():  CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 79.10 GiB "
                 "total capacity)"},
        TailCase{"CublasAllocFailed",
                 "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling "
                 "`cublasCreate(handle)`\n",
                 {"device_oom"},
                 "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling "
                 "`cublasCreate(handle)`"},
        TailCase{"HostOomPython",
                 "  File \"/opt/data.py\", line 12, in load\n"
                 "    buf = np.empty(n, dtype=np.uint8)\n"
                 "MemoryError: Unable to allocate 512. GiB for an array with shape "
                 "(549755813888,) and data type uint8\n",
                 {"host_oom"},
                 "MemoryError: Unable to allocate 512. GiB for an array with shape "
                 "(549755813888,) and data type uint8"},
        TailCase{"HostOomCpp",
                 "terminate called after throwing an instance of 'std::bad_alloc'\n"
                 "  what():  std::bad_alloc\n",
                 {"host_oom"},
                 "what():  std::bad_alloc"},
        TailCase{"HostOomErrno",
                 "OSError: [Errno 12] Cannot allocate memory\n",
                 {"host_oom"},
                 "OSError: [Errno 12] Cannot allocate memory"},
        TailCase{"NcclSystemErrorAndNetwork",
                 "node3:1234:5678 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/IB/0\n"
                 "node3:1234:5690 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection "
                 "closed by remote peer node4<38542>\n"
                 "node3:1234:5690 [0] NCCL WARN Net : Call to recv from 10.0.0.4<38542> failed "
                 ": Connection reset by peer\n"
                 "torch.distributed.DistBackendError: NCCL error in: "
                 "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system "
                 "error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3\n"
                 "ncclSystemError: System call (e.g. socket, malloc) or external library call "
                 "failed or device error.\n"
                 "Last error:\n"
                 "socketProgress: Connection closed by remote peer node4<38542>\n",
                 {"nccl_error", "network"},
                 "ncclSystemError: System call (e.g. socket, malloc) or external library call "
                 "failed or device error."},
        TailCase{"NcclRemoteError",
                 "RuntimeError: NCCL communicator was aborted on rank 5. Original reason for "
                 "failure was: NCCL error: remote process exited or there was a network error, "
                 "NCCL version 2.20.5\nncclRemoteError: A call failed possibly due to a network "
                 "error or a remote process exiting prematurely.\n",
                 {"nccl_error"},
                 "ncclRemoteError: A call failed possibly due to a network error or a remote "
                 "process exiting prematurely."},
        TailCase{"WatchdogTimeout",
                 "[rank1]:[E1107 10:11:45.456 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught "
                 "collective operation timeout: WorkNCCL(SeqNum=4021, OpType=ALLREDUCE, "
                 "NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600020 "
                 "milliseconds before timing out.\n"
                 "[rank1]:[E1107 10:11:45.460 ProcessGroupNCCL.cpp:1413] [PG 0 Rank 1] "
                 "Exception (either an error or timeout) detected by watchdog at work: 4021\n",
                 {"nccl_timeout"},
                 "[rank1]:[E1107 10:11:45.456 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught "
                 "collective operation timeout: WorkNCCL(SeqNum=4021, OpType=ALLREDUCE, "
                 "NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for 600020 "
                 "milliseconds before timing out."},
        TailCase{"EccError",
                 "RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
                 "CUDA kernel errors might be asynchronously reported at some other API call, so "
                 "the stacktrace below might be incorrect.\n"
                 "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n",
                 {"device_error"},
                 "RuntimeError: CUDA error: uncorrectable ECC error encountered"},
        TailCase{"XidAndFallenOffTheBus",
                 "NVRM: Xid (PCI:0000:3b:00): 79, pid=2311, GPU has fallen off the bus.\n",
                 {"device_error"},
                 "NVRM: Xid (PCI:0000:3b:00): 79, pid=2311, GPU has fallen off the bus."},
        TailCase{"RendezvousRefused",
                 "torch.distributed.DistNetworkError: The client socket has failed to connect to "
                 "[node1]:29500 (errno: 111 - Connection refused).\n",
                 {"network"},
                 "torch.distributed.DistNetworkError: The client socket has failed to connect to "
                 "[node1]:29500 (errno: 111 - Connection refused)."},
        TailCase{"SeveralMarkersInTheFixedOrderLastMatchingLine",
                 "Connection reset by peer\n"
                 "RuntimeError: CUDA error: out of memory\n"
                 "exiting\n",
                 {"device_oom", "network"},
                 "RuntimeError: CUDA error: out of memory"},
        TailCase{"ADamagedCheckpointNamesTheStepAndTheFile",
                 "[W ProcessGroupGloo.cpp:721] Warning: Connection refused\n"
                 "trellis rank: damaged checkpoint step 40: checkpoint shard "
                 "/runs/a/checkpoints/step-00000040/shard-00001-of-00002.bin: truncated\n",
                 {"network", "damaged_checkpoint"},
                 "trellis rank: damaged checkpoint step 40: checkpoint shard "
                 "/runs/a/checkpoints/step-00000040/shard-00001-of-00002.bin: truncated"},
        TailCase{"NoMarkerGivesTheLastNonEmptyLine",
                 "step 10 loss 3.1\nValueError: bad config key 'lr'\n\n  \n",
                 {},
                 "ValueError: bad config key 'lr'"},
        TailCase{"WordBoundaries",
                 "torch.cuda.OutOfMemoryError: oops\nXidian university\nMyMemoryErrors\n",
                 {"device_oom"},
                 "torch.cuda.OutOfMemoryError: oops"},
        TailCase{"Empty", "", {}, ""},
        TailCase{"ProgressBarCarriageReturns",
                 "epoch 1:  10%|#         | 10/100\repoch 1:  20%|##        | 20/100\r",
                 {},
                 "epoch 1:  20%|##        | 20/100"},
        TailCase{"ColourAndControlCharacters",
                 "\x1b[31mERROR\x1b[0m\tNCCL error\x07 in all_reduce\n",
                 {"nccl_error"},
                 "ERROR NCCL error in all_reduce"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ScanLogTailTest, LineIsTruncatedOnACharacterBoundary) {
  // 511 ASCII bytes then a 2-byte character: it does not fit in 512.
  std::string tail = std::string(511, 'a') + "\xc3\xa9" + "tail\n";
  LogEvidence e = ScanLogTail(tail);
  EXPECT_EQ(e.line, std::string(511, 'a'));
  EXPECT_LE(e.line.size(), kMaxEvidenceBytes);
}

TEST(ScanLogTailTest, InvalidUtf8BecomesQuestionMarks) {
  LogEvidence e = ScanLogTail("bad \xff\xfe bytes, good \xc3\xa9\n");
  EXPECT_EQ(e.line, "bad ?? bytes, good \xc3\xa9");
}

TEST(ScanLogTailTest, EachMarkerAtMostOnce) {
  LogEvidence e = ScanLogTail("NCCL error 1\nncclInternalError\nNCCL error 2\n");
  EXPECT_EQ(e.markers, std::vector<std::string>{"nccl_error"});
  EXPECT_EQ(e.line, "NCCL error 2");
}

}  // namespace
}  // namespace trellis::worker
