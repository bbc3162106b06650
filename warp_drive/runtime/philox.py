"""Philox4x32-10 in NumPy: the host twin of ``warp_drive/cuda/include/warp_drive/philox.h``.

A NumPy reference of an env's reset kernel (``Environment.reference_reset``) draws its random starts with the
functions here, which return the very bits the kernel's ``wd_reset_*`` helpers return for the same
``(reset_seed, reset_count, env, k)``: the consistency checker can then compare a device reset with its
reference bit for bit, and the single-env host API can start an episode without a kernel. Every function
broadcasts over array arguments (e.g. ``env[:, None]`` against ``k[None, :]``). Integer arithmetic only, and
float32 conversions with each operation rounded as the header rounds it, so nothing depends on the platform.
Torch-free (the env layer imports it).
"""

from __future__ import annotations

import numpy as np

# The header's WD_RESET_KERNEL_DOMAIN: 'R' in the top byte, the block of four draws in the low 24 bits.
RESET_KERNEL_DOMAIN = 0x52000000
MAX_RESET_DRAWS = 1 << 26  # draws per env and reset call

_M32 = np.uint64(0xFFFFFFFF)
_MUL = (np.uint64(0xD2511F53), np.uint64(0xCD9E8D57))
_WEYL = (np.uint32(0x9E3779B9), np.uint32(0xBB67AE85))


def _u32(x) -> np.ndarray:
    return np.asarray(x).astype(np.uint64) & _M32


def philox4x32_10(ctr: tuple, key: tuple) -> tuple[np.ndarray, ...]:
    """The Philox4x32 bijection with 10 rounds (Random123's ``philox4x32_R(10, ...)``): four uint32 words of
    counter and two of key (arrays broadcast together) to four uint32 words."""
    c0, c1, c2, c3 = (_u32(c) for c in ctr)
    k0, k1 = (_u32(k) for k in key)
    with np.errstate(over="ignore"):
        for round_ in range(10):
            if round_ > 0:
                k0 = (k0 + np.uint64(_WEYL[0])) & _M32
                k1 = (k1 + np.uint64(_WEYL[1])) & _M32
            p0, p1 = _MUL[0] * c0, _MUL[1] * c2  # < 2^64: exact in uint64
            c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & _M32,
                              (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & _M32)
    return tuple(c.astype(np.uint32) for c in (c0, c1, c2, c3))


def random_bits(seed, counter, stream, domain) -> tuple[np.ndarray, ...]:
    """``wd_random_bits``: 128 bits (four uint32 arrays) for (seed, counter, stream, domain)."""
    seed, counter = np.asarray(seed, np.uint64), np.asarray(counter, np.uint64)
    ctr = (counter & _M32, counter >> np.uint64(32), _u32(stream), _u32(domain))
    return philox4x32_10(ctr, (seed & _M32, seed >> np.uint64(32)))


def uint_to_uniform(bits) -> np.ndarray:
    """``wd_uint_to_uniform``: float32 in (0, 1], ``((bits >> 8) + 1) * 2^-24`` (exact)."""
    return (((np.asarray(bits, np.uint32) >> np.uint32(8)) + np.uint32(1)).astype(np.float32)
            * np.float32(2.0 ** -24))


def reset_bits(reset_seed, reset_count, env, k) -> np.ndarray:
    """``wd_reset_bits``: draw ``k`` (uint32) of env ``env``'s start at reset call ``reset_count``."""
    k = np.asarray(k, np.uint64)
    if (k >= MAX_RESET_DRAWS).any():
        raise ValueError(f"reset_bits: draw index k must be below 2^26 per env and reset; got {int(k.max())}")
    words = random_bits(reset_seed, reset_count, env, np.uint64(RESET_KERNEL_DOMAIN) | (k >> np.uint64(2)))
    lane = (k & np.uint64(3)).astype(np.int64)
    return np.choose(lane, words).astype(np.uint32)


def reset_uniform(reset_seed, reset_count, env, k) -> np.ndarray:
    """``wd_reset_uniform``: float32 in (0, 1]."""
    return uint_to_uniform(reset_bits(reset_seed, reset_count, env, k))


def reset_uniform_in(reset_seed, reset_count, env, k, low, high) -> np.ndarray:
    """``wd_reset_uniform_in``: ``low + (high - low) * u`` in float32, each operation rounded to nearest."""
    low, high = np.float32(low), np.float32(high)
    return (low + (high - low) * reset_uniform(reset_seed, reset_count, env, k)).astype(np.float32)


def reset_int(reset_seed, reset_count, env, k, n) -> np.ndarray:
    """``wd_reset_int``: int32 in ``[0, n)``, ``floor(bits * n / 2^32)``."""
    bits = reset_bits(reset_seed, reset_count, env, k).astype(np.uint64)
    return ((bits * np.asarray(n, np.uint64)) >> np.uint64(32)).astype(np.int32)
