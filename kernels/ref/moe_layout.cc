#include "kernels/ref/moe_layout.h"

#include <stdexcept>
#include <string>

namespace trellis::kernels::ref {

MoeLayout ComputeMoeLayoutRef(const int32_t* topk_ids, int64_t num_tokens, int top_k,
                              int num_experts) {
  const int64_t slots = num_tokens * top_k;
  MoeLayout l;
  l.offsets.assign(num_experts + 1, 0);
  for (int64_t s = 0; s < slots; ++s) {
    const int32_t e = topk_ids[s];
    if (e < 0 || e >= num_experts) {
      throw std::invalid_argument("topk_ids[" + std::to_string(s) + "] = " + std::to_string(e) +
                                  " is outside [0, " + std::to_string(num_experts) + ")");
    }
    ++l.offsets[e + 1];
  }
  for (int e = 0; e < num_experts; ++e) l.offsets[e + 1] += l.offsets[e];
  std::vector<int32_t> next(l.offsets.begin(), l.offsets.end() - 1);
  l.row_to_slot.resize(slots);
  l.slot_to_row.resize(slots);
  for (int64_t s = 0; s < slots; ++s) {
    const int32_t row = next[topk_ids[s]]++;
    l.row_to_slot[row] = static_cast<int32_t>(s);
    l.slot_to_row[s] = row;
  }
  return l;
}

void PermuteRef(const float* x, const MoeLayout& layout, int top_k, int64_t hidden, float* out) {
  for (size_t row = 0; row < layout.row_to_slot.size(); ++row) {
    const float* src = x + (layout.row_to_slot[row] / top_k) * hidden;
    for (int64_t h = 0; h < hidden; ++h) out[row * hidden + h] = src[h];
  }
}

void UnpermuteRef(const float* permuted, const MoeLayout& layout, int64_t hidden, float* out) {
  for (size_t s = 0; s < layout.slot_to_row.size(); ++s) {
    const float* src = permuted + layout.slot_to_row[s] * hidden;
    for (int64_t h = 0; h < hidden; ++h) out[s * hidden + h] = src[h];
  }
}

void CombineRef(const float* expert_out, const float* gates, const MoeLayout& layout,
                int64_t num_tokens, int top_k, int64_t hidden, float* out) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int64_t h = 0; h < hidden; ++h) {
      float sum = 0.0f;
      for (int j = 0; j < top_k; ++j) {
        const int64_t s = t * top_k + j;
        const float v = expert_out[layout.slot_to_row[s] * hidden + h];
        sum += gates == nullptr ? v : gates[s] * v;
      }
      out[t * hidden + h] = sum;
    }
  }
}

void CombineBackwardRef(const float* grad_y, const float* expert_out, const float* gates,
                        const MoeLayout& layout, int top_k, int64_t hidden,
                        float* grad_expert_out, float* grad_gates) {
  for (size_t row = 0; row < layout.row_to_slot.size(); ++row) {
    const int64_t s = layout.row_to_slot[row], t = s / top_k;
    const float* gy = grad_y + t * hidden;
    const float* eo = expert_out + row * hidden;
    double dot = 0.0;
    for (int64_t h = 0; h < hidden; ++h) {
      grad_expert_out[row * hidden + h] = gates[s] * gy[h];
      dot += double(gy[h]) * eo[h];
    }
    grad_gates[s] = static_cast<float>(dot);
  }
}

void AccumulateRef(float* acc, const float* recv, int num_bufs, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float sum = acc[i];
    for (int b = 0; b < num_bufs; ++b) sum += recv[b * n + i];
    acc[i] = sum;
  }
}

}  // namespace trellis::kernels::ref
