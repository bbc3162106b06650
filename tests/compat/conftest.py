"""The tier of the longer tests in the WarpDrive-written compat files.

The structure issue's five ``test_compat_*.py`` files (envs, lightning,
managers, training, training_names) stay as written -- WarpDrive programs as
its docs show them; only test_compat_lightning lost its test of the refusal
that tutorial 7 as written removed -- so a test there that trains or starts
processes -- over ~1.5 s, like every other ``slow`` test -- is marked here
instead of with a decorator. The fast tier (``make
test-fast``) leaves them out; ``make test`` runs them.
"""

from __future__ import annotations

import pytest

SLOW = {
    "test_compat_training.py": {"test_tutorial5_trainer_flow", "test_model_ckpt_filepath_is_loaded_at_start",
                                "test_rollout_animation"},
    "test_compat_managers.py": {"test_warpdrive_helper_names_build_and_run"},
}


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        if getattr(item, "originalname", item.name) in SLOW.get(item.path.name, ()):
            item.add_marker(pytest.mark.slow)
