"""The base class of every section of a run config: a pydantic model that refuses keys it does not have.

pydantic does the work (``extra="forbid"``, defaults, one error per problem, all of them at once); this
class only words what pydantic says about the section's own keys: an unknown key is named with the
closest known one (``errors.unknown_key_message``), a missing one with what it should hold, a section
that is not a mapping as such. An empty section (``saving:``) means all defaults.

Each key's default is declared once, on its field; the docstring under a field is its description
(``use_attribute_docstrings``), which the key reference page shows.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from warp_drive.training.config.errors import found_in, got, problem, problems, unknown_key


class Section(BaseModel):
    """A section of a run config (``trainer``, ``policy.<tag>``, ``policy.<tag>.model``, ...)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    # key -> what a missing required key should hold, said after "required" (e.g. "(the run's name)")
    REQUIRED: ClassVar[dict[str, str]] = {}

    @classmethod
    def missing_message(cls, key: str) -> str:
        """The message of required ``key`` when it is absent."""
        hint = cls.REQUIRED.get(key)
        return f"required ({hint})" if hint else "required"

    @model_validator(mode="wrap")
    @classmethod
    def _word_the_keys(cls, data: Any, validate: Any) -> Any:
        if isinstance(data, cls):
            return data
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise problem(f"expected a mapping of keys to values, {got(data)}")
        # A key that is not a string (YAML's `1: x`) is no key of any section: unknown, named as written.
        found = [((str(key),), unknown_key(list(cls.model_fields)), value)
                 for key, value in data.items() if not isinstance(key, str)]
        try:
            section = validate({k: v for k, v in data.items() if isinstance(k, str)})
        except ValidationError as exc:
            found += cls._worded(exc)
        if found:
            raise problems(found)
        return section

    @classmethod
    def _worded(cls, exc: ValidationError) -> list:
        """pydantic's errors about this section's own keys in this project's words; the others as they are."""
        keys = list(cls.model_fields)
        out = []
        for error, found in zip(exc.errors(), found_in(exc)):
            if len(error["loc"]) == 1 and error["type"] == "extra_forbidden":
                found = (error["loc"], unknown_key(keys), error["input"])
            elif len(error["loc"]) == 1 and error["type"] == "missing":
                found = (error["loc"], problem(cls.missing_message(str(error["loc"][0]))), None)
            out.append(found)
        return out


def field_default(section: type[Section], key: str) -> Any:
    """The default of ``section``'s key ``key`` (the one place it is written)."""
    return section.model_fields[key].get_default(call_default_factory=True)
