// rng.cuh: Philox4x32-10 and the word-to-number mappings, the device twin of
// walk/philox.go. A draw is a pure function of (seed, walk id, step, draw
// index), so nothing about the random stream lives in memory: a sampler's
// "RNG state" is the counter it is about to use, in registers.
#pragma once
#include <stdint.h>

namespace ws {

constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;

// philox4x32_10 runs the ten rounds on counter c under key (k0, k1).
__device__ __forceinline__ uint4 philox4x32_10(uint4 c, uint32_t k0, uint32_t k1) {
#pragma unroll
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      k0 += kPhiloxW0;
      k1 += kPhiloxW1;
    }
    uint32_t hi0 = __umulhi(kPhiloxM0, c.x), lo0 = kPhiloxM0 * c.x;
    uint32_t hi1 = __umulhi(kPhiloxM1, c.z), lo1 = kPhiloxM1 * c.z;
    c = make_uint4(hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0);
  }
  return c;
}

// draw returns the four words for (seed, walk, step, d): key = seed,
// counter = {walk lo, walk hi, step, d}, exactly as walk's stepper.draw.
__device__ __forceinline__ uint4 draw(uint64_t seed, uint64_t walk, uint32_t step, uint32_t d) {
  return philox4x32_10(make_uint4((uint32_t)walk, (uint32_t)(walk >> 32), step, d), (uint32_t)seed,
                       (uint32_t)(seed >> 32));
}

// index maps x to [0, n) by multiply-high (walk.index).
__device__ __forceinline__ uint32_t index(uint32_t x, uint32_t n) { return __umulhi(x, n); }

// unit24 maps x to a float in [0, 1) with 24 bits, exact (walk.unit24).
__device__ __forceinline__ float unit24(uint32_t x) { return __uint2float_rn(x >> 8) * (1.0f / 16777216.0f); }

// word picks word i (0..3) of a draw without a local-memory array.
__device__ __forceinline__ uint32_t word(uint4 w, uint32_t i) {
  return i == 0 ? w.x : i == 1 ? w.y : i == 2 ? w.z : w.w;
}

}  // namespace ws
