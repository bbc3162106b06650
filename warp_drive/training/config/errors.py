"""How a run config says what is wrong: :class:`ConfigError`, one line per problem, each naming its key.

pydantic reports a problem as an error with a location (``("policy", "shared", "gamma")``) and a message.
The schema's own types word every message in this project's terms (``expected a number in [0.0, 1.0],
got 1.5 (float)``); :func:`messages` puts the key path in front, so ``ConfigError`` lists lines such as
``policy.shared.gamma: expected a number in [0.0, 1.0], got 1.5 (float)``.

Two kinds of error are this module's: ``config`` (a finished sentence about the value at its location) and
``unknown_key`` (a key that is not in its section: its message is written here, where the whole key path
is known, so that another config format's dialect can say what the key is called here).

Also here, torch-free so the CLI can catch them without importing torch: :class:`RunError` and the marker
of a refused setup.
"""

from __future__ import annotations

import difflib
from typing import Any, Iterable, Sequence

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from warp_drive.training.config.dialects import config_dialects

# The types of error this package raises; pydantic's own (``missing``, ``extra_forbidden``, ...) are worded
# by the section or the value type they belong to before they reach a user.
OWN_ERROR = "config"
UNKNOWN_KEY = "unknown_key"
Location = tuple  # of keys (str) and list indices (int), as pydantic's ``loc``


class ConfigError(ValueError):
    """An invalid run config. ``errors`` holds one message per problem found."""

    def __init__(self, errors: str | Iterable[str], source: str | None = None):
        self.errors = [errors] if isinstance(errors, str) else list(errors)
        self.source = source
        if len(self.errors) == 1 and source is None:
            message = self.errors[0]
        else:
            header = f"invalid config {source}" if source else "invalid config"
            message = header + ":\n" + "\n".join(f"  {e}" for e in self.errors)
        super().__init__(message)


class RunError(RuntimeError):
    """A run directory or checkpoint problem (locked, unsafe, unreadable, disk full), told without a traceback.

    Defined here, torch-free, so the CLI can catch it without importing torch.
    """


# An exception that building a run's env and trainer raised because of the user's input (a bad env parameter,
# a space that disagrees with its array, a kernel that does not build or bind, a policy that does not fit the
# env) carries this attribute, set by ``run.build``: its type stays what it was (callers catch ValueError,
# KernelBuildError, ...), and the CLI prints it as one line instead of a traceback. Here, torch-free, like RunError.
SETUP_REFUSAL = "warp_drive_setup_refusal"


def refused_setup(exc: BaseException) -> bool:
    """Whether ``exc`` is a refusal of the user's env, kernel or policies at construction (``SETUP_REFUSAL``)."""
    return bool(getattr(exc, SETUP_REFUSAL, False))


# --------------------------------------------------------------------------- raising, inside validation
def got(value: Any) -> str:
    """The end of a message: what the user gave, and its YAML type as Python names it."""
    return f"got {value!r} ({type(value).__name__})"


def problem(message: str) -> PydanticCustomError:
    """An error about the value being validated: ``message`` is the whole sentence after ``key.path: ``."""
    return PydanticCustomError(OWN_ERROR, message)


def unknown_key(valid: Sequence[str]) -> PydanticCustomError:
    """The error of a key that its section has no field for; ``valid``: the section's keys."""
    return PydanticCustomError(UNKNOWN_KEY, "unknown key", {"valid": list(valid)})


def problems(found: Iterable[tuple[Location, PydanticCustomError | str, Any]]) -> ValidationError:
    """Several errors at once, each ``(location below here, error or message, input)``: raise it from a
    validator and pydantic files each under its key, prefixed with the validator's own location."""
    details = [{"type": problem(error) if isinstance(error, str) else error, "loc": tuple(loc), "input": value}
               for loc, error, value in found]
    return ValidationError.from_exception_data("RunConfig", details)


def found_in(exc: ValidationError, prefix: Location = (), note: str = "") -> list[tuple[Location, Any, Any]]:
    """The errors of ``exc`` as :func:`problems` takes them, below ``prefix`` and with ``note`` appended to each
    message (a validator adding to, or rewording, what an inner validation found)."""
    out = []
    for error in exc.errors():
        if error["type"] == UNKNOWN_KEY:
            kept: Any = unknown_key(error["ctx"]["valid"])
        elif error["type"] == OWN_ERROR:
            kept = problem(error["msg"] + note)
        else:  # one of pydantic's that no type of ours words (should not happen): its own message
            kept = problem(error["msg"])
        out.append(((*prefix, *error["loc"]), kept, error["input"]))
    return out


# --------------------------------------------------------------------------- reading, for the user
def key_path(loc: Location) -> str:
    """``("policy", "shared", "model", "fc_dims", 1)`` -> ``policy.shared.model.fc_dims[1]``. A key written
    in brackets (a schedule's ``[0] (step)``) is a position, joined without a dot."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif str(part).startswith("["):
            out += str(part)
        else:
            out += f".{part}" if out else str(part)
    return out


def join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def unknown_key_message(path: str, key: Any, valid: Iterable[str]) -> str:
    """``path.key: unknown key; did you mean ...? valid keys here: ...``; a key of another config format
    (WarpDrive 2.7's ``num_episodes``, ``vf_loss_coeff``, ...) is named as such by its dialect, with what it
    is here: its nearest spelling among ours (num_episodes -> num_envs) would point at the wrong key."""
    valid = list(valid)
    for dialect in config_dialects():
        hint = dialect.key_hint(path, key)
        if hint is not None:
            return f"{join(path, key)}: unknown key; {hint}"
    close = difflib.get_close_matches(str(key), valid, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return f"{join(path, key)}: unknown key; {hint}valid keys here: {', '.join(valid)}"


def messages(exc: ValidationError) -> list[str]:
    """One line per error of ``exc``, each starting with its key path (``config`` for the whole file)."""
    out = []
    for error in exc.errors():
        loc = error["loc"]
        if error["type"] == UNKNOWN_KEY:
            out.append(unknown_key_message(key_path(loc[:-1]), loc[-1], error["ctx"]["valid"]))
        else:
            out.append(f"{key_path(loc) or 'config'}: {error['msg']}")
    return out
