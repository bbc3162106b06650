"""How much a user writes: the example envs' code lines (issue 42's acceptance).

"Write once, declare once" is measured, not claimed: DummyEnv, the smallest complete env, is at most 60 lines
of code, Python and CUDA together (75 before its parameters were declared once and the framework took over
the clock), and TagContinuous at most 700 in all. A line of code is a line that holds a token other than a
comment: blank lines, comments and docstrings do not count, nor, for DummyEnv, its optional NumPy reference.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

EXAMPLE_ENVS = Path(__file__).resolve().parents[2] / "example_envs"
_NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
             tokenize.ENCODING, tokenize.ENDMARKER}


def python_code_lines(source: str, leave_out: tuple[str, ...] = ()) -> int:
    """Lines of ``source`` holding code, without docstrings (of the module, classes and functions) and without
    the functions named in ``leave_out`` (their decorators included)."""
    skipped: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in leave_out:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            skipped.update(range(first, node.end_lineno + 1))
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value,
                                                                                                    str):
                skipped.update(range(first.lineno, first.end_lineno + 1))
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in _NOT_CODE:
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - skipped)


_C_COMMENT_OR_LITERAL = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def cuda_code_lines(source: str) -> int:
    """Non-blank lines of ``source`` once ``//`` and ``/* */`` comments are gone (string and character
    literals kept, so a ``//`` inside one is not taken for a comment)."""
    def blank_comment(match: re.Match) -> str:
        text = match.group(0)
        return text if text[0] in "\"'" else "\n" * text.count("\n")

    return sum(1 for line in _C_COMMENT_OR_LITERAL.sub(blank_comment, source).splitlines() if line.strip())


def env_code_lines(folder: Path, leave_out: tuple[str, ...] = ()) -> dict[str, int]:
    counts = {p.name: python_code_lines(p.read_text(), leave_out) for p in sorted(folder.glob("*.py"))}
    counts.update({p.name: cuda_code_lines(p.read_text()) for p in sorted(folder.glob("*.cu"))})
    return counts


def test_the_counter_counts_code_only():
    python = '"""Module doc."""\n\n# a comment\nx = 1  # trailing\n\n\ndef f():\n    """Doc."""\n    return (\n' \
             '        2)\n\n\ndef reference_step(a):\n    a += 1\n'
    assert python_code_lines(python) == 6 and python_code_lines(python, ("reference_step",)) == 4
    cuda = '// header\n#include <x.h>\n/* a\n   block */\nint f() {  // tail\n  const char* s = "//";\n\n}\n'
    assert cuda_code_lines(cuda) == 4


def test_dummy_env_is_at_most_60_lines_of_code():
    counts = env_code_lines(EXAMPLE_ENVS / "dummy_env", leave_out=("reference_step",))
    assert sum(counts.values()) <= 60, counts


@pytest.mark.parametrize("env, limit", [("tag_continuous", 700)])
def test_tag_continuous_is_at_most_700_lines_in_all(env, limit):
    counts = env_code_lines(EXAMPLE_ENVS / env)  # its reference included
    assert sum(counts.values()) <= limit, counts
