// The CPU op's elementwise math for one instruction set: the fp32 sigmoid (its exp, one divide), x * sigmoid(x) + b and
// its gradient, PyTorch's fp64 formulas, and the rounding of fp32 results to fp16/bf16. Included only by
// swish_cpu_vec.cpp, which CMakeLists.txt compiles once per instruction set (-DCPU_CAPABILITY=<name>, that set's -m
// flags, -ffp-contract=off): everything here is in that copy's namespace, with internal linkage.
#pragma once

#include <ATen/cpu/vec/functional.h> // the fp16/bf16 <-> fp32 conversions (convert_to_float, convert_from_float)
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <c10/util/bit_cast.h>

#include <type_traits>

#ifndef CPU_CAPABILITY
#error "swish_cpu_math.h is included by swish_cpu_vec.cpp, built once per instruction set (see CMakeLists.txt)"
#endif

namespace torchtrt_swish {
namespace cpu_vec {
namespace CPU_CAPABILITY {
namespace {

using at::vec::Vectorized;
using VF = Vectorized<float>;

// exp(r) = 2^n exp(r'), r' = r - n ln2 in [-ln2/2, ln2/2]: ln2 in two parts (Cody-Waite), the first short enough that
// n * kLN2_HI is exact for every n the kernels reach (|n| <= 2^8).
constexpr float kLOG2E = 0x1.715476p+0f;
constexpr float kLN2_HI = 0x1.62e4p-1f;
constexpr float kLN2_LO = 0x1.7f7d1cp-20f;
constexpr float kROUND = 0x1.8p23f;
// exp(r') ~ 1 + r' + c2 r'^2 + ... + c6 r'^6: minimax for the relative error on [-ln2/2, ln2/2] (3.8e-9 with these
// fp32 coefficients, 0.03 of an fp32 ulp: the error left is the arithmetic's rounding).
constexpr float kEXP_C2 = 0x1.fffffcp-2f;
constexpr float kEXP_C3 = 0x1.555492p-3f;
constexpr float kEXP_C4 = 0x1.5558f2p-5f;
constexpr float kEXP_C5 = 0x1.1239d4p-7f;
constexpr float kEXP_C6 = 0x1.6a244cp-10f;
// The largest |x| whose exp(|x|) is finite in fp32: past it F.silu's exp(-x) is inf and its sigmoid exactly 0.
constexpr float kFLUSH = 0x1.62e42ep+6f;

//! a where x's sign bit is clear, b where it is set (-0 and sign-set NaNs included).
inline VF bySign(VF const& x, VF const& a, VF const& b)
{
#if defined(CPU_CAPABILITY_AVX512)
    return _mm512_mask_blend_ps(_mm512_movepi32_mask(_mm512_castps_si512(x)), a, b);
#elif defined(CPU_CAPABILITY_AVX2)
    return _mm256_blendv_ps(a, b, x);
#else
    // Bit masks rather than a branch per lane: random signs would mispredict half the time.
    VF out;
    for (int i = 0; i < VF::size(); ++i)
    {
        int32_t const m = c10::bit_cast<int32_t>(x[i]) >> 31;
        out[i] = c10::bit_cast<float>((c10::bit_cast<int32_t>(a[i]) & ~m) | (c10::bit_cast<int32_t>(b[i]) & m));
    }
    return out;
#endif
}

#if !defined(CPU_CAPABILITY_AVX512) // AVX512 scales and masks in one instruction (sigmoidParts)
//! p * s where a >= bound, +0 elsewhere (NaN a included).
inline VF mulWhereAtLeast(VF const& p, VF const& s, VF const& a, VF const& bound)
{
#if defined(CPU_CAPABILITY_AVX2)
    return _mm256_and_ps(_mm256_mul_ps(p, s), _mm256_cmp_ps(a, bound, _CMP_GE_OQ));
#else
    VF out;
    for (int i = 0; i < VF::size(); ++i)
    {
        int32_t const keep = -static_cast<int32_t>(a[i] >= bound[i]); // a mask, not a branch (see bySign)
        out[i] = c10::bit_cast<float>(c10::bit_cast<int32_t>(p[i] * s[i]) & keep);
    }
    return out;
#endif
}
#endif

//! u = 2^kLOG2_SCALE exp(-|x|) and d = 1 + exp(-|x|): sigmoid(x) is 1 / d for x >= 0 and exp(-|x|) / d for x < 0,
//! so no exp overflows and the divisor stays in [1, 2]. A scale of 4 keeps u normal down to |x| = kFLUSH
//! (exp(-kFLUSH) is subnormal), for results whose error counts in ulps; the gradient's counts in units of 2^-24 and
//! takes u unscaled. Past kFLUSH, and for NaN, u is 0: the sigmoid F.silu computes there is exactly 0 (x < 0) or 1.
struct SigmoidParts
{
    VF u;
    VF d;
};

template <int kLOG2_SCALE>
C10_ALWAYS_INLINE SigmoidParts sigmoidParts(VF const& x)
{
    static_assert(kLOG2_SCALE == 0 || kLOG2_SCALE == 2, "u is exp(-|x|) or 4 exp(-|x|)");
    VF const a = x | VF(-0.0f); // -|x|
    // n = round(a log2(e)): adding 1.5 * 2^23 leaves no fraction bits (a vector round, also in the baseline copy).
    VF const n = at::vec::fmadd(a, VF(kLOG2E), VF(kROUND)) - VF(kROUND);
    VF r = at::vec::fmadd(n, VF(-kLN2_HI), a);
    r = at::vec::fmadd(n, VF(-kLN2_LO), r);
#if defined(CPU_CAPABILITY_AVX512)
    // The polynomial carries the scale (a power of two: the same bits, scaled), so that the scalef below takes n
    // alone, not n + kLOG2_SCALE (an add fewer).
    constexpr float kS = static_cast<float>(1 << kLOG2_SCALE);
#else
    constexpr float kS = 1.0f;
#endif
    VF p = at::vec::fmadd(VF(kS * kEXP_C6), r, VF(kS * kEXP_C5));
    p = at::vec::fmadd(p, r, VF(kS * kEXP_C4));
    p = at::vec::fmadd(p, r, VF(kS * kEXP_C3));
    p = at::vec::fmadd(p, r, VF(kS * kEXP_C2));
    p = at::vec::fmadd(p, r, VF(kS));
    p = at::vec::fmadd(p, r, VF(kS));
#if defined(CPU_CAPABILITY_AVX512)
    // p 2^n in one instruction (VSCALEFPS): the bits of the exponent-bits product below.
    VF const u = _mm512_maskz_scalef_ps(_mm512_cmp_ps_mask(a, VF(-kFLUSH), _CMP_GE_OQ), p, n);
#else
    // 2^(n + 2) from its exponent bits, (n + 2 + 127) << 23, computed exactly in fp32 and converted (n >= -128).
    VF const scale = at::vec::cast<float>(
        at::vec::convert_to_int_of_same_size(at::vec::fmadd(n, VF(0x1p23f), VF(129.0f * 0x1p23f))));
    VF const u4 = mulWhereAtLeast(p, scale, a, VF(-kFLUSH));
    VF const u = kLOG2_SCALE == 2 ? u4 : u4 * VF(0.25f);
#endif
    if constexpr (kLOG2_SCALE == 2)
    {
        return {u, at::vec::fmadd(u, VF(0.25f), VF(1.0f))};
    }
    else
    {
        return {u, u + VF(1.0f)}; // the same bits as the scaled form: 1 + u rounds to 1 wherever u is subnormal
    }
}

//! sigmoid(x) as the kernels use it (its error bound: docs/performance-notes.md); NaN gives 0 or 1, not NaN.
inline VF sigmoid(VF const& x)
{
    SigmoidParts const sp = sigmoidParts<2>(x);
    VF const rd = VF(1.0f) / sp.d;
    return bySign(x, rd, (sp.u * rd) * VF(0.25f));
}

//! x * sigmoid(x) + b as (x / 4) r + b in one FMA, r = 4 sigmoid(x): 4 / d for x >= 0, 4u / d for x < 0 (one divide
//! either way; 4 sigmoid stays normal down to the flush, and x / 4 is exact but for subnormal x). Special values come
//! out as F.silu's: +inf, NaN at -inf, -0 below -kFLUSH, NaN propagated through x.
inline VF swishBias(VF const& x, VF const& b)
{
    SigmoidParts const sp = sigmoidParts<2>(x);
    VF const r = bySign(x, VF(4.0f), sp.u) / sp.d;
    return at::vec::fmadd(x * VF(0.25f), r, b);
}

//! g * s * (1 + x * (1 - s)), PyTorch's silu_backward formula, with s and 1 - s each taken without cancellation.
inline VF swishGrad(VF const& g, VF const& x)
{
    SigmoidParts const sp = sigmoidParts<0>(x);
    VF const rd = VF(1.0f) / sp.d;
    VF const t = sp.u * rd; // exp(-|x|) / (1 + exp(-|x|))
    return g * bySign(x, rd, t) * at::vec::fmadd(x, bySign(x, t, rd), VF(1.0f));
}

//! fp64: PyTorch's silu formula, so special values match F.silu exactly (silu(-inf) is NaN), plus the bias.
inline Vectorized<double> swishBias(Vectorized<double> const& x, Vectorized<double> const& b)
{
    return x / (Vectorized<double>(1) + x.neg().exp()) + b;
}

//! fp64: PyTorch's silu_backward formula.
inline Vectorized<double> swishGrad(Vectorized<double> const& g, Vectorized<double> const& x)
{
    using V = Vectorized<double>;
    V const one(1);
    V const s = one / (one + x.neg().exp());
    return g * s * (one + x * (one - s));
}

//! lo and hi (elements [0, 16) and [16, 32) of a vector of T) rounded to T, to nearest even. With AVX512_BF16
//! (bf16Insn: avx512Bf16()) bf16 takes one VCVTNE2PS2BF16, whose bits are ATen's but for subnormals, which it flushes
//! to zero (a vector holding one takes ATen's rounding), and NaN payloads (a NaN either way).
template <typename T>
C10_ALWAYS_INLINE Vectorized<T> narrow(VF const& lo, VF const& hi, [[maybe_unused]] bool bf16Insn)
{
#if defined(CPU_CAPABILITY_AVX512) && defined(__AVX512BF16__)
    if constexpr (std::is_same_v<T, c10::BFloat16>)
    {
        constexpr int kSUBNORMAL = 0x20; // VFPCLASSPS's denormal category
        if (bf16Insn && (_mm512_fpclass_ps_mask(lo, kSUBNORMAL) | _mm512_fpclass_ps_mask(hi, kSUBNORMAL)) == 0)
        {
            return Vectorized<T>(reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
        }
    }
#endif
    return at::vec::convert_from_float<T>(lo, hi);
}

} // namespace
} // namespace CPU_CAPABILITY
} // namespace cpu_vec
} // namespace torchtrt_swish
