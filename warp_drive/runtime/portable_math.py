"""NumPy ports of ``warp_drive/cuda/include/warp_drive/portable_math.h``, bit for bit.

``sincos32``/``sin32``/``cos32`` port ``wd_sincosf``; ``expf32``/``logf32`` port
``wd_expf``/``wd_logf`` (``log1p32`` builds log(1 + y) from them, as SimpleSpread's
kernel does). An environment's NumPy reference can only match its kernel exactly if it
computes what the kernel computes: NumPy float32 ufuncs round every +, -, *
and / on their own (no FMA contraction), exactly like the header's
``wd_f*_rn`` helpers, so an operation-by-operation port returns the kernel's
bits for every float32 input. (float64 sin/cos rounded to float32 differ from
``wd_sincosf`` by an ulp now and then, and e.g. the Acrobot's one-step map
amplifies an ulp by up to ~1e4-1e5 at high speeds.)
"""

from __future__ import annotations

import numpy as np

F32 = np.float32

_ONE, _HALF = F32(1.0), F32(0.5)


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _fast_two_sum(a, b):
    s = a + b
    return s, b - (s - a)


def _split(a):
    c = F32(4097.0) * a
    h = c - (c - a)
    return h, a - h


def _two_prod(a, b):
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    err = ah * bh - p
    err = err + ah * bl
    err = err + al * bh
    return p, err + al * bl


def _mad(a, b, c):
    return a * b + c


def _sincos_kernel(rh, rl, quadrant):
    """``wd_detail_sincos_kernel``: |r| <= ~pi/4, r = rh + rl."""
    z = rh * rh
    ps = _mad(z, F32(-2.5052108385441720e-08), F32(2.7557319223985891e-06))
    ps = _mad(z, ps, F32(-1.9841269841269841e-04))
    ps = _mad(z, ps, F32(8.3333333333333333e-03))
    ps = _mad(z, ps, F32(-1.6666666666666667e-01))
    v = z * rh
    s = rh + (v * ps + rl * (_ONE - _HALF * z))
    zh, zl = _two_prod(rh, rh)
    hz = _HALF * zh
    w = _ONE - hz
    corr = (_ONE - w) - hz
    pc = _mad(z, F32(-2.7557319223985891e-07), F32(2.4801587301587302e-05))
    pc = _mad(z, pc, F32(-1.3888888888888889e-03))
    pc = _mad(z, pc, F32(4.1666666666666667e-02))
    pc = (z * z) * pc
    c = w + (corr + (pc - (_HALF * zl + rh * rl)))
    # quadrant 0: (s, c), 1: (c, -s), 2: (-s, -c), 3: (-c, s); negation is exact.
    q = quadrant & 3
    odd = (q & 1) == 1
    sin = np.where(odd, c, s)
    cos = np.where(odd, s, c)
    sin = np.where(q >= 2, -sin, sin)
    cos = np.where((q == 1) | (q == 2), -cos, cos)
    return sin.astype(F32), cos.astype(F32)


_TWO_OVER_PI_WORDS = np.array(
    [0xA2F9836E, 0x4E441529, 0xFC2757D1, 0xF534DDC0, 0xDB629599, 0x3C439041, 0xFE5163AB, 0xDEBBC561,
     0xB7246E3A, 0x424DD2E0], dtype=np.uint64)


