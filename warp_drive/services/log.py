"""``LogController``: record one environment's arrays over an episode.

Arrays pushed with ``log_data_across_episode=True`` get a device buffer
``<name>_for_log`` of shape ``(episode_length + 1, *shape[1:])``; each
``update_log`` copies the chosen env's slice of every logged array into row
``step`` with one launch, and ``fetch_log`` brings the filled rows to the host
once, at the end.
"""

from __future__ import annotations

import numpy as np

from warp_drive.runtime.data_manager import FOR_LOG_SUFFIX
from warp_drive.runtime.function_manager import FunctionManager
from warp_drive.services.reset import pointer_table, words_per_env


class LogController:
    def __init__(self, function_manager: FunctionManager):
        self.function_manager = function_manager
        self.env_id = 0
        self.last_step = -1
        self._table = None
        self._table_key = None
        self._block = 32

    def _current_table(self, data_manager):
        # The manager itself (not its id, which a new manager could reuse) and
        # its version: the table holds raw pointers into its tensors.
        key = (data_manager, data_manager.version)
        if self._table_key is None or key[0] is not self._table_key[0] or key[1] != self._table_key[1]:
            rows = [
                [data_manager.data_on_device_via_torch(name + FOR_LOG_SUFFIX).data_ptr(),
                 data_manager.data_on_device_via_torch(name).data_ptr(),
                 words_per_env(data_manager, name)]
                for name in data_manager.log_data_list
            ]
            if not rows:
                raise ValueError("no array is logged: push one with log_data_across_episode=True")
            self._table = pointer_table(rows, data_manager.device)
            widest = max(row[2] for row in rows)
            self._block = min(256, max(32, (widest + 31) // 32 * 32))
            self._table_key = key
        return self._table

    def reset_log(self, data_manager, env_id: int = 0) -> None:
        """Start a new episode log for ``env_id`` and record its current state as step 0."""
        if not 0 <= int(env_id) < data_manager.num_envs:
            raise ValueError(f"env_id {env_id} is out of range [0, {data_manager.num_envs})")
        self.env_id = int(env_id)
        self.last_step = -1
        self.update_log(data_manager, 0)

    def update_log(self, data_manager, step: int) -> None:
        """Record the logged arrays of the chosen env at ``step`` (strictly after the last one)."""
        step = int(step)
        if step <= self.last_step or step > data_manager.episode_length:
            raise ValueError(
                f"log step {step}: steps must increase (last was {self.last_step}) and stay within "
                f"0..episode_length={data_manager.episode_length}"
            )
        table = self._current_table(data_manager)
        self.function_manager.launch(
            "wd_log_step", [table, table.shape[0], self.env_id, step], grid=(1, 1, 1), block=(self._block, 1, 1)
        )
        self.last_step = step

    def fetch_log(self, data_manager, names=None, last_step: int | None = None) -> dict[str, np.ndarray]:
        """``{"<name>_for_log": rows 0..last_step}`` as host arrays."""
        last = self.last_step if last_step is None else int(last_step)
        if last < 0:
            raise ValueError("nothing logged yet: call reset_log first")
        if last > self.last_step:
            raise ValueError(f"step {last} has not been logged (last logged step: {self.last_step})")
        names = data_manager.log_data_list if names is None else list(names)
        out = {}
        for name in names:
            if name not in data_manager.log_data_list:
                raise KeyError(f"{name!r} is not logged; logged arrays: {data_manager.log_data_list}")
            out[name + FOR_LOG_SUFFIX] = data_manager.pull_data_from_device(name + FOR_LOG_SUFFIX)[: last + 1]
        return out
