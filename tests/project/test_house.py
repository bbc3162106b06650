"""The house a newcomer reads: small training modules, few private imports, an algorithm-agnostic rollout.

Each check names what it found, so a failure says which file or import to fix.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import warp_drive

PACKAGE = Path(warp_drive.__file__).parent
MAX_TRAINING_FILE_LINES = 400
MAX_PRIVATE_CROSS_MODULE_IMPORTS = 5
# The shared parts every algorithm is built on: adding an algorithm must not need to touch them.
SHARED = ("training/rollout.py", "training/loop.py", "training/policies.py")
ALGORITHM_WORDS = r"\b(PPO|A2C|DDPG|VTRACE|VTrace|critic|replay|hidden|recurren\w*|logprob\w*|advantage\w*|entropy)\b"


def private_cross_module_imports() -> list[str]:
    """``from warp_drive.x import _name`` (a name private to another module) anywhere in the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("warp_drive")):
                found += [f"{path.relative_to(PACKAGE)}: from {node.module} import {a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_training_module_is_over_400_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in (PACKAGE / "training").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_TRAINING_FILE_LINES}
    assert not long, f"split these training modules (lines): {long}"


def test_at_most_five_private_names_are_imported_across_modules():
    found = private_cross_module_imports()
    assert len(found) <= MAX_PRIVATE_CROSS_MODULE_IMPORTS, "make these public or move them:\n" + "\n".join(found)


def test_the_rollout_loop_and_policies_name_no_algorithm():
    """Algorithms live in their own modules (training/ppo/, training/ddpg/, training/vtrace.py); the parts they
    share speak only of observations, actions, rewards, done flags and the algorithm's four hooks."""
    found = {}
    for name in SHARED:
        code = [line.split("#")[0] for line in (PACKAGE / name).read_text(encoding="utf-8").splitlines()]
        words = sorted({m.group(0) for line in code for m in re.finditer(ALGORITHM_WORDS, line)})
        if words:
            found[name] = words
    assert not found, f"algorithm-specific names in the shared training parts: {found}"


def test_the_small_algorithm_builds_on_the_contract_alone():
    """VTRACE (training/vtrace.py) is a module of its own and one row of the algorithm table: the shared parts
    do not know it, and it reaches them only through the contract's public names."""
    from warp_drive.training.algorithm import ALGORITHMS

    assert ALGORITHMS["VTRACE"][0] == "warp_drive.training.vtrace:VTrace"
    source = (PACKAGE / "training" / "vtrace.py").read_text(encoding="utf-8")
    imported = {node.module for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)}
    assert "warp_drive.training.rollout" not in imported and "warp_drive.training.loop" not in imported
    for name in SHARED:
        assert "vtrace" not in (PACKAGE / name).read_text(encoding="utf-8").lower(), name


# One PPO iteration's own code (acting, recording, GAE, the loss and the minibatch update) read top to bottom;
# the rollout and loop it runs in are shared by every algorithm (SHARED).
PPO_ITERATION = ("training/ppo/algorithm.py", "training/ppo/losses.py")
MAX_PPO_ITERATION_LINES = 300


def test_one_ppo_iteration_reads_in_two_files_of_at_most_300_lines():
    lines = {f: len((PACKAGE / f).read_text(encoding="utf-8").splitlines()) for f in PPO_ITERATION}
    assert sum(lines.values()) <= MAX_PPO_ITERATION_LINES, f"one PPO iteration has grown: {lines}"
