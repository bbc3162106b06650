"""The run-config key reference (``docs/config_reference.md``), written from the schema itself.

Every key's row comes from its field: what it takes (the :class:`~values.Expected` and
:class:`~values.OrNull` annotations its error messages use), its default (declared once, on the field)
and its description (the docstring under the field). Regenerate the page with::

    python -m warp_drive.training.config.reference > docs/config_reference.md

``tests/training/test_config_reference.py`` fails when the committed page and the schema disagree.
"""

from __future__ import annotations

import re
import typing
from typing import Any

import yaml
from pydantic.fields import FieldInfo

from warp_drive.training.config.policies import (DDPGModelConfig, DDPGPolicyConfig, ModelConfig, NetworkConfig,
                                                 OnPolicyConfig, PolicyConfig)
from warp_drive.training.config.schedule_spec import SCHEDULE_SHAPES
from warp_drive.training.config.schema import EnvConfig, RunConfig, SavingConfig, TrainerConfig
from warp_drive.training.config.section import Section
from warp_drive.training.config.values import Expected, OrNull

HEADER = """\
# Run config keys

Every key of a run config (`warp-drive train --config FILE`, `load_config`), what it takes and its
default. This page is generated from the schema in `warp_drive/training/config/` by
`python -m warp_drive.training.config.reference > docs/config_reference.md`, and a test fails when
the two disagree; the rules behind the keys are in the package's docstring. A key that is not listed
is an error naming the closest listed one; `--set KEY=VALUE` takes the same keys.
"""

# (heading, section): a section that extends another lists the keys it adds
PAGES: list[tuple[str, type[Section]]] = [
    ("The top level", RunConfig),
    ("`env`", EnvConfig),
    ("`trainer`", TrainerConfig),
    ("`policy.<tag>`: the keys of every algorithm", PolicyConfig),
    ("`policy.<tag>` with `algorithm: A2C` or `PPO`: also", OnPolicyConfig),
    ("`policy.<tag>.model`: the keys of every algorithm", NetworkConfig),
    ("`policy.<tag>.model` of A2C and PPO: also", ModelConfig),
    ("`policy.<tag>` with `algorithm: DDPG`: also", DDPGPolicyConfig),
    ("`policy.<tag>.model` of DDPG: also", DDPGModelConfig),
    ("`saving`", SavingConfig),
]


def _metadata(annotation: Any) -> list[Any]:
    """The annotations on ``annotation`` and on the types it is a union of (``Optional[...]``)."""
    found = list(getattr(annotation, "__metadata__", ()))
    for arg in typing.get_args(annotation):
        found += _metadata(arg)
    return found


def takes(field: FieldInfo) -> str:
    """What a key takes, as its error messages say it: ``an integer >= 1``, ``... or null (no clipping)``."""
    annotation = field.annotation
    if isinstance(annotation, type) and issubclass(annotation, Section):
        return "a section (below)"
    if typing.get_origin(annotation) is dict:  # dict[str, Policy]; a free-form mapping is a plain dict
        return "one section per policy tag (below)"
    found = [*field.metadata, *_metadata(annotation)]
    what = next((m for m in found if isinstance(m, Expected)), None)
    text = "any value" if what is None else what.what + (" (any case)" if what.case_insensitive else "")
    null = next((m for m in found if isinstance(m, OrNull)), None)
    return text if null is None else f"{text}, or null: {null.means}"


def default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, Section):
        return ""
    text = yaml.safe_dump(value, default_flow_style=True, width=1000).strip()
    return f"`{text.removesuffix('...').strip()}`"


def plain(docstring: str | None) -> str:
    """A docstring's reST (``code``, :class:`Name`) as one line of Markdown."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", " ".join((docstring or "").split()))
    return text.replace("``", "`").replace("|", "\\|")


def section_table(section: type[Section]) -> str:
    """The Markdown table of ``section``'s keys: its own, not those of the section it extends."""
    parent = section.__mro__[1]
    inherited = set(parent.model_fields) if issubclass(parent, Section) and parent is not Section else set()
    inherited -= {"algorithm"} if section is DDPGPolicyConfig else set()  # its default differs: shown again
    rows = ["| key | takes | default | |", "|---|---|---|---|"]
    for key, field in section.model_fields.items():
        if key in inherited:
            continue
        rows.append(f"| `{key}` | {takes(field)} | {default(field)} | {plain(field.description)} |")
    return "\n".join(rows)


def markdown() -> str:
    """The whole reference page."""
    parts = [HEADER]
    for heading, section in PAGES:
        parts.append(f"## {heading}\n\n{plain(section.__doc__)}\n\n{section_table(section)}\n")
    parts.append(f"## Schedules\n\n`lr`, `critic_lr` and `entropy_coef` take {SCHEDULE_SHAPES}; the step is "
                 f"the run's env step, and a learning rate must start above 0 and never go below it.\n")
    return "\n".join(parts)


if __name__ == "__main__":
    print(markdown(), end="")
