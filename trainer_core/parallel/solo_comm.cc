#include "trainer_core/parallel/solo_comm.h"

#include "trainer_core/torch_api.h"

namespace trellis::train {
namespace {

class DoneWork final : public CommWork {
 public:
  void Wait() override {}
};

class SoloComm final : public Comm {
 public:
  explicit SoloComm(bool cuda) : cuda_(cuda) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  bool cuda() const override { return cuda_; }
  std::unique_ptr<CommWork> StartAllGather(const at::Tensor& shard,
                                           const at::Tensor& out) override {
    out.view(-1).copy_(shard.view(-1));
    return FinishedWork();
  }
  std::unique_ptr<CommWork> StartAllToAll(const at::Tensor& send,
                                          const std::vector<int64_t>& send_counts,
                                          const at::Tensor& recv,
                                          const std::vector<int64_t>& recv_counts) override {
    TORCH_CHECK(send_counts.at(0) == recv_counts.at(0), "comm: all-to-all counts differ");
    recv.view(-1).narrow(0, 0, recv_counts[0]).copy_(send.view(-1).narrow(0, 0, send_counts[0]));
    return FinishedWork();
  }
  std::unique_ptr<CommWork> StartAllReduceSum(const at::Tensor&) override {
    return FinishedWork();
  }
  void Barrier() override {}
  void ResetTimes() override {}
  std::optional<CommTimes> TakeTimes() override { return std::nullopt; }
  std::unique_ptr<Comm> Subgroup(const std::string&, const std::vector<int>&) override {
    return std::make_unique<SoloComm>(cuda_);
  }

 private:
  bool cuda_;
};

}  // namespace

std::unique_ptr<Comm> MakeSoloComm(bool cuda) { return std::make_unique<SoloComm>(cuda); }

std::unique_ptr<CommWork> FinishedWork() { return std::make_unique<DoneWork>(); }

}  // namespace trellis::train