def _reduce_large(ax):
    """``wd_detail_reduce_large`` (Payne-Hanek) for finite ax >= 800, in integers."""
    u64 = np.uint64
    ix = ax.view(np.uint32).astype(np.int64)
    exponent = (ix >> 23) - 150
    m = ((ix & 0x007FFFFF) | 0x00800000).astype(u64)
    first_bit = np.maximum(exponent - 1, 1)
    extra = (first_bit - exponent + 1).astype(u64)
    word, shift = (first_bit - 1) >> 5, ((first_bit - 1) & 31).astype(u64)
    t0, t1, t2, t3 = (_TWO_OVER_PI_WORDS[np.minimum(word + k, 9)] for k in range(4))
    mask32 = u64(0xFFFFFFFF)

    def join(hi, lo):  # (hi << shift) | (lo >> (32 - shift)) in 32 bits; hi when shift == 0
        return np.where(shift == 0, hi, ((hi << shift) & mask32) | (lo >> (u64(32) - shift)))

    w0, w1, w2 = join(t0, t1), join(t1, t2), join(t2, t3)
    acc = m * w2
    lo64 = acc & mask32
    acc = (acc >> u64(32)) + m * w1
    lo64 = lo64 | (acc << u64(32))
    acc = (acc >> u64(32)) + m * w0
    hi64 = acc
    chunk = (hi64 << (u64(32) - extra)) | (lo64 >> (u64(32) + extra))
    rounded = chunk + u64(1 << 61)
    quadrant = (rounded >> u64(62)).astype(np.int64)
    frac = (chunk - ((rounded >> u64(62)) << u64(62))).view(np.int64)
    fh = frac.astype(F32)
    fl = (frac - fh.astype(np.int64)).astype(F32)
    two_m62 = F32(2.168404344971009e-19)
    fh, fl = fh * two_m62, fl * two_m62
    pio2_hi, pio2_lo = F32(1.5707963705062866), F32(-4.371138828673793e-08)
    p, e = _two_prod(fh, pio2_hi)
    e = e + (fh * pio2_lo + fl * pio2_hi)
    rh, rl = _fast_two_sum(p, e)
    return quadrant, rh, rl


def sincos32(x) -> tuple[np.ndarray, np.ndarray]:
    """``wd_sincosf`` over a float32 array: ``(sin x, cos x)``, the kernels' exact bits."""
    x = np.atleast_1d(np.asarray(x, F32))
    ax = np.abs(x)
    with np.errstate(over="ignore", invalid="ignore"):
        finite = ax <= F32(3.4028234663852886e38)
        tiny = ax < F32(2.44140625e-04)  # 2^-12: sin x = x, cos x = 1
        direct = ax <= F32(0.785398185253143310546875)
        medium = ~direct & (ax < F32(800.0))
        large = finite & ~direct & ~medium
        # Cody-Waite for |x| < 800 (computed everywhere, selected below).
        xm = np.where(medium, x, F32(0.0))
        t = xm * F32(0.6366197466850281)
        quadrant = np.trunc(t + np.where(t < 0, F32(-0.5), F32(0.5))).astype(np.int64)
        fn = quadrant.astype(F32)
        rh, rl = _two_sum(xm, -(fn * F32(1.57073974609375)))
        rh, e = _two_sum(rh, -(fn * F32(5.657970905303955e-05)))
        rl = rl + e
        rh, e = _two_sum(rh, -(fn * F32(9.920881893776823e-10)))
        rl = rl + e
        rh, e = _two_sum(rh, -(fn * F32(5.390302953474238e-15)))
        rl = rl + e
        rh, rl = _fast_two_sum(rh, rl)
        rh = np.where(direct, x, rh)
        rl = np.where(direct, F32(0.0), rl)
        quadrant = np.where(direct, 0, quadrant)
        if large.any():
            ql, rhl, rll = _reduce_large(ax[large])
            negative = x[large] < 0
            quadrant[large] = np.where(negative, -ql, ql)
            rh[large] = np.where(negative, -rhl, rhl)
            rl[large] = np.where(negative, -rll, rll)
        sin, cos = _sincos_kernel(rh.astype(F32), rl.astype(F32), quadrant)
    sin = np.where(tiny, x, sin)
    cos = np.where(tiny, F32(1.0), cos)
    nan = F32(np.nan)
    return np.where(finite, sin, nan).astype(F32), np.where(finite, cos, nan).astype(F32)


def sin32(x) -> np.ndarray:
    """float32 sin, the kernels' ``wd_sincosf`` bits."""
    return sincos32(x)[0].reshape(np.shape(x))


def cos32(x) -> np.ndarray:
    """float32 cos, the kernels' ``wd_sincosf`` bits."""
    return sincos32(x)[1].reshape(np.shape(x))


# ------------------------------------------------------------ exp and log (moved from SimpleSpread)


def _from_bits(bits) -> np.ndarray:
    return np.asarray(bits, np.uint32).view(F32)


