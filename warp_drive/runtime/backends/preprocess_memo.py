"""The preprocessor's output, kept within a process while the files it came from stay as they were.

Why: every build -- each ``FunctionManager.compile_and_load``, each env made --
runs the host preprocessor first, because its output keys the build cache and
names the kernels. A process that makes the same env several times (a test
suite, a hyperparameter sweep, evaluation beside training) ran it again each
time to get the same text: about 60 ms of a core per build on the 2-core VM,
and most of the fast test tier's preprocessing (763 runs for 87 distinct
inputs).

When a memoized text is reused, which is like ccache's direct mode:

* the inputs are the same: compiler (path and binary), sources, include and
  define flags, compile flags, working directory and the preprocessor's
  environment variables (``CPATH`` & co.);
* every file the text came from -- each path in its line markers, the
  forced-include emulation header among them -- and every directory searched
  (the ``-I`` directories, the sources' directories and the directories of
  those files) has the inode, size, modification and change times it had when
  the text was made. Editing, replacing or touching any of them, or adding a
  file to one of those directories (which could now shadow a header), makes
  the next build preprocess again.
* a text is memoized only if none of those files or directories changed in
  the two seconds before the preprocessor started, since the file system's
  clock may be coarser than the edit. A file saved while the preprocessor read
  it would otherwise leave new times beside the old text.

What it cannot see: a header added to a system include directory where no
header of the text lives, which then shadows a later one. Such a directory
changes when a toolchain is installed, not while a process builds. The memo
is per process and bounded by :data:`MAX_BYTES`, least recently used first out.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Callable, Optional, Sequence

MAX_BYTES = 64 << 20  # one example env's text is about 0.85 MB
# Newer than this before the preprocessor started: not memoized (a coarse clock could hide an edit).
SETTLE_NS = 2_000_000_000
# The environment the preprocessor reads besides its arguments.
ENVIRONMENT = ("CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH", "GCC_EXEC_PREFIX", "COMPILER_PATH")
_LINE_MARKER = re.compile(r'^# \d+ "([^"<][^"]*)"', re.M)

Stamp = Optional[tuple]  # (inode, size, mtime_ns, ctime_ns); None: the path is gone

_lock = threading.Lock()
_texts: "OrderedDict[tuple, tuple[str, tuple[tuple[str, Stamp], ...]]]" = OrderedDict()  # key -> (text, stamps)
_bytes = 0
stats = {"hits": 0, "runs": 0}  # what the memo saved, for tests and the curious


def stamp(path: str) -> Stamp:
    """(inode, size, mtime, ctime) in ns, or None when the path is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def watched(files, cwd: str, searched_dirs) -> list[str]:
    """``files`` (relative ones from ``cwd``) and the directories a search for them reads: their own and
    ``searched_dirs`` (the ``-I`` directories and the sources' directories)."""
    files = {os.path.normpath(os.path.join(cwd, str(name))) for name in files}
    files = {f for f in files if not os.path.isdir(f)}  # gcc marks the working directory too
    directories = {os.path.dirname(f) for f in files}
    directories |= {os.path.normpath(os.path.join(cwd, str(d))) for d in searched_dirs}
    return sorted(files) + sorted(directories)


def searched_dirs(sources: Sequence[Path], include_flags: Sequence[str]) -> list[str]:
    return [os.path.dirname(str(s)) for s in sources] + [f[2:] for f in include_flags if f.startswith("-I")]


def tool_key(tool: str, *parts) -> tuple:
    """What every memo key holds besides the arguments: the tool's binary as it is now, the working
    directory and the environment variables the preprocessors read."""
    binary = shutil.which(tool) or tool
    return (tool, stamp(os.path.realpath(binary)), os.getcwd(), tuple(os.environ.get(v) for v in ENVIRONMENT),
            *parts)


def remembered(key: tuple, run: Callable[[], str], watched_of: Callable[[str], list[str]]) -> str:
    """``run()``'s text, or the text it gave before for ``key`` while every path
    ``watched_of(text)`` listed then is as it was (see the module docstring)."""
    global _bytes
    with _lock:
        entry = _texts.get(key)
        if entry is not None:
            _texts.move_to_end(key)
    if entry is not None:
        text, stamps = entry
        if all(stamp(path) == then for path, then in stamps):
            with _lock:
                stats["hits"] += 1
            return text

    started = time.time_ns()
    text = run()
    with _lock:
        stats["runs"] += 1
    stamps = tuple((path, stamp(path)) for path in watched_of(text))
    settled = all(s is not None and max(s[2], s[3]) < started - SETTLE_NS for _, s in stamps)
    if not settled or len(text) > MAX_BYTES:
        return text
    with _lock:
        old = _texts.pop(key, None)
        if old is not None:
            _bytes -= len(old[0])
        _texts[key] = (text, stamps)
        _bytes += len(text)
        while _bytes > MAX_BYTES:
            _, (dropped, _) = _texts.popitem(last=False)
            _bytes -= len(dropped)
    return text


def preprocessed(cxx: str, sources: Sequence[Path], include_flags: Sequence[str], define_flags: Sequence[str],
                 compile_flags: Sequence[str], run: Callable[[], str]) -> str:
    """The host preprocessor's text (``run()``), remembered: the files it read are its line markers."""
    key = tool_key(cxx, "-E", tuple(map(str, sources)), tuple(include_flags), tuple(define_flags),
                   tuple(compile_flags))
    cwd = os.getcwd()
    return remembered(key, run, lambda text: watched(_LINE_MARKER.findall(text), cwd,
                                                     searched_dirs(sources, include_flags)))


def clear() -> None:
    """Forget every memoized text (the next build of each source preprocesses it)."""
    global _bytes
    with _lock:
        _texts.clear()
        _bytes = 0
