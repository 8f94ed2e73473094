#pragma once
/// \file
/// \brief Counter-based random numbers (Philox-4x32-10): a draw depends only on (seed, stream,
/// index, draw number), never on which thread or rank makes it.
#include <kfmm/core/kokkos_compat.hpp>

#include <cstdint>

namespace kfmm {

/// \brief Philox-4x32-10 (Salmon et al., SC'11): one bijective scramble of a 128-bit counter
/// under a 64-bit key. Matches the Random123 known-answer vectors.
struct Philox4x32 {
  std::uint32_t word[4];
};

KOKKOS_INLINE_FUNCTION Philox4x32 philox4x32_10(Philox4x32 counter, std::uint32_t key0, std::uint32_t key1) {
  constexpr std::uint32_t multiplier0 = 0xD2511F53u, multiplier1 = 0xCD9E8D57u;
  constexpr std::uint32_t weyl0 = 0x9E3779B9u, weyl1 = 0xBB67AE85u;
  std::uint32_t* c = counter.word;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += weyl0;
      key1 += weyl1;
    }
    std::uint64_t const product0 = std::uint64_t(multiplier0) * c[0];
    std::uint64_t const product1 = std::uint64_t(multiplier1) * c[2];
    std::uint32_t const next0 = std::uint32_t(product1 >> 32) ^ c[1] ^ key0;
    std::uint32_t const next2 = std::uint32_t(product0 >> 32) ^ c[3] ^ key1;
    c[1] = std::uint32_t(product1);
    c[3] = std::uint32_t(product0);
    c[0] = next0;
    c[2] = next2;
  }
  return counter;
}

/// Independent families of random streams under one seed.
enum class RandomStream : std::uint32_t {
  Particle = 0,  ///< one stream per particle, indexed by its global index
  Model = 1      ///< parameters of a model shared by all particles (e.g. clump centres)
};

/// \brief The random sequence of one (seed, stream, index): uniform doubles in (0, 1) and
/// standard normals. Usable on host and device; copying it copies its position in the sequence.
///
/// Counter layout: words 0–1 = index, word 2 = block number, word 3 = stream; key = seed.
/// Each block gives two uniforms (64 bits each, 53 used), so one sequence holds 2^33 uniforms.
class CounterRandom {
 public:
  KOKKOS_INLINE_FUNCTION CounterRandom(std::uint64_t seed, RandomStream stream, std::uint64_t index)
      : key0_(std::uint32_t(seed)), key1_(std::uint32_t(seed >> 32)), index_(index),
        stream_(static_cast<std::uint32_t>(stream)) {}

  /// Uniform in the open interval (0, 1): (k + ½)·2⁻⁵³ for a 53-bit k.
  KOKKOS_INLINE_FUNCTION double uniform() {
    if (!have_uniform_) {
      Philox4x32 const counter{{std::uint32_t(index_), std::uint32_t(index_ >> 32), block_++, stream_}};
      Philox4x32 const bits = philox4x32_10(counter, key0_, key1_);
      spare_uniform_ = to_unit(bits.word[2], bits.word[3]);
      have_uniform_ = true;
      return to_unit(bits.word[0], bits.word[1]);
    }
    have_uniform_ = false;
    return spare_uniform_;
  }

  /// Standard normal by Marsaglia's polar method (no trigonometry, so it runs on any device).
  KOKKOS_INLINE_FUNCTION double normal() {
    if (have_normal_) {
      have_normal_ = false;
      return spare_normal_;
    }
    double x, y, s;
    do {
      x = 2 * uniform() - 1;
      y = 2 * uniform() - 1;
      s = x * x + y * y;
    } while (s >= 1 || s == 0);
    double const factor = compat::math::sqrt(-2 * compat::math::log(s) / s);
    spare_normal_ = y * factor;
    have_normal_ = true;
    return x * factor;
  }

 private:
  KOKKOS_INLINE_FUNCTION static double to_unit(std::uint32_t low, std::uint32_t high) {
    std::uint64_t const bits = (std::uint64_t(high) << 32 | low) >> 11;
    return (double(bits) + 0.5) * (1.0 / 9007199254740992.0);  // 2^53
  }

  std::uint32_t key0_, key1_;
  std::uint64_t index_;
  std::uint32_t stream_;
  std::uint32_t block_ = 0;
  bool have_uniform_ = false;
  bool have_normal_ = false;
  double spare_uniform_ = 0;
  double spare_normal_ = 0;
};

}  // namespace kfmm
