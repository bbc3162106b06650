"""The RNG and the portable math of ``warp_drive/core.h``, run through the executors.

* Philox4x32-10 against Random123's published known-answer vectors, computed by
  the core kernel ``wd_philox_kat``;
* ``wd_logf`` / ``wd_expf`` / ``wd_sincosf`` / ``wd_sincospif`` (kernel
  ``wd_math_probe``) within 1 ulp of a float64 reference over their documented
  domains;
* with a GPU: the cpu and pycuda executors give the same BITS for the math and
  the RNG (``wd_math_probe``, ``wd_rng_probe``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from warp_drive.runtime.function_manager import FunctionManager

# Random123 kat_vectors, philox4x32 with 10 rounds: (ctr[4], key[2]) -> out[4].
PHILOX_KAT = [
    ((0x00000000, 0x00000000, 0x00000000, 0x00000000), (0x00000000, 0x00000000),
     (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF),
     (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]

MATH_COLUMNS = {"logf": 0, "expf": 1, "sinf": 2, "cosf": 3, "sinpif": 4, "cospif": 5}


def _fm(backend_name: str) -> FunctionManager:
    return FunctionManager(1, 1, backend=backend_name)


# uint32 tensors are built and read back through int32 views: torch's support
# for uint32 operations (fill, cross-device copies) varies between versions.
def _uint32_tensor(values: np.ndarray, device) -> torch.Tensor:
    host = torch.from_numpy(np.ascontiguousarray(values, dtype=np.uint32).view(np.int32).copy())
    return host.to(device).view(torch.uint32)


def _as_uint32(tensor: torch.Tensor) -> np.ndarray:
    return tensor.view(torch.int32).cpu().numpy().view(np.uint32)


def philox_kat(backend_name: str, rows: np.ndarray) -> np.ndarray:
    fm = _fm(backend_name)
    device = fm.backend.device
    ctr_key = _uint32_tensor(rows, device)
    out = torch.zeros((len(rows), 4), dtype=torch.int32, device=device).view(torch.uint32)
    fm.launch_flat("wd_philox_kat", [ctr_key, out, len(rows)], len(rows))
    fm.backend.synchronize()
    return _as_uint32(out)


def math_probe(backend_name: str, x: np.ndarray, block: int = 256) -> np.ndarray:
    """``wd_math_probe`` on float32 inputs ``x``: an (n, 6) float32 array."""
    fm = _fm(backend_name)
    device = fm.backend.device
    xs = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(device)
    out = torch.full((len(x), 6), float("nan"), dtype=torch.float32, device=device)
    fm.launch_flat("wd_math_probe", [xs, out, len(x)], len(x), block)
    fm.backend.synchronize()
    return out.cpu().numpy()


def rng_probe(backend_name: str, n: int, seed: int, counter: int, domain: int) -> np.ndarray:
    fm = _fm(backend_name)
    out = torch.zeros((n, 3), dtype=torch.float32, device=fm.backend.device)
    fm.launch_flat("wd_rng_probe", [out, n, seed, counter, domain], n)
    fm.backend.synchronize()
    return out.cpu().numpy()


# --------------------------------------------------------------------------- Philox


def test_philox_known_answer_vectors(backend_name):
    rows = np.array([[*ctr, *key] for ctr, key, _ in PHILOX_KAT], dtype=np.uint32)
    expected = np.array([out for _, _, out in PHILOX_KAT], dtype=np.uint32)
    got = philox_kat(backend_name, rows)
    for i, (want, have) in enumerate(zip(expected, got)):
        assert list(have) == list(want), (
            f"vector {i}: got {[f'{v:08x}' for v in have]}, want {[f'{v:08x}' for v in want]}"
        )


def test_philox_kat_rows_are_independent_of_position(backend_name):
    """Each output row depends only on its own (ctr, key): the vectors repeated
    many times over several blocks give the same answers everywhere."""
    rows = np.array([[*ctr, *key] for ctr, key, _ in PHILOX_KAT] * 200, dtype=np.uint32)
    expected = np.array([out for _, _, out in PHILOX_KAT] * 200, dtype=np.uint32)
    np.testing.assert_array_equal(philox_kat(backend_name, rows), expected)


# --------------------------------------------------------------------------- portable math


def _bits_to_float(bits: np.ndarray) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def _ulp_of(ref: np.ndarray) -> np.ndarray:
    """Size of one float32 ulp in the binade of the exact value ``ref`` (float64)."""
    _, exponent = np.frexp(np.abs(ref))
    return np.maximum(np.ldexp(1.0, exponent - 24), 2.0 ** -149)


def _ulp_error(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    got64 = got.astype(np.float64)
    assert np.all(np.isfinite(got64)), f"non-finite results for finite references: {got[~np.isfinite(got64)][:5]}"
    return np.abs(got64 - ref) / _ulp_of(ref)


def _sincospi_ref(x: float) -> tuple[float, float]:
    """sin(pi x), cos(pi x) in float64 with an exact reduction (x is a float32)."""
    t = 2.0 * math.fmod(x, 2.0)  # exact
    q = round(t)
    f = t - q  # exact, |f| <= 1/2
    s, c = math.sin(f * math.pi / 2), math.cos(f * math.pi / 2)
    return [(s, c), (c, -s), (-s, -c), (-c, s)][int(q) % 4]


def _random_finite_floats(rng, n: int, positive: bool = False) -> np.ndarray:
    """Uniform over the bit patterns of finite floats: every binade, subnormals included."""
    bits = rng.integers(1, 0x7F800000, size=n, dtype=np.uint32)
    if not positive:
        bits |= rng.integers(0, 2, size=n, dtype=np.uint32) << np.uint32(31)
    return _bits_to_float(bits)


def _neighbours(values: np.ndarray, k: int = 2) -> np.ndarray:
    """``values`` (float32) and their k nearest floats on each side."""
    out = [values.astype(np.float32)]
    up = down = values.astype(np.float32)
    for _ in range(k):
        up = np.nextafter(up, np.float32(np.inf))
        down = np.nextafter(down, np.float32(-np.inf))
        out += [up, down]
    return np.concatenate(out)


def _inputs(function: str, rng) -> np.ndarray:
    if function == "logf":
        x = np.concatenate([
            _random_finite_floats(rng, 1500, positive=True),
            rng.uniform(0.5, 2.0, 1000),
            _neighbours(np.float32([1.0, 0.5, 2.0, np.sqrt(2.0), np.sqrt(0.5), 2.0 ** -126, 2.0 ** -149]), 8),
            np.float32(2.0) ** rng.integers(-149, 128, 200).astype(np.float32),
            rng.uniform(1e-3, 1e3, 800),
        ])
    elif function == "expf":
        x = np.concatenate([
            rng.uniform(-87.0, 88.72, 2500),
            np.sign(rng.uniform(-1, 1, 1000)) * np.exp(rng.uniform(np.log(1e-8), np.log(80.0), 1000)),
            _neighbours(np.float32([0.0, -87.0, 88.72, 1.0, -1.0, np.log(2.0), -np.log(2.0)]), 8),
        ])
    else:  # sin/cos, sinpi/cospi: every finite float
        halfpis = np.arange(1, 600, dtype=np.float64) * (np.pi / 2 if function in ("sinf", "cosf") else 0.5)
        x = np.concatenate([
            _random_finite_floats(rng, 1500),
            rng.uniform(-8.0, 8.0, 1500),
            rng.uniform(-1000.0, 1000.0, 500),
            _neighbours(halfpis.astype(np.float32), 2),
            _neighbours(-halfpis[:50].astype(np.float32), 2),
            _neighbours(np.float32([2.0 ** -12, 2.0 ** -14, 800.0, 2.0 ** 22, 2.0 ** 24, 2.0 ** 25, 3.0e38]), 3),
        ])
    x = x.astype(np.float32)
    x = x[np.isfinite(x)]
    return x[x > 0] if function == "logf" else x


def _reference(function: str, x: np.ndarray) -> np.ndarray:
    xs = x.astype(np.float64).tolist()
    if function == "logf":
        return np.array([math.log(v) for v in xs])
    if function == "expf":
        return np.array([math.exp(v) for v in xs])
    if function == "sinf":
        return np.array([math.sin(v) for v in xs])
    if function == "cosf":
        return np.array([math.cos(v) for v in xs])
    pairs = np.array([_sincospi_ref(v) for v in xs])
    return pairs[:, 0] if function == "sinpif" else pairs[:, 1]


@pytest.mark.parametrize("function", list(MATH_COLUMNS))
def test_portable_math_within_one_ulp(backend_name, function):
    rng = np.random.default_rng(MATH_COLUMNS[function] + 2024)
    x = _inputs(function, rng)
    assert len(x) >= 3000
    got = math_probe(backend_name, x)[:, MATH_COLUMNS[function]]
    ref = _reference(function, x)
    err = _ulp_error(got, ref)
    worst = int(np.argmax(err))
    assert err[worst] <= 1.0, (
        f"{function}({x[worst]!r}) = {got[worst]!r}, reference {ref[worst]!r}: {err[worst]:.3f} ulp"
    )
    # Exact zeros stay exact (sin(pi k), cos(pi (k + 1/2))), and where the
    # reference is exactly representable the result is that float.
    exact = ref == ref.astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(got[exact & (np.abs(ref) < 1.5)].astype(np.float64),
                                  ref[exact & (np.abs(ref) < 1.5)])


def test_portable_math_special_values(backend_name):
    x = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0])
    out = math_probe(backend_name, x)
    log, exp, sin, cos, sinpi, cospi = out.T
    assert log[0] == -np.inf and log[1] == -np.inf and log[2] == np.inf
    assert np.isnan(log[3]) and np.isnan(log[4]) and np.isnan(log[5])
    assert exp[0] == 1.0 and exp[2] == np.inf and exp[3] == 0.0 and np.isnan(exp[4])
    assert sin[0] == 0.0 and cos[0] == 1.0 and np.signbit(sin[1])
    assert all(np.isnan(v) for v in (sin[2], cos[2], sin[3], cos[3], sinpi[2], cospi[3], sin[4], cospi[4]))
    assert sinpi[5] == 0.0 and cospi[5] == -1.0
    big = math_probe(backend_name, np.float32([100.0, -200.0, 1e30]))
    assert np.all(big[:, 1][:2] == np.float32([np.inf, 0.0]))
    np.testing.assert_array_equal(big[:, 4], np.float32([0.0, 0.0, 0.0]))  # sin(pi * even integer)


def test_math_probe_does_not_depend_on_block_size(backend_name):
    x = _inputs("sinf", np.random.default_rng(7))[:1000]
    a = math_probe(backend_name, x, block=256)
    b = math_probe(backend_name, x, block=33)
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


# --------------------------------------------------------------------------- cpu == gpu, bit for bit


def _math_probe_inputs() -> np.ndarray:
    rng = np.random.default_rng(99)
    parts = [_inputs(f, rng) for f in MATH_COLUMNS]
    special = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38, 3.4028235e38])
    return np.concatenate(parts + [special]).astype(np.float32)


@pytest.mark.gpu
def test_math_probe_bit_identical_cpu_and_gpu():
    x = _math_probe_inputs()
    cpu = math_probe("cpu", x).view(np.uint32)
    gpu = math_probe("pycuda", x).view(np.uint32)
    differ = np.argwhere(cpu != gpu)
    assert differ.size == 0, (
        f"{len(differ)} results differ; first: x={x[differ[0][0]]!r} column {differ[0][1]} "
        f"cpu {cpu[tuple(differ[0])]:08x} gpu {gpu[tuple(differ[0])]:08x}"
    )


@pytest.mark.gpu
@pytest.mark.parametrize("seed,counter,domain", [(0, 0, 0), (12345, 7, 1), (2 ** 63 - 1, 2 ** 40 + 3, 0x706F6F6C)])
def test_rng_probe_bit_identical_cpu_and_gpu(seed, counter, domain):
    n = 50_000
    cpu = rng_probe("cpu", n, seed, counter, domain).view(np.uint32)
    gpu = rng_probe("pycuda", n, seed, counter, domain).view(np.uint32)
    np.testing.assert_array_equal(cpu, gpu)


@pytest.mark.gpu
def test_philox_kat_bit_identical_cpu_and_gpu():
    rng = np.random.default_rng(5)
    rows = rng.integers(0, 2 ** 32, size=(5000, 6), dtype=np.uint64).astype(np.uint32)
    np.testing.assert_array_equal(philox_kat("cpu", rows), philox_kat("pycuda", rows))


# --------------------------------------------------------------------------- the rng probe itself


def test_rng_probe_distribution(backend_name):
    """Uniforms in (0, 1], normals N(0, 1), all a pure function of the inputs."""
    n = 40_000
    out = rng_probe(backend_name, n, seed=42, counter=3, domain=9)
    u, z = out[:, 0].astype(np.float64), out[:, 1:].astype(np.float64).ravel()
    assert u.min() > 0.0 and u.max() <= 1.0
    assert abs(u.mean() - 0.5) < 5 * math.sqrt(1 / 12 / n)
    assert abs(z.mean()) < 5 / math.sqrt(z.size)
    assert abs(z.var() - 1.0) < 5 * math.sqrt(2 / z.size)
    # Kolmogorov-Smirnov against N(0, 1): P(sqrt(n) D > 2.7) < 2e-6.
    zs = np.sort(z)
    cdf = torch.special.ndtr(torch.from_numpy(zs)).numpy()
    m = zs.size
    d = max(np.max(np.arange(1, m + 1) / m - cdf), np.max(cdf - np.arange(m) / m))
    assert math.sqrt(m) * d < 2.7
    again = rng_probe(backend_name, n, seed=42, counter=3, domain=9)
    np.testing.assert_array_equal(out.view(np.uint32), again.view(np.uint32))
    for other in (dict(seed=43, counter=3, domain=9), dict(seed=42, counter=4, domain=9),
                  dict(seed=42, counter=3, domain=10)):
        different = rng_probe(backend_name, n, **other)
        assert np.mean(different[:, 0] == out[:, 0]) < 0.01, other
