"""Behaviour of the executors that run CUDA C kernels.

Tests taking ``backend_name`` run on every executor (``cpu`` always, ``pycuda``
with a GPU): they check behaviour CUDA itself defines. The others are about
the cpu executor's own machinery (fast path, divergent-barrier and device
assert reports, build cache, worker pool, build modes).

Kernels live in ``tests/kernels/`` and are plain CUDA C that nvcc also builds.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from warp_drive.runtime.backends import KernelBuildError, KernelLaunchError, get_backend
from warp_drive.runtime.backends import build_cache

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
REPO_ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- helpers


@pytest.fixture(autouse=True)
def _shared_cpu_runtime_first():
    """Load the shared cpu backend (and its runtime library) before any test
    constructs a CpuBackend of its own: kernel libraries bind their runtime
    calls to the first runtime loaded in the process (see
    test_second_cpu_backend_runs_barrier_kernels)."""
    get_backend("cpu")


_modules: dict = {}


def load(backend, name: str):
    """The module built from ``tests/kernels/<name>`` (once per backend)."""
    key = (id(backend), name)
    if key not in _modules:
        _modules[key] = backend.build([KERNELS / name])
    return _modules[key]


def kernel(backend, file: str, name: str):
    return load(backend, file).get_function(name)


def dev(backend, array) -> torch.Tensor:
    """A device tensor holding a copy of ``array``."""
    return torch.from_numpy(np.ascontiguousarray(array).copy()).to(backend.device)


def host(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().cpu().numpy()


def line_of(file: str, marker: str) -> int:
    """1-based line of the (unique) line in tests/kernels/<file> containing ``marker``."""
    lines = [i for i, text in enumerate((KERNELS / file).read_text().splitlines(), 1) if marker in text]
    assert len(lines) == 1, f"marker {marker} must occur once in {file}"
    return lines[0]


def site(file: str, marker: str) -> str:
    return f"{KERNELS / file}:{line_of(file, marker)}"


@pytest.fixture
def backend(backend_name):
    return get_backend(backend_name)


@pytest.fixture
def cpu():
    return get_backend("cpu")


def rendezvous(cpu, blocks: int, max_polls: int = 3_000_000) -> np.ndarray:
    """saw_all per block of the ``rendezvous`` kernel: 1 where a block saw all
    ``blocks`` blocks running at the same time as itself."""
    arrived = torch.zeros(1, dtype=torch.int32)
    saw_all = torch.full((blocks,), -1, dtype=torch.int32)
    kernel(cpu, "sync.cu", "rendezvous")(arrived, saw_all, max_polls, grid=blocks, block=1)
    return saw_all.numpy()


def all_workers_live(cpu, workers: int, attempts: int = 200) -> bool:
    """True once a launch ran ``workers`` blocks at the same time, i.e. every
    thread of the pool has started.

    Resizing the pool again before that can deadlock (see
    test_pool_resized_right_after_creation), so the fixture below waits for it.
    """
    if workers < 2:
        return True
    return any(rendezvous(cpu, workers).all() for _ in range(attempts))


@pytest.fixture
def pool_size():
    """Resize the shared cpu worker pool; the previous size is restored afterwards."""
    shared = get_backend("cpu")
    previous = shared.num_workers  # may create the pool right now
    assert all_workers_live(shared, previous)

    def resize(n: int) -> None:
        shared.set_num_workers(n)
        assert shared.num_workers == n
        assert all_workers_live(shared, n), f"the {n} pool threads never ran blocks at the same time"

    yield resize
    shared.set_num_workers(previous)
    all_workers_live(shared, previous)


@pytest.fixture
def two_workers(backend_name, request):
    """Run blocks on two host threads when the executor is the cpu one.

    The cpu pool is touched only then: on a GPU machine the pycuda cases run
    beside other test processes, whose pools' threads (one per core each) can
    keep this process's pool from ever running all its blocks at once."""
    if backend_name == "cpu":
        request.getfixturevalue("pool_size")(2)


@pytest.fixture
def fresh_cpu(tmp_path, monkeypatch):
    """Factory of new CpuBackends whose build cache is ``tmp_path/cache``."""
    from warp_drive.runtime.backends.cpu import CpuBackend

    cache = tmp_path / "cache"
    monkeypatch.setenv("WARP_DRIVE_CACHE", str(cache))

    def make(**kwargs):
        return CpuBackend(**kwargs)

    make.cache = cache
    return make


def cache_files(cache: Path, pattern: str) -> set[str]:
    return {p.name for p in (cache / "cpu").glob(pattern)}


# --------------------------------------------------------------------------- 1-3: barriers and __shared__


@pytest.mark.parametrize("block", [256, 1000, 37])
def test_tree_reduction_with_syncthreads(backend, two_workers, block):
    rng = np.random.default_rng(block)
    blocks = 48
    n = blocks * block - block // 3  # the last block is partly past the end
    values = rng.integers(-1000, 1000, size=n, dtype=np.int32)
    out = dev(backend, np.full(blocks, -7, np.int32))
    kernel(backend, "sync.cu", "block_sum")(dev(backend, values), out, n, grid=blocks, block=block)
    backend.synchronize()
    padded = np.zeros(blocks * block, np.int64)
    padded[:n] = values
    np.testing.assert_array_equal(host(out), padded.reshape(blocks, block).sum(axis=1))


def test_stencil_rounds_exchange_neighbours_through_shared(backend, two_workers):
    rng = np.random.default_rng(1)
    blocks, width, rounds = 24, 100, 9
    cells = rng.integers(0, 10007, size=(blocks, width), dtype=np.int32)
    out = dev(backend, np.zeros_like(cells))
    kernel(backend, "sync.cu", "stencil_rounds")(dev(backend, cells), out, rounds, grid=blocks, block=width)
    backend.synchronize()
    expected = cells.astype(np.int64)
    for r in range(rounds):
        left, right = np.roll(expected, 1, axis=1), np.roll(expected, -1, axis=1)
        expected = (left + 2 * expected + 3 * right + r) % 10007
    np.testing.assert_array_equal(host(out), expected)


