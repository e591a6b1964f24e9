#pragma once
// Counter-based initialization: every element's value is a pure function of
// (parameter seed, global element index). A rank that owns elements
// [first, first + count) of a parameter draws exactly the values the
// unsharded model has there, so the model is the same at every world size.
// Torch-free.

#include <cstdint>
#include <string_view>

namespace trellis::train {

// Seed of one parameter: the run seed mixed with a hash of its full name, so
// adding a parameter never shifts the values of the others.
uint64_t ParamSeed(uint64_t run_seed, std::string_view param_name);

// 64 random bits for element `index` of the stream `seed` (splitmix64-style
// counter hash: two rounds of the finalizer over seed and index).
uint64_t CounterHash(uint64_t seed, uint64_t index);

// Uniform in the open interval (0, 1) from the hash of (seed, index).
double CounterUniform(uint64_t seed, uint64_t index);

// Normal(0, std) truncated to [-2 std, 2 std] by the inverse CDF: one hash per
// element and a fixed amount of arithmetic, so it always terminates (no
// rejection loop, no data-dependent iteration count).
double TruncatedNormalAt(uint64_t seed, uint64_t index, double std);

// Fills out[0..count) with elements [first, first + count) of the stream.
void FillTruncatedNormal(uint64_t seed, int64_t first, int64_t count, double std, float* out);
void FillTruncatedNormal(uint64_t seed, int64_t first, int64_t count, double std, double* out);

// The standard normal quantile function, accurate to ~1e-15 in (0, 1).
double NormalQuantile(double p);

}  // namespace trellis::train
