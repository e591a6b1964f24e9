#include "trainer_core/checkpoint/state_ranges.h"

#include <memory>
#include <string>
#include <vector>

#include "common/model_layout/model_layout.h"
#include "trainer_core/error.h"
#include "trainer_core/parallel/expert_parallel.h"

namespace trellis::train {

RangesFn StateRanges(const spec::ModelSpec& model) {
  auto layout = std::make_shared<std::vector<BlockLayout>>(ModelLayout(model));
  return [layout, model](const std::string& name, const MeshInfo& mesh, int rank) {
    const size_t dot = name.find('.');
    const std::string kind = name.substr(0, dot);
    if (kind != "param" && kind != "moment1" && kind != "moment2") {
      // adamw.step, router_bias.layers.<i>: the same on every rank.
      return std::vector<Range>{{0, name == "adamw.step" ? 1 : int64_t{model.experts}}};
    }
    const std::string block = name.substr(dot + 1);
    const bool experts = block.rfind("experts.", 0) == 0;
    const std::string block_name = experts ? block.substr(8) : block;
    for (const auto& b : *layout) {
      if (b.name != block_name) continue;
      if (experts) {
        auto m = PlanExpertMesh(mesh.world, rank, mesh.node_size, mesh.ep, model.experts,
                                mesh.node_size);
        const int64_t fh = int64_t{model.expert_hidden} * model.hidden, e = model.experts;
        std::vector<Range> r;
        for (int64_t part = 0; part < 3; ++part)
          r.push_back({(part * e + m.first_owned()) * fh,
                       (part * e + m.first_owned() + m.per_rank()) * fh});
        return r;
      }
      const int64_t n = DenseNumel(b), size = (n + mesh.world - 1) / mesh.world;
      return std::vector<Range>{{std::min(n, rank * size), std::min(n, rank * size + size)}};
    }
    throw TrainError("checkpoint: no block for tensor '" + name + "'");
  };
}

}  // namespace trellis::train