def test_syncthreads_count_and_or(backend, two_workers):
    rng = np.random.default_rng(2)
    blocks, width = 12, 70
    flags = rng.integers(0, 2, size=(blocks, width), dtype=np.int32)
    flags[0] = 1  # all
    flags[1] = 0  # none
    flags[2] = 0
    flags[2, 69] = 1  # only the last thread
    out = dev(backend, np.full((blocks, 3), -1, np.int32))
    kernel(backend, "sync.cu", "sync_predicates")(dev(backend, flags), out, grid=blocks, block=width)
    backend.synchronize()
    expected = np.stack([flags.sum(1), flags.all(1), flags.any(1)], axis=1).astype(np.int32)
    np.testing.assert_array_equal(host(out), expected)


def test_shared_inside_device_helper_is_per_block(backend, two_workers):
    blocks, width = 200, 32
    fn = kernel(backend, "sync.cu", "shared_in_helper")
    for _ in range(3):
        out = dev(backend, np.full(blocks * width, -1, np.int32))
        arrived = dev(backend, np.zeros(blocks // 2, np.int32))
        fn(out, arrived, 200_000, grid=blocks, block=width)
        backend.synchronize()
        np.testing.assert_array_equal(host(out), np.repeat(np.arange(blocks, dtype=np.int32), width))


# --------------------------------------------------------------------------- 4: dynamic shared memory


def test_dynamic_shared_memory(backend, two_workers):
    blocks, width = 9, 300
    data = np.arange(blocks * width, dtype=np.float32).reshape(blocks, width) * 0.5
    out = dev(backend, np.zeros_like(data))
    fn = kernel(backend, "sync.cu", "dynamic_reverse")
    fn(dev(backend, data), out, grid=blocks, block=width, shared_mem=width * 4)
    backend.synchronize()
    np.testing.assert_array_equal(host(out), data[:, ::-1])


def test_dynamic_shared_memory_over_the_limit_is_refused(backend):
    fn = kernel(backend, "sync.cu", "dynamic_reverse")
    data = dev(backend, np.zeros(32, np.float32))
    too_much = backend.limits.max_dynamic_shared_bytes + 4
    with pytest.raises(KernelLaunchError, match=str(too_much)) as info:
        fn(data, data, grid=1, block=32, shared_mem=too_much)
    assert "dynamic_reverse" in str(info.value)
    # exactly the limit is fine
    fn(data, data, grid=1, block=32, shared_mem=backend.limits.max_dynamic_shared_bytes)
    backend.synchronize()


# --------------------------------------------------------------------------- 5: __constant__


def eval_poly(backend, module, x: np.ndarray) -> np.ndarray:
    out = dev(backend, np.zeros_like(x))
    module.get_function("eval_poly")(dev(backend, x), out, len(x), grid=2, block=32)
    backend.synchronize()
    return host(out)


def test_set_constant_changes_the_kernel(backend):
    module = load(backend, "constants.cu")
    x = np.arange(-20, 20, dtype=np.float32) * 0.5
    module.set_constant("poly_coeffs", np.array([1, 2, 3, 4], np.float32))
    module.set_constant("int_offset", np.array([10], np.int32))
    first = eval_poly(backend, module, x)
    np.testing.assert_array_equal(first, (((4 * x + 3) * x + 2) * x + 1) + 10)
    module.set_constant("poly_coeffs", np.array([0, -1, 0, 0.5], np.float32))
    module.set_constant("int_offset", np.int32(-3))
    second = eval_poly(backend, module, x)
    np.testing.assert_array_equal(second, ((0.5 * x) * x - 1) * x - 3)


def test_set_constant_refuses_wrong_size_and_unknown_names(backend):
    module = load(backend, "constants.cu")
    with pytest.raises(ValueError, match="poly_coeffs"):
        module.set_constant("poly_coeffs", np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="int_offset"):
        module.set_constant("int_offset", np.zeros(2, np.int32))
    with pytest.raises(KeyError) as info:
        module.set_constant("poly_coefs", np.zeros(4, np.float32))
    message = str(info.value)
    assert "poly_coefs" in message and "poly_coeffs" in message and "int_offset" in message


def test_function_manager_initializes_shared_constants(backend_name):
    from warp_drive.runtime.data_manager import DataManager
    from warp_drive.runtime.function_manager import FunctionManager

    backend = get_backend(backend_name)
    dm = DataManager(num_envs=2, num_agents=4, episode_length=3, backend=backend_name)
    dm.add_shared_constants({"poly_coeffs": np.array([2, 0, 1, 0], np.float32), "int_offset": 7,
                             "not_in_any_module": 1})
    fm = FunctionManager(num_envs=2, num_agents=4, backend=backend_name)
    module = fm.compile_and_load(KERNELS / "constants.cu")
    fm.initialize_shared_constants(dm, ["poly_coeffs", "int_offset"])
    x = np.linspace(-3, 3, 40).astype(np.float32)
    np.testing.assert_array_equal(eval_poly(backend, module, x), (x * x + 2) + 7)
    with pytest.raises(KeyError, match="not_in_any_module"):
        fm.initialize_shared_constants(dm, ["not_in_any_module"])


# --------------------------------------------------------------------------- 6: atomics


def test_atomic_add_int_and_float_under_contention(backend, two_workers):
    blocks, width = 1000, 256
    counter = dev(backend, np.zeros(1, np.int32))
    wide = torch.zeros(1, dtype=torch.uint64, device=backend.device)
    kernel(backend, "atomics.cu", "atomic_add_int")(counter, wide, grid=blocks, block=width)
    fsum = dev(backend, np.zeros(1, np.float32))
    kernel(backend, "atomics.cu", "atomic_add_float")(fsum, grid=blocks, block=width)
    backend.synchronize()
    assert host(counter)[0] == blocks * width
    assert int(wide.cpu()[0]) == 3 * blocks * width
    assert host(fsum)[0] == 0.5 * blocks * width


def test_atomic_min_max(backend, two_workers):
    rng = np.random.default_rng(6)
    n = 200_000
    values = rng.integers(-10**6, 10**6, size=n, dtype=np.int32)
    lowest = dev(backend, np.array([np.iinfo(np.int32).max], np.int32))
    highest = dev(backend, np.array([np.iinfo(np.int32).min], np.int32))
    ulowest = torch.full((1,), 0xFFFFFFFF, dtype=torch.uint32, device=backend.device)
    uhighest = torch.zeros(1, dtype=torch.uint32, device=backend.device)
    kernel(backend, "atomics.cu", "atomic_min_max")(
        dev(backend, values), n, lowest, highest, ulowest, uhighest, grid=(n + 255) // 256, block=256
    )
    backend.synchronize()
    assert host(lowest)[0] == values.min()
    assert host(highest)[0] == values.max()
    as_unsigned = values.view(np.uint32)
    assert int(ulowest.cpu()[0]) == as_unsigned.min()
    assert int(uhighest.cpu()[0]) == as_unsigned.max()


def test_atomic_cas_counter_hands_out_every_ticket_once(backend, two_workers):
    blocks, width = 400, 128
    n = blocks * width
    counter = dev(backend, np.zeros(1, np.int32))
    tickets = dev(backend, np.full(n, -1, np.int32))
    kernel(backend, "atomics.cu", "atomic_cas_counter")(counter, tickets, grid=blocks, block=width)
    backend.synchronize()
    assert host(counter)[0] == n
    np.testing.assert_array_equal(np.sort(host(tickets)), np.arange(n))


def test_atomic_exchange_loses_no_value(backend, two_workers):
    blocks, width = 500, 64
    n = blocks * width
    slot = dev(backend, np.zeros(1, np.int32))
    seen = dev(backend, np.full(n, -1, np.int32))
    kernel(backend, "atomics.cu", "atomic_exchange")(slot, seen, grid=blocks, block=width)
    backend.synchronize()
    everything = np.concatenate([host(seen), host(slot)])
    np.testing.assert_array_equal(np.sort(everything), np.arange(n + 1))


# --------------------------------------------------------------------------- 7: divergent barriers (cpu)


def assert_still_works(cpu) -> None:
    """A correct launch right after a failed one computes the right answer."""
    values = np.arange(3 * 256, dtype=np.int32)
    out = dev(cpu, np.zeros(3, np.int32))
    kernel(cpu, "sync.cu", "block_sum")(dev(cpu, values), out, len(values), grid=3, block=256)
    np.testing.assert_array_equal(host(out), values.reshape(3, 256).sum(1))


@pytest.mark.parametrize("workers", [1, 2])
def test_divergent_barrier_thread0_exits_early(cpu, pool_size, workers):
    pool_size(workers)
    out = dev(cpu, np.zeros(64, np.int32))
    with pytest.raises(KernelLaunchError) as info:
        kernel(cpu, "divergent.cu", "early_exit")(out, grid=20, block=8)
    message = str(info.value)
    assert "early_exit" in message
    assert "divergent barrier" in message
    assert site("divergent.cu", "BARRIER_EARLY") in message
    assert_still_works(cpu)


@pytest.mark.parametrize("workers", [1, 2])
def test_divergent_barrier_two_sites(cpu, pool_size, workers):
    pool_size(workers)
    out = dev(cpu, np.zeros(64, np.int32))
    with pytest.raises(KernelLaunchError) as info:
        kernel(cpu, "divergent.cu", "even_odd")(out, grid=20, block=8)
    message = str(info.value)
    assert "even_odd" in message and "divergent barrier" in message
    assert site("divergent.cu", "BARRIER_EVEN") in message
    assert site("divergent.cu", "BARRIER_ODD") in message
    assert_still_works(cpu)


@pytest.mark.parametrize("name, marker", [("late_exit", "BARRIER_LATE"),
                                          ("exit_after_first_barrier", "BARRIER_SECOND")])
def test_divergent_barrier_threads_exit_after_thread0_waits(cpu, pool_size, name, marker):
    pool_size(2)
    out = dev(cpu, np.zeros(64, np.int32))
    with pytest.raises(KernelLaunchError) as info:
        kernel(cpu, "divergent.cu", name)(out, grid=20, block=8)
    message = str(info.value)
    assert name in message and "divergent barrier" in message
    assert site("divergent.cu", marker) in message
    assert "exited" in message
    assert_still_works(cpu)


# --------------------------------------------------------------------------- 8: fast path


def test_fast_path_runs_barrier_free_blocks_plainly(cpu, pool_size):
    pool_size(2)
    n, width = 1000, 64
    blocks = (n + width - 1) // width
    x = np.arange(n, dtype=np.float32)
    out = dev(cpu, np.zeros(n, np.float32))

    before = cpu.stats()
    kernel(cpu, "sync.cu", "scale_plain")(dev(cpu, x), out, 2.5, n, grid=blocks, block=width)
    after = cpu.stats()
    assert after["launches"] == before["launches"] + 1
    assert after["plain_blocks"] == before["plain_blocks"] + blocks
    assert after["fiber_blocks"] == before["fiber_blocks"]
    np.testing.assert_array_equal(host(out), x * np.float32(2.5))

    before = after
    kernel(cpu, "sync.cu", "rotate_with_barrier")(dev(cpu, x), out, n, grid=blocks, block=width)
    after = cpu.stats()
    assert after["fiber_blocks"] == before["fiber_blocks"] + blocks
    assert after["plain_blocks"] == before["plain_blocks"]
    padded = np.zeros(blocks * width, np.float32)
    padded[:n] = x
    np.testing.assert_array_equal(host(out), np.roll(padded.reshape(blocks, width), -1, axis=1).ravel()[:n])


def test_fast_path_and_fibers_mix_within_one_launch(cpu, pool_size):
    pool_size(2)
    blocks, width = 21, 40
    out = dev(cpu, np.zeros((blocks, width), np.int32))
    before = cpu.stats()
    kernel(cpu, "sync.cu", "mixed_paths")(out, grid=blocks, block=width)
    after = cpu.stats()
    assert after["fiber_blocks"] - before["fiber_blocks"] == blocks // 2
    assert after["plain_blocks"] - before["plain_blocks"] == blocks - blocks // 2
    t = np.arange(width)
    expected = np.array([b * 1000 + ((t + 1) % width if b % 2 else t) for b in range(blocks)])
    np.testing.assert_array_equal(host(out), expected)


# --------------------------------------------------------------------------- 9: build errors


def test_build_error_names_file_and_line(backend, tmp_path):
    source = tmp_path / "broken.cu"
    source.write_text(textwrap.dedent("""\
        // broken on purpose
        extern "C" __global__ void broken(int* out) {
          out[0] = 1 + ;
        }
        """))
    with pytest.raises(KernelBuildError) as info:
        backend.build([source])
    message = str(info.value)
    assert re.search(re.escape(str(source.resolve())) + r"(:3:|\(3\))", message), message


def test_preprocessing_error_names_file_and_line(backend, tmp_path):
    source = tmp_path / "missing_include.cu"
    source.write_text(textwrap.dedent("""\
        // includes a header that does not exist
        #include "no_such_header_anywhere.h"
        extern "C" __global__ void k(int* out) { out[0] = 1; }
        """))
    with pytest.raises(KernelBuildError) as info:
        backend.build([source])
    message = str(info.value)
    assert "no_such_header_anywhere.h" in message
    assert re.search(re.escape(str(source.resolve())) + r"(:2:|\(2\))", message), message


def test_missing_source_file(backend, tmp_path):
    with pytest.raises(KernelBuildError, match="does_not_exist.cu"):
        backend.build([tmp_path / "does_not_exist.cu"])


# --------------------------------------------------------------------------- 10: build cache (cpu)

SCALED_SOURCE = """\
#include "scale.h"
extern "C" __global__ void scaled(const float* in, float* out, int n) {
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i] * SCALE;
}
"""


def write_scaled_source(directory: Path, scale: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "scale.h").write_text(f"#define SCALE {scale}\n")
    source = directory / "scaled.cu"
    source.write_text(SCALED_SOURCE)
    return source


def run_scaled(backend, module, n: int = 40) -> np.ndarray:
    # barrier-free: safe on any CpuBackend (see test_second_cpu_backend_runs_barrier_kernels)
    x = torch.arange(n, dtype=torch.float32)
    out = torch.zeros(n, dtype=torch.float32)
    module.get_function("scaled")(x, out, n, grid=2, block=32)
    return out.numpy() / np.arange(n, dtype=np.float32).clip(1)


def test_build_cache_reuses_and_rebuilds(fresh_cpu, tmp_path, monkeypatch):
    source = write_scaled_source(tmp_path / "src", "2.0f")
    first_backend = fresh_cpu()
    first = first_backend.build([source])
    assert first.from_cache is False
    np.testing.assert_array_equal(run_scaled(first_backend, first)[1:], 2.0)
    modules_after_first = cache_files(fresh_cpu.cache, "module_*.so")
    assert len(modules_after_first) == 1

    # A new backend (as in a new process) loads the product: no compiler runs.
    second_backend = fresh_cpu()
    with monkeypatch.context() as patch:
        def no_compiler(cmd, what):
            raise AssertionError(f"the compiler ran although the module is cached: {what}")

        patch.setattr(build_cache, "run_compiler", no_compiler)
        second = second_backend.build([source])
    assert second.from_cache is True
    assert cache_files(fresh_cpu.cache, "module_*.so") == modules_after_first
    np.testing.assert_array_equal(run_scaled(second_backend, second)[1:], 2.0)

    # Editing an included header changes the key: a rebuild with the new value.
    (tmp_path / "src" / "scale.h").write_text("#define SCALE 3.0f\n")
    third = second_backend.build([source])
    assert third.from_cache is False
    np.testing.assert_array_equal(run_scaled(second_backend, third)[1:], 3.0)
    assert len(cache_files(fresh_cpu.cache, "module_*.so")) == 2
    assert not list((fresh_cpu.cache / "cpu").glob("*.tmp"))


CONCURRENT_BUILD_SCRIPT = """
import sys
import torch
from warp_drive.runtime.backends.cpu import CpuBackend
module = CpuBackend().build([sys.argv[1]])
x = torch.arange(8, dtype=torch.float32)
out = torch.zeros(8)
module.get_function("scaled")(x, out, 8, grid=1, block=8)
assert out.tolist() == [5.0 * v for v in range(8)], out.tolist()
print("built", module.from_cache)
"""


@pytest.mark.slow
def test_concurrent_builds_of_one_source(tmp_path):
    source = write_scaled_source(tmp_path / "src", "5.0f")
    cache = tmp_path / "shared-cache"
    env = dict(os.environ, WARP_DRIVE_CACHE=str(cache))
    procs = [
        subprocess.Popen([sys.executable, "-c", CONCURRENT_BUILD_SCRIPT, str(source)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        for _ in range(2)
    ]
    results = [p.communicate(timeout=240) for p in procs]
    for proc, (out, err) in zip(procs, results):
        assert proc.returncode == 0, f"rc={proc.returncode}\n{out}\n{err}"
        assert "built" in out
    assert len(cache_files(cache, "module_*.so")) == 1
    assert len(cache_files(cache, "wd_runtime_*.so")) == 1
    assert not list((cache / "cpu").glob("*.tmp"))


# --------------------------------------------------------------------------- 11: argument checks


def echo_arrays(backend):
    return (dev(backend, np.zeros(2, np.int32)), dev(backend, np.zeros(2, np.float32)),
            dev(backend, np.zeros(2, np.int64)))


def test_arguments_arrive_with_their_c_types(backend):
    fn = kernel(backend, "arguments.cu", "echo_args")
    ints, floats, wides = echo_arrays(backend)
    fn(ints, floats, wides, -42, 1.5, True, 2**63, 0.123456789012, grid=1, block=1)
    backend.synchronize()
    assert host(ints).tolist() == [-42, 1]
    assert host(floats).tolist() == [1.5, float(np.float32(0.246913578024))]
    assert host(wides).view(np.uint64)[0] == 2**63
    assert host(wides)[1] == int(0.123456789012 * 1e9)  # the double was not narrowed to float
    fn(ints, floats, wides, np.int32(7), np.float32(0.25), False, np.uint64(5), 1, grid=1, block=1)
    backend.synchronize()
    assert host(ints).tolist() == [7, 0]
    assert host(wides)[0] == 5


def test_wrong_number_of_arguments_shows_the_signature(backend):
    fn = kernel(backend, "arguments.cu", "echo_args")
    ints, floats, wides = echo_arrays(backend)
    with pytest.raises(KernelLaunchError) as info:
        fn(ints, floats, wides, 1, 1.0, grid=1, block=1)
    message = str(info.value)
    assert "echo_args" in message and "8" in message and "5" in message
    assert fn.signature.describe() in message
    assert "unsigned long long big" in message


def test_wrong_array_dtype_names_kernel_parameter_and_dtypes(backend):
    fn = kernel(backend, "arguments.cu", "echo_args")
    ints, floats, wides = echo_arrays(backend)
    with pytest.raises(KernelLaunchError) as info:
        fn(floats, floats, wides, 1, 1.0, True, 1, 1.0, grid=1, block=1)
    message = str(info.value)
    assert "echo_args" in message and "ints" in message
    assert "int32" in message and "float32" in message


@pytest.mark.parametrize("bad, expected", [
    ("non_contiguous", "contiguous"),
    ("numpy", "tensor"),
    ("list", "tensor"),
])
def test_arrays_must_be_contiguous_tensors(backend, bad, expected):
    fn = kernel(backend, "arguments.cu", "echo_args")
    ints, floats, wides = echo_arrays(backend)
    value = {
        "non_contiguous": dev(backend, np.zeros((4, 4), np.int32))[:, 1],
        "numpy": np.zeros(2, np.int32),
        "list": [0, 0],
    }[bad]
    with pytest.raises(KernelLaunchError, match=expected) as info:
        fn(value, floats, wides, 1, 1.0, True, 1, 1.0, grid=1, block=1)
    assert "ints" in str(info.value)


@pytest.mark.parametrize("position, value, expected", [
    (3, 1.5, "count"),         # non-integral float for an int
    (3, 2**40, "count"),       # does not fit in int32
    (3, -2**31 - 1, "count"),
    (3, "3", "count"),         # not a number
    (5, 2, "flag"),            # bool is 0 or 1
    (6, -1, "big"),            # unsigned
    (6, 2**64, "big"),
])
def test_scalar_arguments_are_range_checked(backend, position, value, expected):
    fn = kernel(backend, "arguments.cu", "echo_args")
    ints, floats, wides = echo_arrays(backend)
    args = [ints, floats, wides, 1, 1.0, True, 1, 1.0]
    args[position] = value
    with pytest.raises(KernelLaunchError, match=expected) as info:
        fn(*args, grid=1, block=1)
    assert "echo_args" in str(info.value)


def test_bound_launch_set_scalar(backend):
    fn = kernel(backend, "arguments.cu", "add_step")
    out = dev(backend, np.zeros(64, np.int32))
    bound = fn.bind(out, 1)
    bound.launch(2, 32)
    bound.set_scalar(1, 5)
    bound.launch(2, 32)
    backend.synchronize()
    np.testing.assert_array_equal(host(out), 6)
    with pytest.raises(KernelLaunchError, match="pointer"):
        bound.set_scalar(0, 3)
    with pytest.raises(KernelLaunchError, match="step"):
        bound.set_scalar(1, 2**40)
    bound.launch(2, 32)  # the refused value left the old one in place
    backend.synchronize()
    np.testing.assert_array_equal(host(out), 11)


def test_invalid_geometry_is_refused(backend):
    fn = kernel(backend, "arguments.cu", "add_step")
    out = dev(backend, np.zeros(4, np.int32))
    for grid, block in [(0, 4), (1, 0), ((1, 1, 1, 1), 4), (1, (2, -1))]:
        with pytest.raises(KernelLaunchError):
            fn(out, 1, grid=grid, block=block)


def test_geometry_as_tuples_and_ints(backend):
    fn = kernel(backend, "arguments.cu", "add_step")
    out = dev(backend, np.zeros(64, np.int32))
    fn(out, 1, grid=2, block=32)
    fn(out, 1, grid=(2,), block=(32, 1))
    fn(out, 1, grid=(2, 1, 1), block=(32, 1, 1))
    backend.synchronize()
    np.testing.assert_array_equal(host(out), 3)


def test_geometry_as_lists():
    backend = get_backend("cpu")
    fn = kernel(backend, "arguments.cu", "add_step")
    out = dev(backend, np.zeros(64, np.int32))
    fn(out, 1, grid=[2], block=[32, 1, 1])
    np.testing.assert_array_equal(host(out), 1)


@pytest.mark.parametrize("grid, block", [(2**32 + 1, 1), (1, 2**32 + 2), ((2, 2**32 + 1), 1)])
def test_oversized_geometry_is_refused(grid, block):
    backend = get_backend("cpu")
    fn = kernel(backend, "arguments.cu", "add_step")
    out = dev(backend, np.zeros(64, np.int32))
    with pytest.raises(KernelLaunchError):
        fn(out, 1, grid=grid, block=block)


def test_unknown_kernel_name_lists_the_defined_ones(backend):
    module = load(backend, "arguments.cu")
    assert set(module.kernel_names) == {"echo_args", "add_step"}
    with pytest.raises(KeyError) as info:
        module.get_function("add_stepp")
    assert "add_stepp" in str(info.value) and "add_step" in str(info.value) and "echo_args" in str(info.value)


# --------------------------------------------------------------------------- 12: assert and printf


@pytest.mark.parametrize("bad_index", [0, 37, 999])
def test_device_assert_on_plain_path(cpu, pool_size, bad_index):
    pool_size(2)
    n = 1000
    values = np.arange(n, dtype=np.int32)
    values[bad_index] = -5
    out = dev(cpu, np.zeros(n, np.int32))
    fn = kernel(cpu, "assert_printf.cu", "check_non_negative")
    with pytest.raises(KernelLaunchError) as info:
        fn(dev(cpu, values), out, n, grid=(n + 31) // 32, block=32)
    message = str(info.value)
    assert "check_non_negative" in message and "assert" in message
    assert "values[i] >= 0" in message
    assert site("assert_printf.cu", "ASSERT_PLAIN") in message
    assert f"block ({bad_index // 32},0,0)" in message and f"thread ({bad_index % 32},0,0)" in message
    # the process survives and the next launch works
    values[bad_index] = 5
    fn(dev(cpu, values), out, n, grid=(n + 31) // 32, block=32)
    np.testing.assert_array_equal(host(out), values * 2)


@pytest.mark.parametrize("bad_index", [0, 77])
def test_device_assert_in_fiber_block(cpu, pool_size, bad_index):
    pool_size(2)
    n, width = 512, 128
    values = np.arange(n, dtype=np.int32)
    values[bad_index] = 5000
    out = dev(cpu, np.zeros(n, np.int32))
    fn = kernel(cpu, "assert_printf.cu", "check_with_barrier")
    with pytest.raises(KernelLaunchError) as info:
        fn(dev(cpu, values), out, n, grid=n // width, block=width)
    message = str(info.value)
    assert "check_with_barrier" in message and "s[t] < 1000" in message
    assert site("assert_printf.cu", "ASSERT_FIBER") in message
    values[bad_index] = 1
    fn(dev(cpu, values), out, n, grid=n // width, block=width)
    np.testing.assert_array_equal(host(out), np.roll(values.reshape(-1, width), -1, axis=1).ravel())
    assert_still_works(cpu)


def test_printf_reaches_stdout(backend, capfd):
    kernel(backend, "assert_printf.cu", "say_hello")(42, grid=3, block=4)
    backend.synchronize()
    out = capfd.readouterr().out
    for block in range(3):
        assert f"hello from block {block} tag 42" in out
    assert out.count("hello from block") == 3


# --------------------------------------------------------------------------- 13: math


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    def key(v):
        i = np.asarray(v, np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(2**31) - i, i)

    return np.abs(key(a) - key(b))


# CUDA's documented worst cases (Programming Guide, Mathematical Functions);
# the cpu executor uses glibc, whose float functions are within 1 ulp.
GPU_ULPS = {"sinf": 2, "cosf": 2, "expf": 2, "logf": 1, "powf": 4, "pow": 4}


def test_math_functions_and_float_overloads(backend):
    rng = np.random.default_rng(13)
    n = 4096
    a = rng.uniform(-8, 8, n).astype(np.float32)
    b = rng.uniform(-3, 3, n).astype(np.float32)
    a[:4] = [0.0, -0.0, 1.0, -2.5]
    out = dev(backend, np.zeros((n, 14), np.float32))
    kernel(backend, "math_overloads.cu", "math_ops")(dev(backend, a), dev(backend, b), out, n,
                                                     grid=n // 128, block=128)
    backend.synchronize()
    got = host(out)
    x, y = a.astype(np.float64), b.astype(np.float64)
    abs_x = np.abs(a)
    log_arg = (abs_x + np.float32(0.5)).astype(np.float64)  # the sum is rounded to float first
    expected = {
        "sqrtf": np.sqrt(abs_x.astype(np.float64)), "sinf": np.sin(x), "cosf": np.cos(x), "expf": np.exp(x),
        "logf": np.log(log_arg), "powf": np.power(log_arg, y), "fminf": np.minimum(x, y),
        "fmaxf": np.maximum(x, y), "fabsf": np.abs(x), "sqrt": np.sqrt(abs_x.astype(np.float64)),
        "pow": np.power(log_arg, y), "min": np.minimum(x, y), "max": np.maximum(x, y), "abs": np.abs(x),
    }
    for column, (name, reference) in enumerate(expected.items()):
        allowed = 1 if backend.name == "cpu" else GPU_ULPS.get(name, 1)
        distance = ulp_distance(got[:, column], reference.astype(np.float32))
        worst = int(distance.argmax())
        assert distance.max() <= allowed, (
            f"{name}({a[worst]}, {b[worst]}) = {got[worst, column]!r}, expected {reference[worst]!r} "
            f"({distance.max()} ulp)"
        )


def test_generic_math_names_have_float_overloads(backend):
    sizes = dev(backend, np.zeros(5, np.int32))
    values = dev(backend, np.zeros(5, np.float32))
    kernel(backend, "math_overloads.cu", "overload_sizes")(sizes, values, grid=1, block=1)
    backend.synchronize()
    assert host(sizes).tolist() == [4] * 5  # sqrt, pow, min, max, abs of floats are floats
    assert host(values).tolist() == [0.5, 1.5, 1.25, 2.25, 1.5]


# --------------------------------------------------------------------------- 14: a parameter named threadIdx


def test_parameter_named_threadidx(backend):
    out = dev(backend, np.zeros(3, np.int32))
    kernel(backend, "threadidx_param.cu", "param_named_threadIdx")(out, 10, grid=3, block=1)
    backend.synchronize()
    assert host(out).tolist() == [10, 11, 12]


# --------------------------------------------------------------------------- 15: worker-count independence


def run_histogram(cpu, values: np.ndarray, grid: int, block: int, nbins: int):
    bins = dev(cpu, np.zeros(nbins, np.int32))
    block_max = dev(cpu, np.full(grid, -2, np.int32))
    total = dev(cpu, np.zeros(1, np.int32))
    kernel(cpu, "sync.cu", "histogram")(dev(cpu, values), len(values), bins, nbins, block_max, total,
                                        grid=grid, block=block)
    return host(bins), host(block_max), host(total)


def test_blocks_run_in_parallel_on_the_pool(cpu, pool_size):
    pool_size(1)
    # one worker: blocks run one after the other, so only the last sees everyone
    np.testing.assert_array_equal(rendezvous(cpu, 2, max_polls=10_000), [0, 1])
    np.testing.assert_array_equal(rendezvous(cpu, 3, max_polls=10_000), [0, 0, 1])
    pool_size(2)  # the fixture already saw two blocks run at the same time
    assert any(rendezvous(cpu, 2).all() for _ in range(200))


POOL_CHURN_SCRIPT = """
import os, threading
from warp_drive.runtime.backends import get_backend

backend = get_backend("cpu")

def churn():
    for _ in range(200):
        backend.set_num_workers(2)  # destroys the pool created by the previous call at once
    print("survived", flush=True)

thread = threading.Thread(target=churn, daemon=True)
thread.start()
thread.join(5)
os._exit(3 if thread.is_alive() else 0)
"""


@pytest.mark.slow  # a child process each (over ~1.5 s on the 2-core VM)
def test_pool_resized_right_after_creation(tmp_path):
    proc = subprocess.run([sys.executable, "-c", POOL_CHURN_SCRIPT], capture_output=True, text=True,
                          timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, f"set_num_workers hung (rc={proc.returncode})\n{proc.stderr[-2000:]}"
    assert "survived" in proc.stdout


def test_results_do_not_depend_on_worker_count(cpu, pool_size):
    rng = np.random.default_rng(15)
    n, grid, block, nbins = 50_000, 37, 96, 50
    values = rng.integers(0, 10**6, size=n, dtype=np.int32)
    results = {}
    for workers in (1, 2):
        pool_size(workers)
        results[workers] = run_histogram(cpu, values, grid, block, nbins)
    for one, two in zip(results[1], results[2]):
        np.testing.assert_array_equal(one, two)
    bins, block_max, total = results[2]
    np.testing.assert_array_equal(bins, np.bincount(values % nbins, minlength=nbins))
    owner = (np.arange(n) % (grid * block)) // block
    np.testing.assert_array_equal(block_max, [values[owner == b].max() for b in range(grid)])
    assert total[0] == grid


# --------------------------------------------------------------------------- 16: 3-D geometry


@pytest.mark.parametrize("sync", [0, 1])
def test_3d_grid_and_block_indices(backend, two_workers, sync):
    grid, block = (3, 2, 4), (4, 3, 2)
    n_blocks, n_threads = int(np.prod(grid)), int(np.prod(block))
    out = dev(backend, np.full((n_blocks, n_threads, 12), -1, np.int32))
    kernel(backend, "sync.cu", "write_indices")(out, sync, grid=grid, block=block)
    backend.synchronize()
    # x varies fastest in both the linear block and the linear thread index
    bz, by, bx = np.meshgrid(*(np.arange(d) for d in grid[::-1]), indexing="ij")
    tz, ty, tx = np.meshgrid(*(np.arange(d) for d in block[::-1]), indexing="ij")
    expected = np.zeros((n_blocks, n_threads, 12), np.int32)
    expected[:, :, 0] = tx.ravel()[None, :]
    expected[:, :, 1] = ty.ravel()[None, :]
    expected[:, :, 2] = tz.ravel()[None, :]
    expected[:, :, 3] = bx.ravel()[:, None]
    expected[:, :, 4] = by.ravel()[:, None]
    expected[:, :, 5] = bz.ravel()[:, None]
    expected[:, :, 6:9] = block
    expected[:, :, 9:12] = grid
    np.testing.assert_array_equal(host(out), expected)


# --------------------------------------------------------------------------- 17: debug mode


def test_debug_mode_builds_and_runs_with_one_worker(cpu, pool_size):
    from warp_drive.runtime.backends.cpu import CpuBackend

    # `pool_size` restores the shared pool's size afterwards, whatever the debug backend did to it.
    debug = CpuBackend(mode="debug")
    assert debug.mode == "debug"
    assert debug.num_workers == 1
    module = debug.build([KERNELS / "sync.cu"])
    assert module.library_path != load(cpu, "sync.cu").library_path  # -O0: a product of its own
    n = 300
    x = torch.arange(n, dtype=torch.float32)
    out = torch.zeros(n)
    # barrier-free (see test_second_cpu_backend_runs_barrier_kernels)
    module.get_function("scale_plain")(x, out, 0.5, n, grid=5, block=64)
    np.testing.assert_array_equal(out.numpy(), x.numpy() * np.float32(0.5))


SECOND_BACKEND_SCRIPT = """
import os, sys
import torch
from warp_drive.runtime.backends import get_backend
from warp_drive.runtime.backends.cpu import CpuBackend

source, how, cache = sys.argv[1], sys.argv[2], sys.argv[3]
x = torch.arange(64, dtype=torch.float32)
expected = torch.roll(x.view(2, 32), -1, dims=1).flatten()
out = torch.zeros(64)
get_backend("cpu").build([source]).get_function("rotate_with_barrier")(x, out, 64, grid=2, block=32)
assert torch.equal(out, expected)
if how == "debug":
    other = CpuBackend(mode="debug")
else:
    os.environ["WARP_DRIVE_CACHE"] = cache
    other = CpuBackend()
out.zero_()
other.build([source]).get_function("rotate_with_barrier")(x, out, 64, grid=2, block=32)
assert torch.equal(out, expected), out
print("ok")
"""


@pytest.mark.slow
@pytest.mark.parametrize("how", ["debug", "other-cache"])
def test_second_cpu_backend_runs_barrier_kernels(tmp_path, how):
    proc = subprocess.run(
        [sys.executable, "-c", SECOND_BACKEND_SCRIPT, str(KERNELS / "sync.cu"), how, str(tmp_path / "cache")],
        capture_output=True, text=True, timeout=240, cwd=tmp_path,
    )
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr[-2000:]}"
    assert "ok" in proc.stdout


# --------------------------------------------------------------------------- 18: FunctionManager


def test_function_manager_geometry(backend_name):
    from warp_drive.runtime.function_manager import FunctionManager

    fm = FunctionManager(num_envs=3, num_agents=5, backend=backend_name)
    assert fm.grid == (3, 1, 1)
    assert fm.block == (5, 1, 1)
    assert fm.backend is get_backend(backend_name)
    with pytest.raises(ValueError):
        FunctionManager(num_envs=0, num_agents=5, backend=backend_name)


def test_function_manager_refuses_several_blocks_per_env_on_cpu():
    from warp_drive.runtime.function_manager import FunctionManager

    with pytest.raises(ValueError, match="blocks_per_env"):
        FunctionManager(num_envs=3, num_agents=5, blocks_per_env=2, backend="cpu")


def test_function_manager_feed_bind_and_launch(backend_name):
    from warp_drive.runtime.data_manager import DataManager
    from warp_drive.runtime.function_manager import FunctionFeed, FunctionManager

    envs, agents = 3, 5
    positions = np.arange(envs * agents, dtype=np.float32).reshape(envs, agents)
    velocities = (np.arange(envs * agents, dtype=np.float32).reshape(envs, agents) - 6) * 0.25
    dm = DataManager(num_envs=envs, num_agents=agents, episode_length=10, backend=backend_name)
    dm.push_data_to_device({"positions": {"data": positions}, "velocities": {"data": velocities}})
    dm.add_meta_info({"dt": 0.5})

    feed = FunctionFeed(dm)
    args = feed(["positions", "velocities", "_done_", "n_agents", ("dt", "meta")])
    assert args[0] is dm.data_on_device_via_torch("positions")
    assert args[2] is dm.data_on_device_via_torch("_done_")
    assert args[3] == agents and args[4] == np.float32(0.5)
    with pytest.raises(ValueError):
        feed([("dt", "bogus")])
    with pytest.raises(KeyError):
        feed(["no_such_array"])

    fm = FunctionManager(num_envs=envs, num_agents=agents, backend=backend_name)
    fm.compile_and_load(KERNELS / "env_step.cu")
    fm.initialize_functions(["toy_step"])
    assert "toy_step" in fm.function_names
    step = fm.bind("toy_step", args)
    step()
    step()
    fm.launch("toy_step", feed(["positions", "velocities", "_done_", "n_agents", "dt"]))
    get_backend(backend_name).synchronize()
    np.testing.assert_array_equal(dm.pull_data_from_device("positions"), positions + 3 * 0.5 * velocities)
    np.testing.assert_array_equal(dm.pull_data_from_device("_done_"), [agents] * envs)

    with pytest.raises(KeyError) as info:
        fm.get_function("toy_stepp")
    assert "toy_stepp" in str(info.value) and "toy_step" in str(info.value)
    with pytest.raises(ValueError, match="already"):
        fm.initialize_functions(["toy_step"])


# --------------------------------------------------------------------------- regressions and sanitizer mode


def test_barrier_results_survive_fiber_pool_growth(cpu, pool_size):
    """Thread 0 waits at its first barrier while the block creates its other
    fibers; its barrier result must still reach it (a fiber once kept a
    reference into a vector that this growth reallocated)."""
    pool_size(2)
    for block in (8, 33, 300):
        out = dev(cpu, np.zeros(64 * block, np.int32))
        kernel(cpu, "sync.cu", "count_all")(out, grid=64, block=block)
        np.testing.assert_array_equal(host(out), block)


ASAN_SCRIPT = r"""
import sys, torch
from warp_drive.runtime.backends import get_backend
backend = get_backend("cpu")
assert backend.mode == "asan", backend.mode
module = backend.build([sys.argv[1]])
out = torch.zeros(64 * 8, dtype=torch.int32)
for _ in range(3):  # barriers on reused fiber stacks must not trip the sanitizer
    module.get_function("count_all")(out, grid=64, block=8)
assert bool((out == 8).all())
print("barriers ok", flush=True)
x = torch.zeros(64)
module.get_function("write_past_end")(x, 64, grid=1, block=64)
print("not reached")
"""


@pytest.mark.slow
def test_asan_mode_reports_out_of_bounds_with_file_and_line(tmp_path):
    libasan = subprocess.run(["g++", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(libasan):
        pytest.skip("g++ has no libasan")
    env = dict(os.environ, WARP_DRIVE_CPU_MODE="asan", LD_PRELOAD=libasan, ASAN_OPTIONS="detect_leaks=0",
               WARP_DRIVE_CACHE=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-c", ASAN_SCRIPT, str(KERNELS / "sync.cu")], capture_output=True,
                          text=True, timeout=300, env=env)
    assert "barriers ok" in proc.stdout, proc.stderr[-3000:]
    assert "not reached" not in proc.stdout
    assert "heap-buffer-overflow" in proc.stderr
    assert f"sync.cu:{line_of('sync.cu', 'OUT OF BOUNDS')}" in proc.stderr


def test_cache_key_covers_the_generated_wrapper(fresh_cpu, monkeypatch):
    """A change to the code generated around the user's kernels must rebuild:
    the key once covered only the user's source, and a stale library kept an
    old thread loop."""
    from warp_drive.runtime.backends import cpu as cpu_module

    first = fresh_cpu().build([KERNELS / "arguments.cu"])
    assert first.from_cache is False
    assert fresh_cpu().build([KERNELS / "arguments.cu"]).from_cache is True
    original = cpu_module._generated_unit
    monkeypatch.setattr(cpu_module, "_generated_unit", lambda *a: original(*a) + "// changed\n")
    rebuilt = fresh_cpu().build([KERNELS / "arguments.cu"])
    assert rebuilt.from_cache is False and rebuilt.library_path != first.library_path