def expf32(x) -> np.ndarray:
    """``wd_expf`` over a float32 array (the kernel's bits)."""
    x = np.asarray(x, F32)
    with np.errstate(over="ignore", invalid="ignore"):
        normal = (x <= F32(89.0)) & (x >= F32(-104.0))
        xs = np.where(normal, x, F32(0.0)).astype(F32)
        t = xs * F32(1.4426950216293335)
        n = np.trunc(t + np.where(t < 0, F32(-0.5), F32(0.5))).astype(np.int32)
        fn = n.astype(F32)
        rh, rl = _two_sum(xs, -(fn * F32(6.93145751953125e-01)))
        rh, e = _two_sum(rh, -(fn * F32(1.428606765330187e-06)))
        rl = rl + e
        p = rh * F32(2.4801587301587302e-05) + F32(1.9841269841269841e-04)
        for c in (1.3888888888888889e-03, 8.3333333333333333e-03, 4.1666666666666667e-02,
                  1.6666666666666667e-01, 0.5):
            p = rh * p + F32(c)
        p = (rh * rh) * p
        tail = (rl + rl * rh) + p
        hi = F32(1.0) + rh
        lo = rh - (hi - F32(1.0))
        y = hi + (lo + tail)
        big = n > 127
        small = n < -126
        mid = ~big & ~small
        scale_mid = _from_bits((np.where(mid, n, 0) + 127).astype(np.uint32) << 23)
        scale_big = _from_bits(np.where(big, n, 128).astype(np.uint32) << 23)
        scale_small = _from_bits((np.where(small, n, -127) + 64 + 127).astype(np.uint32) << 23)
        out = np.where(mid, y * scale_mid, F32(0.0))
        out = np.where(big, (y * _from_bits(0x7F000000)) * scale_big, out)
        out = np.where(small, (y * scale_small) * F32(5.421010862427522e-20), out)
        out = np.where(x > F32(89.0), F32(np.inf), out)
        out = np.where(x < F32(-104.0), F32(0.0), out)
        out = np.where(np.isnan(x), x, out)
    return out.astype(F32)


def logf32(x) -> np.ndarray:
    """``wd_logf`` over a float32 array (the kernel's bits; ``log(+-0) = -inf``, ``log(inf) = inf``,
    NaN for negative or NaN inputs)."""
    x = np.asarray(x, F32)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return _logf32(x)


def _logf32(x: np.ndarray) -> np.ndarray:
    ix = x.view(np.uint32).astype(np.int64)
    subnormal = ix < 0x00800000
    scaled = (np.where(subnormal, x, F32(1.0)) * F32(33554432.0)).astype(F32).view(np.uint32).astype(np.int64)
    ix = np.where(subnormal, scaled, ix)
    k = np.where(subnormal, -25, 0) + (ix >> 23) - 127
    mantissa = ix & 0x007FFFFF
    upper = mantissa >= 0x3504F3
    mantissa = np.where(upper, mantissa | 0x3F000000, mantissa | 0x3F800000)
    k = k + upper
    f = _from_bits(mantissa.astype(np.uint32)) - F32(1.0)
    s = f / (F32(2.0) + f)
    z = s * s
    r = z * F32(1.8181818181818182e-01) + F32(2.2222222222222222e-01)
    for c in (2.8571428571428571e-01, 4.0000000000000000e-01, 6.6666666666666667e-01):
        r = z * r + F32(c)
    r = z * r
    hfsq = F32(0.5) * (f * f)
    small = s * (hfsq + r)
    fk = k.astype(F32)
    tail = (hfsq - (small + fk * F32(1.428606765330187e-06))) - f
    out = np.where(k == 0, f - (hfsq - small), fk * F32(6.93145751953125e-01) - tail)
    out = np.where(x == 0, F32(-np.inf), out)  # +0 and -0
    out = np.where(x == F32(np.inf), F32(np.inf), out)
    out = np.where(np.isnan(x) | (x < 0), F32(np.nan), out)
    return out.astype(F32)


def log1p32(y) -> np.ndarray:
    """The kernel's ``spread_log1pf`` for y >= 0: ``log(u) * (y / (u - 1))`` with ``u = 1 + y``
    (Goldberg's form, accurate for small y), y itself where ``u`` rounds to 1."""
    y = np.asarray(y, F32)
    u = F32(1.0) + y
    same = u == F32(1.0)
    denominator = np.where(same, F32(1.0), u - F32(1.0))
    return np.where(same, y, logf32(np.where(same, F32(2.0), u)) * (y / denominator)).astype(F32)
