"""WarpDrive 2.7.1's own programs, read from a WarpDrive checkout and run here as written.

The only edits are the ones the migration guide allows, applied line by line:

* the backend name: the string ``"pycuda"`` becomes ``"cpu"``;
* GPU-only lines: ``assert torch.cuda.device_count() > 0 ...`` (and the example
  script's ``assert num_gpus_available > 0 ...``) are dropped, ``.cuda()`` calls
  are removed, ``accelerator="gpu",`` is dropped, and the example script's
  ``torch.cuda.device_count()`` reads ``2`` (two CPU processes play two GPUs);
  any other line calling ``torch.cuda.*`` (tutorial 2's timing with CUDA
  events) is dropped with the lines that use a name it bound;
* notebook shell lines (``!pip install ...``, ``%load_ext ...``, a bare
  ``pip install ...`` cell) become ``pass``: WarpDrive's own package must not be
  installed over this one;
* sizes, for the test's time only (:func:`shrink`): episodes and environments of
  the training notebooks.

Nothing of WarpDrive's is copied into this repository: the programs are read
from the checkout named by ``WARPDRIVE_CHECKOUT`` at test time.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

GPU_ASSERT = re.compile(r"^\s*assert (torch\.cuda\.device_count\(\)|num_gpus_available) > 0")
SHELL = ("!", "%", "pip install")


def edit(source: str, *, device_count: int | None = None) -> str:
    """``source`` with the allowed edits (module docstring)."""
    out, gpu_names = [], set()
    for line in source.splitlines():
        stripped = line.strip()
        indent = line[: len(line) - len(line.lstrip())]
        if stripped.startswith(SHELL):
            out.append(f"{indent}pass  # shell line: {stripped[:60]}")
            continue
        if GPU_ASSERT.match(line) or stripped == 'accelerator="gpu",':
            continue
        line = line.replace('"pycuda"', '"cpu"').replace("'pycuda'", "'cpu'").replace(".cuda()", "")
        if device_count is not None:
            line = line.replace("torch.cuda.device_count()", str(device_count))
        if "torch.cuda." in line or any(re.search(rf"\b{name}\b", line) for name in gpu_names):
            bound = re.match(r"\s*(\w+)\s*=", line)
            if bound:
                gpu_names.add(bound.group(1))
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def notebook_program(path: Path) -> str:
    """A notebook's code cells, in order, as one program."""
    cells = json.loads(path.read_text())["cells"]
    return "\n\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")


def shrink(program: str) -> str:
    """2 environments, 200-step training batches and 4 episodes (YAML and keyword forms): a
    training notebook then runs 2 to 10 iterations, whatever its episode length (100 to 500)."""
    for key, value in (("num_envs", 2), ("train_batch_size", 200), ("num_episodes", 4)):
        program = re.sub(rf"\b{key}: \d+", f"{key}: {value}", program)
        program = re.sub(rf"\b{key}=\d+", f"{key}={value}", program)
    return program


def is_warpdrive_271(checkout: Path) -> bool:
    setup = checkout / "setup.py"
    return setup.is_file() and 'version="2.7.1"' in setup.read_text()
