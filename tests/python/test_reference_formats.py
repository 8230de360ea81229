"""msa.reference's number and key formats (E4M3, E2M1, NVFP4, scaled fp8), checked against
brute-force nearest-value searches and hand-worked groups."""
import math
import random

import torch

from msa import reference as ref
from reference_cases import F64, INF, NAN


def test_decode_e4m3_spot_values():
    codes = torch.tensor([0x7E, 0xFE, 0x38, 0xB8, 0x40, 0x3C, 0x08, 0x01, 0x07, 0x00, 0x77],
                         dtype=torch.uint8)
    want = [448.0, -448.0, 1.0, -1.0, 2.0, 1.5, 2.0 ** -6, 2.0 ** -9, 7 * 2.0 ** -9, 0.0, 240.0]
    assert ref.decode_e4m3(codes).tolist() == want
    special = ref.decode_e4m3(torch.tensor([0x7F, 0xFF, 0x80], dtype=torch.uint8))
    assert math.isnan(special[0]) and math.isnan(special[1])
    assert special[2] == 0.0 and math.copysign(1.0, special[2]) == -1.0  # 0x80 is -0


def test_encode_e4m3_inverts_decode_on_every_code():
    codes = torch.arange(256).to(torch.uint8)
    values = ref.decode_e4m3(codes)
    finite = ~torch.isnan(values)
    assert torch.equal(ref.encode_e4m3(values)[finite], codes[finite])


def test_encode_e4m3_ties_saturation_nan_and_sign():
    x = torch.tensor([1.0625, 1.1875, 464.0, 449.0, 1e9, -1e9, INF, -1e-9, 0.0, 2.0 ** -10,
                      3 * 2.0 ** -10, NAN])
    got = ref.encode_e4m3(x).tolist()
    # 1.0625 is halfway 1 (0x38) / 1.125 (0x39): even 0x38; 1.1875 halfway 1.125 / 1.25: 0x3a.
    # 2^-10 halfway 0 / 2^-9: 0; 3*2^-10 halfway 2^-9 (0x01) / 2^-8 (0x02): 0x02.
    assert got == [0x38, 0x3A, 0x7E, 0x7E, 0x7E, 0xFE, 0x7E, 0x80, 0x00, 0x00, 0x02, 0x7F]


def test_encode_e4m3_matches_brute_force_nearest():
    values = [ref.decode_e4m3(torch.tensor([c], dtype=torch.uint8)).item() for c in range(0x7F)]
    rng = random.Random(1)
    xs = [rng.choice([-1, 1]) * rng.uniform(0, 470) * 2.0 ** rng.randint(-14, 0) for _ in range(2000)]
    xs += [(values[i] + values[i + 1]) / 2 for i in range(0x7E)]  # every tie
    got = ref.encode_e4m3(torch.tensor(xs, dtype=F64)).tolist()
    for x, code in zip(xs, got):
        a = abs(x)
        best = min(range(0x7F), key=lambda c: (abs(values[c] - a), c % 2))  # nearest, then even
        if a >= 448:
            best = 0x7E
        assert code == best | (0x80 if x < 0 else 0), (x, code, best)


def test_nvfp4_nibble_order_and_group_scales():
    # Di = 32: two groups. Byte 0x21: element 0 = code 1 (0.5), element 1 = code 2 (1.0).
    # Byte 0x9f: element 2 = code 0xf (-6), element 3 = code 9 (-0.5).
    packed = torch.zeros((1, 1, 16), dtype=torch.uint8)
    packed[0, 0, 0], packed[0, 0, 1] = 0x21, 0x9F
    packed[0, 0, 8] = 0x7A  # group 1: element 16 = code 0xa (-1.0), element 17 = code 7 (6)
    scale = torch.tensor([[[0x38, 0x40]]], dtype=torch.uint8)  # 1.0, 2.0
    keys = ref.decode_nvfp4(packed, scale)[0, 0]
    assert keys[:4].tolist() == [0.5, 1.0, -6.0, -0.5]
    assert keys[16:18].tolist() == [-2.0, 12.0]
    assert keys[4:16].abs().sum() == 0 and keys[18:].abs().sum() == 0
    codes = ref.unpack_e2m1x2(packed)
    assert torch.equal(ref.pack_e2m1x2(codes), packed)


