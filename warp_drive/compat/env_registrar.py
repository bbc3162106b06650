"""WarpDrive's ``EnvironmentRegistrar``: env classes and their CUDA source paths by name.

As in WarpDrive, the registry is class-level (every ``EnvironmentRegistrar()``
sees the same entries), names are keyed case-insensitively on ``cls.name``,
and classes are kept per backend name: ``"cpu"`` for a class whose ``step`` is
Python, ``"pycuda"`` (also ``"cuda"``, ``"gpu"``) for one whose ``step``
launches its kernel, ``"numba"`` for WarpDrive's Numba classes. This project's
executor names ``"auto"`` and ``"cpu-gpu"`` count as ``"pycuda"``.

Source paths: the CUDA C source registered for ``"pycuda"`` is what every
executor of this project builds (the cpu executor compiles the same ``.cu``),
so :meth:`EnvironmentRegistrar.get_cuda_env_src_path` returns it for
``"pycuda"`` and for this project's executor names alike.

This project's own envs (:mod:`warp_drive.env.registry`) are found under every
backend name, since one class there holds both the kernel and its reference step.

Fixed on purpose (reference §9.17): ``add(env_backend=[...], cuda_env_src_path=...)``
registers the path once per backend instead of crashing; a path is checked when
it is registered (a ``.cu`` file that exists), not at the first build.
"""

from __future__ import annotations

import difflib
import warnings
from pathlib import Path

from warp_drive.env.registry import get_env_class, registered_envs

_CLASS_BACKENDS = {"cpu": "cpu", "pycuda": "pycuda", "cuda": "pycuda", "gpu": "pycuda", "auto": "pycuda",
                   "cpu-gpu": "pycuda", "numba": "numba"}
_SOURCE_BACKENDS = {"pycuda": "pycuda", "cuda": "pycuda", "gpu": "pycuda", "cpu": "pycuda", "auto": "pycuda",
                    "cpu-gpu": "pycuda", "numba": "numba"}


def _backend(env_backend, table: dict, what: str) -> str:
    key = str(env_backend).lower() if isinstance(env_backend, str) else None
    if key not in table:
        raise ValueError(f"{what}: env_backend {env_backend!r} is not one of {', '.join(sorted(table))}")
    return table[key]


def _own_env(name: str):
    """This project's env class registered under ``name`` (any case), or None."""
    matches = [n for n in registered_envs() if n.lower() == name]
    return get_env_class(matches[0]) if matches else None


class EnvironmentRegistrar:
    """Class-level registry of env classes and CUDA source paths (see the module docstring)."""

    _envs: dict[str, dict[str, type]] = {"cpu": {}, "pycuda": {}, "numba": {}}
    _customized_cuda_env_src_paths: dict[str, dict[str, str]] = {"pycuda": {}, "numba": {}}

    # -- classes ----------------------------------------------------------------
    def add(self, env_backend="cpu", cuda_env_src_path: str | None = None):
        """Class decorator: register ``cls`` under ``cls.name`` for each backend
        of ``env_backend`` (a name or a list), with its source path if given."""
        backends = env_backend if isinstance(env_backend, (list, tuple)) else [env_backend]
        keys = [_backend(b, _CLASS_BACKENDS, "EnvironmentRegistrar.add") for b in backends]

        def add_wrapper(cls):
            name = getattr(cls, "name", None)
            if not isinstance(name, str) or not name:
                raise TypeError(f"EnvironmentRegistrar.add: {cls!r} has no `name` class attribute (a str), "
                                "which is the key it is registered under")
            key = name.lower()
            for backend in keys:
                if key in self._envs[backend] and self._envs[backend][key] is not cls:
                    raise ValueError(f"a {backend} environment named {key!r} is already registered "
                                     f"({self._envs[backend][key].__qualname__}); give {cls.__qualname__} another name")
            for backend in keys:
                self._envs[backend][key] = cls
            if cuda_env_src_path is not None:
                for source_backend in {_SOURCE_BACKENDS[b] for b in keys if b != "cpu"} or {"pycuda"}:
                    self.add_cuda_env_src_path(key, cuda_env_src_path, source_backend)
            return cls

        return add_wrapper

    def get(self, name: str, env_backend="cpu") -> type:
        key, backend = str(name).lower(), _backend(env_backend, _CLASS_BACKENDS, "EnvironmentRegistrar.get")
        if key in self._envs[backend]:
            return self._envs[backend][key]
        own = _own_env(key)
        if own is not None:
            return own
        known = sorted(self._envs[backend])
        close = difflib.get_close_matches(key, known, n=3)
        hint = (f"; did you mean {', '.join(map(repr, close))}?" if close
                else f"; registered: {', '.join(known) or 'none'}")
        raise KeyError(f"no {backend} environment named {name!r}{hint} (register it with "
                       f"@EnvironmentRegistrar().add(env_backend={backend!r}))")

    def has_env(self, name: str, env_backend="cpu") -> bool:
        key, backend = str(name).lower(), _backend(env_backend, _CLASS_BACKENDS, "EnvironmentRegistrar.has_env")
        return key in self._envs[backend] or _own_env(key) is not None

    # -- source paths -----------------------------------------------------------
    def add_cuda_env_src_path(self, name: str, cuda_env_src_path, env_backend="pycuda") -> None:
        """Register the CUDA C source of env ``name`` (a ``.cu`` file; for
        ``"numba"``, WarpDrive's module path, kept for lookups only)."""
        backend = _backend(env_backend, _SOURCE_BACKENDS, "add_cuda_env_src_path")
        if backend == "pycuda":
            path = Path(cuda_env_src_path).expanduser().resolve()
            if path.suffix != ".cu":
                raise ValueError(f"add_cuda_env_src_path({name!r}, {str(cuda_env_src_path)!r}): expected a CUDA "
                                 "source file ending in .cu")
            if not path.is_file():
                raise FileNotFoundError(f"add_cuda_env_src_path({name!r}, ...): {path} does not exist")
            value = str(path)
        else:
            value = str(cuda_env_src_path)
        paths = self._customized_cuda_env_src_paths[backend]
        key = str(name).lower()
        if key in paths and paths[key] != value:
            warnings.warn(f"EnvironmentRegistrar: replacing the {backend} source of {key!r} ({paths[key]}) "
                          f"with {value}", UserWarning, stacklevel=2)
        paths[key] = value

    def get_cuda_env_src_path(self, name: str, env_backend="pycuda") -> str | None:
        backend = _backend(env_backend, _SOURCE_BACKENDS, "get_cuda_env_src_path")
        return self._customized_cuda_env_src_paths[backend].get(str(name).lower())


env_registrar = EnvironmentRegistrar()
