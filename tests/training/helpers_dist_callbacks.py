"""Training-loop callbacks the distributed tests load with ``warp-drive train --callback``.

Not a test module (no ``test_`` prefix): torchrun workers import it by name,
with this directory on ``PYTHONPATH``.
"""

from __future__ import annotations

import hashlib
import json

from warp_drive.training.runs.callbacks import Callback


def model_hashes(trainer) -> dict[str, str]:
    """A SHA-256 of every policy's model parameters."""
    out = {}
    for tag, p in trainer.policies.items():
        digest = hashlib.sha256()
        for name, tensor in sorted(p.model.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        out[tag] = digest.hexdigest()
    return out


class DumpRankFacts(Callback):
    """Every rank writes ``<run_dir>/test_dump/rank<r>.json``: model hashes at the start (after rank 0's
    parameters were broadcast) and the end, and its own episode counts and SPS at each log, before
    aggregation over ranks."""

    def on_train_start(self, loop) -> None:
        self.data = {"rank": loop.rank, "initial": model_hashes(loop.trainer), "logged": []}

    def on_log(self, loop, metrics) -> None:
        local = loop.local_metrics
        self.data["logged"].append({"step": loop.global_step, "sps": local["charts/SPS"],
                                    "episodes": {k: v for k, v in local.items() if k.startswith("charts/episodes/")}})

    def on_train_end(self, loop) -> None:
        self.data["final"] = model_hashes(loop.trainer)
        states = loop.trainer.algorithm.states
        self.data["value_norms"] = {tag: [float(s.value_norm.mean), float(s.value_norm.var), float(s.value_norm.count)]
                                    for tag, s in states.items() if s.value_norm is not None}
        self.data["env_steps"] = loop.trainer.env_steps
        path = loop.run_dir / "test_dump" / f"rank{loop.rank}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(self.data, indent=1))


class FailOnRank1(Callback):
    """Rank 1 raises after its first iteration (the others train on until the collective fails)."""

    def on_iteration_end(self, loop, metrics) -> None:
        if loop.rank == 1:
            raise RuntimeError(f"injected failure on rank {loop.rank}")
