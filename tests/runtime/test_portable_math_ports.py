"""The NumPy ports of ``portable_math.h`` in ``warp_drive.runtime.portable_math`` give the kernels' bits.

``wd_math_probe`` (the core kernel ``tests/runtime/test_philox_math.py`` uses)
evaluates ``wd_logf`` (column 0) and ``wd_expf`` (column 1) on each executor;
``expf32`` / ``logf32`` must return the very same float32 bits, special values
included. (``sincos32`` is checked through the classic-control kernels in
``tests/env/test_classic_control.py``.)
"""

from __future__ import annotations

import numpy as np
import torch

from warp_drive.runtime.function_manager import FunctionManager
from warp_drive.runtime.portable_math import expf32, log1p32, logf32


def _probe(backend_name: str, x: np.ndarray) -> np.ndarray:
    fm = FunctionManager(1, 1, backend=backend_name)
    device = fm.backend.device
    xs = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(device)
    out = torch.full((len(x), 6), float("nan"), dtype=torch.float32, device=device)
    fm.launch_flat("wd_math_probe", [xs, out, len(x)], len(x), 256)
    fm.backend.synchronize()
    return out.cpu().numpy()


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, np.float32).copy()
    a[np.isnan(a)] = np.float32(np.nan)  # one NaN pattern: the probe's and the port's may differ in payload
    return a.view(np.uint32)


def test_expf32_is_wd_expf(backend_name):
    rng = np.random.default_rng(27)
    x = np.concatenate([
        rng.uniform(-110.0, 95.0, 20000), rng.uniform(-1.0, 1.0, 5000), -rng.uniform(0.0, 1e-3, 2000),
        np.exp(rng.uniform(np.log(1e-30), np.log(1e-3), 2000)),
        [0.0, -0.0, 88.7, 88.72, 89.0, 89.5, -87.5, -103.9, -104.0, -104.5, np.inf, -np.inf, np.nan],
    ]).astype(np.float32)
    np.testing.assert_array_equal(_bits(expf32(x)), _bits(_probe(backend_name, x)[:, 1]))


def test_logf32_is_wd_logf(backend_name):
    rng = np.random.default_rng(28)
    x = np.concatenate([
        rng.integers(1, 0x7F800000, 20000, dtype=np.int64).astype(np.uint32).view(np.float32),  # every binade
        rng.uniform(0.5, 2.0, 5000).astype(np.float32), rng.uniform(1e-4, 1e4, 3000).astype(np.float32),
        np.float32([1.0, 2.0, 1.0000001, 0.99999994, 1e-45, 1.1754942e-38, 0.0, -0.0, np.inf, -1.0, np.nan]),
    ]).astype(np.float32)
    np.testing.assert_array_equal(_bits(logf32(x)), _bits(_probe(backend_name, x)[:, 0]))


def test_log1p32_is_accurate_for_small_arguments():
    y = np.float32([0.0, 1e-30, 1e-8, 1e-4, 0.5, 1.0, 10.0])
    got = log1p32(y).astype(np.float64)
    ref = np.log1p(y.astype(np.float64))
    np.testing.assert_allclose(got, ref, rtol=3e-7, atol=0)
