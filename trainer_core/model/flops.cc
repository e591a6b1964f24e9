#include "trainer_core/model/flops.h"

#include <algorithm>

namespace trellis::train {
namespace {

double NsFlops(double rows, double cols, int steps) {
  const double m = std::min(rows, cols), n = std::max(rows, cols);
  return steps * (4 * m * m * n + 2 * m * m * m);
}

}  // namespace

double ForwardFlopsPerToken(const spec::ModelSpec& m, int64_t seq_len) {
  const double h = m.hidden, hd = static_cast<double>(m.hidden / m.heads);
  const double q = m.heads * hd, kv = m.kv_heads * hd, f = m.expert_hidden;
  const double projections = 2 * h * (q + kv + kv) + 2 * q * h;  // wq, wk, wv; wo
  // Scores (q . k) and the weighted sum of values: 2 x 2 x q FLOPs per key.
  const double attention = 4 * q * (static_cast<double>(seq_len) + 1) / 2;
  const double router = 2 * h * m.experts;
  const double experts = (m.experts_per_token + (m.shared_expert ? 1 : 0)) * 3 * 2 * h * f;
  const double head = 2 * h * m.vocab;
  return m.layers * (projections + attention + router + experts) + head;
}

double TrainingFlopsPerToken(const spec::ModelSpec& m, int64_t seq_len) {
  return 3 * ForwardFlopsPerToken(m, seq_len);
}

double NewtonSchulzFlopsPerStep(const spec::ModelSpec& m, int ns_steps) {
  const double h = m.hidden, hd = static_cast<double>(m.hidden / m.heads);
  const double q = m.heads * hd, kv = m.kv_heads * hd, f = m.expert_hidden;
  double per_layer = NsFlops(q, h, ns_steps) + 2 * NsFlops(kv, h, ns_steps) +
                     NsFlops(h, q, ns_steps) + 3 * m.experts * NsFlops(f, h, ns_steps);
  if (m.shared_expert) per_layer += 3 * NsFlops(f, h, ns_steps);
  return m.layers * per_layer;
}

}  // namespace trellis::train
