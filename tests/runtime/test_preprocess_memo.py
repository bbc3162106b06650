"""A process reuses the preprocessor's text of a source it built before, and
only while nothing that text came from has changed (warp_drive/runtime/backends/preprocess_memo.py).

The real builds below use the cpu executor; files written by the test are
"settled" at once (SETTLE_NS = 0), as files two seconds old are in use.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from warp_drive.runtime.backends import preprocess_memo
from warp_drive.runtime.backends.cpu import CpuBackend

SOURCE = """\
#include "scale.h"
extern "C" __global__ void scaled(const float* in, float* out, int n) {
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i] * SCALE;
}
"""


@pytest.fixture
def settled_at_once(monkeypatch, tmp_path):
    monkeypatch.setattr(preprocess_memo, "SETTLE_NS", 0)
    monkeypatch.setenv("WARP_DRIVE_CACHE", str(tmp_path / "cache"))


def counts() -> tuple[int, int]:
    return preprocess_memo.stats["runs"], preprocess_memo.stats["hits"]


def scale_of(module) -> float:
    x, out = torch.ones(4), torch.zeros(4)
    module.get_function("scaled")(x, out, 4, grid=1, block=4)
    return float(out[0])


def test_a_second_build_reuses_the_text_and_an_edit_is_seen(settled_at_once, tmp_path):
    (tmp_path / "src").mkdir()  # not beside the cache folder, which a build may create in tmp_path
    source, header = tmp_path / "src" / "scaled.cu", tmp_path / "src" / "scale.h"
    source.write_text(SOURCE)
    header.write_text("#define SCALE 2.0f\n")
    runs, hits = counts()
    first = CpuBackend().build([source])
    assert counts() == (runs + 1, hits)
    second = CpuBackend().build([source])  # a new backend: only the process's memo is shared
    assert counts() == (runs + 1, hits + 1) and second.from_cache and scale_of(second) == 2.0

    # Same size, modification time put back: the change time still tells.
    times = os.stat(header)
    header.write_text("#define SCALE 3.0f\n")
    os.utime(header, ns=(times.st_atime_ns, times.st_mtime_ns))
    third = CpuBackend().build([source])
    assert counts() == (runs + 2, hits + 1)
    assert not third.from_cache and scale_of(third) == 3.0 and scale_of(first) == 2.0


def test_a_header_that_now_shadows_the_included_one_is_seen(settled_at_once, tmp_path):
    """``#include "scale.h"`` searches the source's folder before ``-I``: a header
    added there is the one a fresh preprocessing would read."""
    src, inc = tmp_path / "src", tmp_path / "inc"
    src.mkdir(), inc.mkdir()
    (src / "scaled.cu").write_text(SOURCE)
    (inc / "scale.h").write_text("#define SCALE 2.0f\n")
    backend = CpuBackend()
    assert scale_of(backend.build([src / "scaled.cu"], include_dirs=[inc])) == 2.0
    runs, _ = counts()
    (src / "scale.h").write_text("#define SCALE 5.0f\n")
    assert scale_of(backend.build([src / "scaled.cu"], include_dirs=[inc])) == 5.0
    assert counts()[0] == runs + 1


# ----------------------------------------------------------------- the memo alone (no compiler)
def marked_text(*files: Path) -> str:
    """What the preprocessor prints: a line marker for each file it read."""
    return "".join(f'# 1 "{f}"\nint x{i};\n' for i, f in enumerate(files))


def memoized(header: Path, run) -> str:
    return preprocess_memo.preprocessed("g++", [header], [], [], ["-O2"], run)


def test_a_file_saved_while_the_preprocessor_ran_is_not_memoized(monkeypatch, tmp_path):
    monkeypatch.setattr(preprocess_memo, "SETTLE_NS", 0)
    header = tmp_path / "value.h"
    header.write_text("1\n")
    calls = []

    def run_with_an_edit():
        calls.append(1)
        text = marked_text(header)  # what was read ...
        header.write_text("2\n")    # ... before the editor saved
        return text

    memoized(header, run_with_an_edit)
    memoized(header, run_with_an_edit)
    assert len(calls) == 2

    def run():
        calls.append(1)
        return marked_text(header)

    memoized(header, run)
    assert memoized(header, run) == marked_text(header) and len(calls) == 3


def test_files_changed_in_the_last_two_seconds_are_not_memoized(tmp_path):
    """A coarse file-system clock could give an edit right after the preprocessing the same times."""
    header = tmp_path / "fresh.h"
    header.write_text("1\n")
    calls = []

    def run():
        calls.append(1)
        return marked_text(header)

    memoized(header, run)
    memoized(header, run)
    assert len(calls) == 2


def test_the_memo_keeps_the_most_recently_used_texts_within_its_bound(monkeypatch, tmp_path):
    monkeypatch.setattr(preprocess_memo, "SETTLE_NS", 0)
    headers = [tmp_path / f"h{i}.h" for i in range(3)]
    for h in headers:
        h.write_text("x\n")
    size = len(marked_text(headers[0]))
    monkeypatch.setattr(preprocess_memo, "MAX_BYTES", 2 * size)
    calls: list[Path] = []

    def run_for(h):
        def run():
            calls.append(h)
            return marked_text(h)
        return run

    for h in (headers[0], headers[1], headers[0], headers[2], headers[0], headers[1]):
        memoized(h, run_for(h))
    # h0 is reused each time; h2's text pushes out h1, the least recently used.
    assert calls == [headers[0], headers[1], headers[2], headers[1]]


def test_nvccs_header_listing_is_remembered_the_same_way(settled_at_once, tmp_path):
    """The pycuda executor's plan (no GPU needed) lists the headers with ``nvcc -M`` once per source and state."""
    from warp_drive.runtime.backends import nvcc

    if nvcc.find_nvcc() is None:
        pytest.skip("nvcc not found")
    toolchain = nvcc.NvccToolchain.find()
    (tmp_path / "src").mkdir()  # not beside the cache folder, which the first plan creates in tmp_path
    source, header = tmp_path / "src" / "scaled.cu", tmp_path / "src" / "scale.h"
    source.write_text(SOURCE)
    header.write_text("#define SCALE 2.0f\n")
    first = nvcc.plan_build(toolchain, "sm_90", [source], debug=False)
    runs, hits = counts()
    assert nvcc.plan_build(toolchain, "sm_90", [source], debug=False).key == first.key
    assert counts() == (runs, hits + 2)  # the host's preprocessing and nvcc's listing
    header.write_text("#define SCALE 3.0f\n")
    assert nvcc.plan_build(toolchain, "sm_90", [source], debug=False).key != first.key
    assert counts() == (runs + 2, hits + 2)