def test_nvfp4_quantize_hand_worked_group():
    # amax 6 -> scale e4m3(6 * f32(1/6)) = 1.0 (0x38), so codes are |x| rounded on the grid.
    x = torch.tensor([[0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0,
                       -0.1, NAN, -6.0, 0.5, -1.0, -0.0, 3.0, -2.9]])
    packed, scale = ref.quantize_nvfp4(x)
    assert scale.tolist() == [[0x38]]
    codes = ref.unpack_e2m1x2(packed)[0].tolist()
    # Ties go to the even code: 0.25->0, 0.75->2, 1.25->2, 1.75->4, 2.5->4, 3.5->6, 5->6.
    # -0.1 rounds to a zero magnitude: +0; NaN: +0; -0: +0.
    assert codes == [0, 2, 2, 4, 4, 6, 6, 7, 0, 0, 0xF, 1, 0xA, 0, 5, 0xD]


def test_nvfp4_quantize_scale_rule():
    zeros = torch.zeros((1, 16))
    packed, scale = ref.quantize_nvfp4(zeros)
    assert scale.item() == 0 and packed.abs().sum() == 0
    big = torch.full((1, 16), 1e6)
    big[0, 3] = -1e6
    packed, scale = ref.quantize_nvfp4(big)
    assert scale.item() == 0x7E  # 1e6 / 6 saturates at 448
    assert ref.unpack_e2m1x2(packed)[0, :4].tolist() == [7, 7, 7, 0xF]
    # amax 3 (NaN ignored): 3 * f32(1/6) = 0.5 exactly -> 0x30; 3 / 0.5 = 6 -> code 7.
    x = torch.zeros((1, 16))
    x[0, 0], x[0, 1], x[0, 2] = 3.0, NAN, 0.3
    packed, scale = ref.quantize_nvfp4(x)
    assert scale.item() == 0x30
    assert ref.unpack_e2m1x2(packed)[0, :3].tolist() == [7, 0, 1]  # 0.3 / 0.5 = 0.6 -> 0.5


def test_nvfp4_scale_uses_the_f32_product_with_f32_one_sixth():
    # amax just below 6 * 1.1875 (the midpoint of e4m3 1.125 / 1.25): amax / 6 is below the
    # midpoint (-> 1.125, 0x39), but amax * f32(1/6) rounds in f32 onto it (-> even, 0x3a).
    amax = torch.nextafter(torch.tensor(7.125), torch.tensor(0.0))
    assert ref.encode_e4m3(amax.double() / 6).item() == 0x39
    x = torch.zeros((1, 16))
    x[0, 5] = amax
    _, scale = ref.quantize_nvfp4(x)
    assert scale.item() == 0x3A


def test_e2m1_encode_matches_brute_force_nearest():
    mags = ref.E2M1_MAGNITUDES
    rng = random.Random(2)
    scales = [0.5, 1.0, 3.0, 448.0]
    xs, ss = [], []
    for _ in range(3000):
        s = rng.choice(scales)
        xs.append(rng.choice([-1, 1]) * rng.choice([rng.uniform(0, 7), rng.choice(
            [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])]) * s)
        ss.append(s)
    got = ref.encode_e2m1(torch.tensor(xs, dtype=F64), torch.tensor(ss, dtype=F64)).tolist()
    for x, s, code in zip(xs, ss, got):
        r = abs(x) / s
        best = min(range(8), key=lambda c: (abs(mags[c] - r), c % 2))
        want = best | (8 if x < 0 and best != 0 else 0)
        assert code == want, (x, s, code, want)


def test_fp8_scaled_quantize_uses_amax_over_448():
    x = torch.tensor([[224.0, -112.0, 0.0, NAN], [0.0, 0.0, 0.0, 0.0]])
    codes, scale = ref.quantize_fp8_scaled(x)
    assert scale.tolist() == [0.5, 1.0]
    assert ref.decode_e4m3(codes[0, :3]).tolist() == [448.0, -224.0, 0.0]
    assert math.isnan(ref.decode_e4m3(codes[0, 3:]).item())
