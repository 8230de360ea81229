// Element types. A tensor of type T (one of the DT_* numbers, chosen per shader variant
// with -D defines) is declared as `STORAGE(T) name[]` and read / written with
// LD(T, name, i) / ST(T, name, i, value) in f32. bf16 and f16 are stored as 16-bit
// words (16-bit storage) and converted with integer code, round to nearest even, exactly
// as the host does (hal/dtype.cpp). fp8_e4m3 is read/written as bytes of 32-bit words.
// fp4_e2m1x2 (NVFP4 indexer keys, hal/nvfp4.h) is stored as 32-bit words too, but has
// no LD/ST: its readers decode bytes with fp4_to_f32, its writer (kv_append.ki.comp)
// packs whole groups of 16 codes.
#define DT_F32 0
#define DT_BF16 1
#define DT_F16 2
#define DT_FP8 3
#define DT_I32 4
#define DT_FP4 5

float bf16_to_f32(uint h) { return uintBitsToFloat(h << 16); }

uint f32_to_bf16(float f) {
  uint u = floatBitsToUint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return ((u >> 16) | 0x40u) & 0xffffu;  // quiet NaN
  return ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16) & 0xffffu;
}

float f16_to_f32(uint h) { return unpackHalf2x16(h).x; }

uint f32_to_f16(float f) {
  uint x = floatBitsToUint(f);
  uint sign = (x >> 16) & 0x8000u;
  uint ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // rounds past 65504: inf
  if (ax < 0x38800000u) {                        // f16 subnormal or zero: m * 2^-24
    float m = uintBitsToFloat(ax) * 16777216.0;
    return sign | uint(roundEven(m));
  }
  uint r = ax - 0x38000000u;                     // rebias the exponent (127 -> 15)
  r = (r + 0x0fffu + ((r >> 13) & 1u)) >> 13;     // round 13 dropped bits to nearest even
  return sign | r;
}

// OCP E4M3FN: bias 7, no infinities, 0x7f / 0xff NaN, max 448.
float fp8_to_f32(uint b) {
  uint e = (b >> 3) & 0xfu, m = b & 7u;
  if (e == 15u && m == 7u) return uintBitsToFloat(0x7fc00000u);
  float v = e == 0u ? float(m) * (1.0 / 512.0) : uintBitsToFloat(((e + 120u) << 23) | (m << 20));
  return (b & 0x80u) != 0u ? -v : v;
}

uint f32_to_fp8(float f) {
  uint x = floatBitsToUint(f);
  uint sign = (x >> 24) & 0x80u;
  uint ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7fu;          // NaN stays NaN
  if (ax >= 0x43e00000u) return sign | 0x7eu;         // >= 448 (and inf): saturate
  if (ax < 0x3c800000u) {                             // below 2^-6: steps of 2^-9
    float m = uintBitsToFloat(ax) * 512.0;
    return sign | uint(roundEven(m));
  }
  uint r = ax - 0x3c000000u;                          // rebias (127 -> 7)
  r = (r + 0x7ffffu + ((r >> 20) & 1u)) >> 20;
  return sign | min(r, 0x7eu);
}

// OCP E2M1 code (low 4 bits): magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 (twice them are the
// nibbles of 0xc8643210), bit 3 the sign. Exact.
float fp4_to_f32(uint c) {
  float v = float((0xc8643210u >> ((c & 7u) * 4u)) & 0xfu) * 0.5;
  return (c & 8u) != 0u ? -v : v;
}

// Byte i of a uint array (fp8 scales of NVFP4 keys).
#define BYTE_AT(buf, i) ((buf[(i) >> 2] >> (((i) & 3u) * 8u)) & 0xffu)

#define STORAGE(T) STORAGE_(T)
#define STORAGE_(T) STORAGE_##T
#define STORAGE_0 float
#define STORAGE_1 uint16_t
#define STORAGE_2 uint16_t
#define STORAGE_3 uint
#define STORAGE_4 int
#define STORAGE_5 uint

#define LD(T, buf, i) LD_(T, buf, i)
#define LD_(T, buf, i) LD_##T(buf, i)
#define LD_0(buf, i) (buf[i])
#define LD_1(buf, i) bf16_to_f32(uint(buf[i]))
#define LD_2(buf, i) f16_to_f32(uint(buf[i]))
#define LD_3(buf, i) fp8_to_f32((buf[(i) >> 2] >> (((i) & 3u) * 8u)) & 0xffu)
#define LD_4(buf, i) float(buf[i])

#define ST(T, buf, i, v) ST_(T, buf, i, v)
#define ST_(T, buf, i, v) ST_##T(buf, i, v)
#define ST_0(buf, i, v) buf[i] = (v)
#define ST_1(buf, i, v) buf[i] = uint16_t(f32_to_bf16(v))
#define ST_2(buf, i, v) buf[i] = uint16_t(f32_to_f16(v))
// Bytes of shared words: clear then set, each an atomic on this byte's bits only.
#define ST_3(buf, i, v)                                   \
  {                                                       \
    uint i_ = (i), sh_ = (i_ & 3u) * 8u;                  \
    atomicAnd(buf[i_ >> 2], ~(0xffu << sh_));             \
    atomicOr(buf[i_ >> 2], f32_to_fp8(v) << sh_);         \
  }

// Raw copy of one element (same type on both sides, bits unchanged).
#define CP(T, dst, j, src, i) CP_(T, dst, j, src, i)
#define CP_(T, dst, j, src, i) CP_##T(dst, j, src, i)
#define CP_0(dst, j, src, i) dst[j] = src[i]
#define CP_1(dst, j, src, i) dst[j] = src[i]
#define CP_2(dst, j, src, i) dst[j] = src[i]
