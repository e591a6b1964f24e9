#pragma once
// The fields of the step record, defined once (docs/architecture.md, "The step
// pipeline"). The struct's members, the JSON codec, the proto conversion (by
// field name), the store's step history, the rank metrics and the CLI's
// columns all come from this list; a test (tests/step_record_schema_test.cc)
// round-trips every field through every encoding and checks the proto
// message has exactly these fields. Adding a figure: one line here (and the
// proto field of the same name, which the test asks for), plus the code that
// measures it. Torch-free, protobuf-free: the trainer includes it.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string_view>

namespace trellis {

// What a field holds; the accepted range goes with it.
enum class StepFieldKind {
  kCount,    // int64, >= 0 (steps, tokens, bytes, counts)
  kSeconds,  // double, finite and >= 0 (times, norms, ratios)
  kFinite,   // double, finite (the loss)
};

// X(name, kind, required, help). Required fields are in every record; the
// others only where the producer knows them.
#define TRELLIS_STEP_RECORD_FIELDS(X)                                                             \
  X(step, kCount, true, "Number of the step")                                                     \
  X(loss, kFinite, true, "Loss of the step")                                                      \
  X(tokens, kCount, true, "Tokens the rank trained on in the step")                               \
  X(step_seconds, kSeconds, true, "Seconds of the step")                                          \
  X(grad_norm, kSeconds, false, "Gradient norm of the step")                                      \
  /* The step's learning rates after warmup and decay: AdamW's (embedding, head, router, */      \
  /* norms) and Muon's (attention and expert matrices). */                                      \
  X(lr, kSeconds, false, "AdamW learning rate of the step")                                       \
  X(muon_lr, kSeconds, false, "Muon learning rate of the step")                                   \
  X(fwd_seconds, kSeconds, false, "Seconds of the step's forward passes")                         \
  X(bwd_seconds, kSeconds, false, "Seconds of the step's backward passes")                        \
  X(optim_seconds, kSeconds, false, "Seconds of the step's optimizer step")                       \
  X(comm_seconds, kSeconds, false, "Seconds of the step's collective communication")              \
  X(exposed_comm_seconds, kSeconds, false,                                                        \
    "Seconds of the step's communication not hidden behind computation")                          \
  /* MoE routing over the step's tokens (all ranks), the worst layer: the busiest expert's */     \
  /* tokens over the mean expert's, and the busiest EP rank's (a block of experts) over the */    \
  /* mean EP rank's (only where EP > 1), each forward's busiest summed over the step's */         \
  /* micro-batches. 1 is even; the EP figure is what the slowest GPU pays. */                     \
  X(expert_load_max_over_mean, kSeconds, false,                                                   \
    "Busiest expert's tokens over the mean expert's (worst MoE layer)")                           \
  X(ep_load_max_over_mean, kSeconds, false,                                                       \
    "Busiest EP rank's tokens over the mean EP rank's (worst MoE layer)")                         \
  X(alloc_retries, kCount, false, "Device allocations retried after freeing cached blocks")       \
  X(mem_allocated_peak_bytes, kCount, false, "Peak device memory held by tensors")                \
  X(mem_reserved_peak_bytes, kCount, false, "Peak device memory reserved by the allocator")       \
  /* The allocated peak of each part of the step (GPU): the largest forward, the largest */       \
  /* backward (with any recompute) and the optimizer's. mem_allocated_peak_bytes is the */        \
  /* largest of them (or a little above, from the step's last bookkeeping). */                    \
  X(mem_allocated_peak_fwd_bytes, kCount, false, "Allocated peak of the largest forward")         \
  X(mem_allocated_peak_bwd_bytes, kCount, false, "Allocated peak of the largest backward")        \
  X(mem_allocated_peak_optim_bytes, kCount, false, "Allocated peak of the optimizer step")        \
  X(host_arena_bytes, kCount, false, "Bytes of the rank's pinned host arenas")                    \
  X(nccl_max_ctas, kCount, false, "CTAs each NCCL collective launches")                           \
  X(checkpoint_step, kCount, false, "Step of the newest complete checkpoint")                     \
  /* Seconds the rank spent on checkpoints after this step, outside step_seconds: a */            \
  /* checkpoint written in place, whole; one written behind the steps (checkpoint.async), */      \
  /* starting its copy and completing its step, waits for a write still in flight */              \
  /* included. Absent on steps without. */                                                        \
  X(checkpoint_seconds, kSeconds, false, "Seconds on checkpoints after the step, outside it")     \
  /* checkpoint.every_steps = "auto" (common/checkpoint_interval.h), on the record of each */     \
  /* step whose checkpoint chose the next interval: the steps to the next checkpoint, and the */  \
  /* figures the ranks agreed on for it (the slowest rank's checkpoint and mean step). */         \
  X(checkpoint_every_steps, kCount, false, "Steps to the next checkpoint, as auto chose them")    \
  X(checkpoint_choice_cost_seconds, kSeconds, false,                                             \
    "Seconds a checkpoint cost the steps, as auto's choice took it")                              \
  X(checkpoint_choice_step_seconds, kSeconds, false,                                             \
    "Seconds per step, as auto's choice took it")                                                 \
  /* The step after which the rank writes its next checkpoint (0: none ahead; a stop's */         \
  /* cannot be foreseen): the controller's hang timeout allows for it. */                         \
  X(next_checkpoint_step, kCount, false, "Step after which the next checkpoint is written")       \
  /* A new field: a line above this one. */

// The C++ type of a field: int64 or double, optional unless required.
template <StepFieldKind kind>
using StepFieldValue = std::conditional_t<kind == StepFieldKind::kCount, int64_t, double>;
template <StepFieldKind kind, bool required>
using StepFieldMember =
    std::conditional_t<required, StepFieldValue<kind>, std::optional<StepFieldValue<kind>>>;

struct StepRecord;

// One field: its name (the JSON key and the proto field's name), kind,
// presence, help, and access to the member as a number (an int64 field's
// value converted to double only by Number()).
struct StepField {
  std::string_view name;
  StepFieldKind kind;
  bool required;
  std::string_view help;
  std::optional<int64_t> (*get_int)(const StepRecord&);  // kCount fields
  std::optional<double> (*get_double)(const StepRecord&);  // the others
  void (*set_int)(StepRecord*, int64_t);
  void (*set_double)(StepRecord*, double);

  bool is_count() const { return kind == StepFieldKind::kCount; }
  bool Has(const StepRecord& r) const {
    return is_count() ? get_int(r).has_value() : get_double(r).has_value();
  }
  // The value as a double (a count converted), absent where the record has none.
  std::optional<double> Number(const StepRecord& r) const {
    if (!is_count()) return get_double(r);
    auto v = get_int(r);
    return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
  }
};

}  // namespace trellis
