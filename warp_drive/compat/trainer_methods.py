"""WarpDrive 2.7's ``Trainer`` methods and keywords, over this project's one implementation.

:class:`WarpDriveTrainerMethods` is mixed into WarpDrive's ``Trainer`` and
``TrainerDDPG`` (``compat/trainer.py``) over this project's trainers: its
constructor keywords (``results_dir``, ``verbose``, WarpDrive run-config dicts,
``num_devices``, ...), ``train()``, ``fetch_episode_states``,
``evaluate_episodes``, ``save_model_checkpoint``, ``load_model_checkpoint``,
``graceful_close`` and ``perf_stats`` as WarpDrive programs call them. Each is
written over what the trainers already have (the loop of ``training/run.py``,
``run_episodes``, the checkpoint module), so there is no second training loop.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from warp_drive.compat.project_root import not_shipped
from warp_drive.compat.run_config import is_warpdrive_config, translate
from warp_drive.compat.weights import convert, is_warpdrive_state
from warp_drive.training import run
from warp_drive.training.config import RunConfig
from warp_drive.training.distributed import Distributed, launched_by_torchrun
from warp_drive.training.distributed import init as init_distributed
from warp_drive.training.runs.callbacks import Callback
from warp_drive.training.runs.checkpoint import atomic_write as _atomic_write
from warp_drive.training.runs.checkpoint import load_checkpoint
from warp_drive.training.runs.checkpoint import load_checkpoint_file as _load_file
from warp_drive.training.runs.dirs import new_run_dir
from warp_drive.env.wrapper import EnvWrapper


def check_warpdrive_keywords(distributed, create_separate_placeholders_for_each_policy: bool,
                             obs_dim_corresponding_to_num_agents: str, num_devices: int, device_id: int) -> None:
    """Refuse the WarpDrive ``Trainer`` keywords whose other values would feed the env wrongly."""
    if distributed is not None and not isinstance(distributed, Distributed):
        raise TypeError(f"Trainer's 4th positional argument is distributed (a training.distributed.Distributed), "
                        f"got {distributed!r}; pass WarpDrive's create_separate_placeholders_for_each_policy "
                        f"and the other options by keyword")
    if create_separate_placeholders_for_each_policy:
        raise ValueError("create_separate_placeholders_for_each_policy=True: here every policy reads and writes "
                         "the env's shared 'observations', 'sampled_actions' and 'rewards' arrays (its agents' "
                         "rows); an env whose kernel reads per-policy arrays cannot be trained. Write the kernel "
                         "over the shared arrays and drop the flag")
    if obs_dim_corresponding_to_num_agents != "first":
        raise ValueError(f"obs_dim_corresponding_to_num_agents={obs_dim_corresponding_to_num_agents!r}: "
                         f"observations here are (num_envs, num_agents, ...), agents first; lay them out so")
    if distributed is None and (int(num_devices) != 1 or int(device_id) != 0) and not _in_launched_group(
            num_devices, device_id):
        raise ValueError(f"num_devices={num_devices}, device_id={device_id}: a Trainer is one process; train on "
                         f"several devices with `warp-drive train --config CONFIG --nproc N` (or torchrun), "
                         f"which gives each process its rank, or call the function that builds the Trainer "
                         f"through perform_distributed_training (warp_drive.training.utils.distributed_train)")


def _in_launched_group(num_devices: int, device_id: int) -> bool:
    """Whether this process is worker ``device_id`` of ``num_devices`` started by torch's launcher (torchrun,
    ``--nproc`` or WarpDrive's ``perform_distributed_training``): the Trainer then joins their group."""
    if not launched_by_torchrun():
        return False
    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    if (world, rank) != (int(num_devices), int(device_id)):
        raise ValueError(f"num_devices={num_devices}, device_id={device_id}, but this process is rank {rank} of "
                         f"{world} started by torch's launcher; pass num_devices={world}, device_id={rank} (as "
                         f"perform_distributed_training does)")
    return True


class WarpDriveTrainerMethods:
    """WarpDrive's Trainer keywords and methods, mixed in before one of our trainers (module docstring)."""

    def __init__(self, env_wrapper: EnvWrapper, config, policy_tag_to_agent_id_map: dict | None = None,
                 distributed: Distributed | None = None, on_nonfinite: str | None = None, *,
                 create_separate_placeholders_for_each_policy: bool = False,
                 obs_dim_corresponding_to_num_agents: str = "first", num_devices: int = 1, device_id: int = 0,
                 results_dir: str | None = None, verbose: bool = True):
        """``config``: a :class:`~warp_drive.training.config.RunConfig`, our config
        dict, or a WarpDrive 2.7 run-config dict (tutorial 5's), translated by
        :mod:`warp_drive.compat.run_config` against this ``env_wrapper`` (its
        env, number of envs, episode length and backend); the translation is
        ``self.translation`` (printed when ``verbose``) and saved in the results
        directory by :meth:`train`. ``on_nonfinite``: as our trainers'.

        WarpDrive's keywords: ``results_dir`` (the results directory's name under
        ``saving.basedir/name/tag``, default a timestamp) and ``verbose``
        (:meth:`train` prints metrics, the other WarpDrive methods what they do).
        ``create_separate_placeholders_for_each_policy=False`` and
        ``obs_dim_corresponding_to_num_agents="first"`` change nothing: each
        policy reads its agents' rows of the env's ``(E, N, ...)`` arrays, and
        gets its own action array when it drives only some agents. The other
        values are refused: an env whose kernel reads per-policy arrays, or
        observations with the agent dimension last, would be fed wrongly.
        ``num_devices``/``device_id``: one Trainer is one process; a
        data-parallel run is ``warp-drive train --nproc N`` (or torchrun), which
        passes ``distributed``. In a worker started by torch's launcher
        (WarpDrive's ``perform_distributed_training`` starts them so), a Trainer
        given ``num_devices`` = ``WORLD_SIZE`` and ``device_id`` = ``RANK``
        joins the workers' group itself; otherwise ``num_devices > 1`` or
        ``device_id != 0`` without ``distributed`` is refused.
        """
        check_warpdrive_keywords(distributed, create_separate_placeholders_for_each_policy,
                                 obs_dim_corresponding_to_num_agents, num_devices, device_id)
        if distributed is None and int(num_devices) > 1:  # a launched worker (checked above): join the group
            distributed = init_distributed(env_wrapper.backend)
        self.verbose = bool(verbose)
        self.results_dir = results_dir
        self.num_devices = 1 if distributed is None else distributed.world_size
        self.device_id = 0 if distributed is None else distributed.rank
        config, self.translation = as_run_config(config, env_wrapper)
        if self.translation is not None and self.verbose:
            print(self.translation.text())
        self.perf_stats = PerfStats()
        self._save_dir: Path | None = None
        self._closed = False
        super().__init__(env_wrapper, config, policy_tag_to_agent_id_map, distributed, on_nonfinite)
        if self.translation is not None and self.translation.checkpoints:
            self.load_model_checkpoint()  # WarpDrive's model_ckpt_filepath: loaded at start

    def end_iteration(self, metrics: dict[str, float]) -> dict[str, float]:
        """Our trainers' end of an iteration, and its phase times added to :attr:`perf_stats`."""
        metrics = super().end_iteration(metrics)
        self.perf_stats.add(self.timers, metrics["time/iteration"], self.batch_env_steps)
        return metrics

    @property
    def policy_tag_to_agent_id_map(self) -> dict[str, list[int]]:
        """WarpDrive's name for :attr:`policy_agents`."""
        return self.policy_agents

    @property
    def cuda_envs(self) -> EnvWrapper:
        """WarpDrive's name for the env wrapper."""
        return self.env

    @property
    def num_iters(self) -> int:
        """WarpDrive's name for the number of training iterations."""
        return self.num_iterations

    @property
    def save_dir(self) -> Path:
        """The results directory, ``<saving.basedir>/<saving.name>/<saving.tag>/<results_dir or timestamp>``,
        made on first use (a Trainer that is never trained or saved writes nothing)."""
        if self._save_dir is None:
            self._save_dir = new_run_dir(self.config, self.results_dir)
        return self._save_dir

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this Trainer was closed by graceful_close(); build a new one")

    def train(self) -> Path:
        """Train for the configured iterations (``trainer.total_steps``), as WarpDrive's ``Trainer.train()``.

        The loop is ``training/run.py``'s: every ``saving.metrics_log_freq``
        iterations the metrics go to ``metrics.csv``, TensorBoard and
        ``results.json`` (WarpDrive's JSON lines) and, when ``verbose``, to the
        screen; every ``saving.model_params_save_freq`` iterations (and at the
        last) a resumable checkpoint and WarpDrive's ``<policy>_<env
        steps>.state_dict`` model files are written to :attr:`save_dir`, which
        is returned. Envs start from a reset, as in WarpDrive. A trainer that
        has reached its total steps has nothing left to do (WarpDrive trained
        the same number of iterations again); raise ``trainer.total_steps`` to
        train further.
        """
        self._check_open()
        self.env.reset_all_envs()
        self.rollout.forget_partial_episodes()
        dist = self.distributed
        if dist is None or dist.world_size == 1:
            return run.train_trainer(self, self.save_dir, [WarpDriveOutputs()])
        # Several workers (perform_distributed_training, torchrun): the main one makes the results directory,
        # holds its lock and writes the config; the others are told where it is (as `warp-drive train --nproc`).
        if self._save_dir is None:
            self._save_dir = Path(dist.broadcast_object(str(self.save_dir) if dist.is_main else None))
        if dist.is_main:
            return run.train_trainer(self, self._save_dir, [WarpDriveOutputs()])
        loop = run.TrainingLoop(self, self.config, self._save_dir, dist, start_steps=self.env_steps)
        return run.run_loop(loop, [*run.default_callbacks(False, evaluate=False), WarpDriveOutputs()])

    def _log_warpdrive_metrics(self, _trainer: Any, metrics: dict[str, float]) -> None:
        """WarpDrive's log: a ``results.json`` line and, when verbose, the printed block."""
        per_policy: dict[str, dict[str, float]] = {tag: {} for tag in self.policies}
        for key, value in metrics.items():
            head, _, tag = key.rpartition("/")
            if tag in per_policy and head:
                per_policy[tag][head] = float(value)
        perf = self.perf_stats.get_perf_stats()
        line = {"Iterations Completed": self.iteration, **per_policy, "Perf. Stats": perf}
        with open(self.save_dir / "results.json", "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
        if self.verbose:
            print("=" * 40)
            print(f"{'Iterations Completed':40}: {self.iteration} / {self.num_iterations}")
            self.perf_stats.pretty_print(perf)
            for tag, values in per_policy.items():
                print("=" * 40)
                print(f"Metrics for policy '{tag}'")
                print("=" * 40)
                for key, value in values.items():
                    print(f"{key:40}: {value:10.5f}")
            print("=" * 40, flush=True)

    def save_model_checkpoint(self, iteration: int = 0) -> list[Path]:
        """WarpDrive's save: each policy's model parameters to ``<save_dir>/<policy>_<env steps>.state_dict``,
        when ``iteration % saving.model_params_save_freq == 0`` or ``iteration`` is the last (0-based, as
        WarpDrive counted); returns the files written. ``train()`` saves these (and our resumable checkpoints)
        by itself."""
        self._check_open()
        if int(iteration) % self.config.saving.model_params_save_freq and int(iteration) != self.num_iterations - 1:
            return []
        return self._write_models()

    def _write_models(self) -> list[Path]:
        written = []
        for tag, p in self.policies.items():
            path = self.save_dir / f"{tag}_{self.env_steps}.state_dict"
            buffer = io.BytesIO()
            torch.save({k: v.detach().cpu() for k, v in p.model.state_dict().items()}, buffer)
            _atomic_write(path, buffer.getvalue())
            written.append(path)
            if self.verbose:
                print(f"Saved the {tag!r} model to {path}")
        return written

    def load_model_checkpoint(self, ckpts_dict_or_path: Mapping[str, Any] | str | os.PathLike | None = None) -> None:
        """Load model parameters, as WarpDrive's ``load_model_checkpoint``.

        ``None``: the config's ``model.model_ckpt_filepath`` of each policy
        (WarpDrive's run-config key; nothing when it is empty). A dict
        ``{policy: path}`` of ``<policy>_<env steps>.state_dict`` files (as
        :meth:`save_model_checkpoint` writes): each is read with
        ``torch.load(weights_only=True)``, and the env step in the file name
        becomes the trainer's (schedules continue from it, as in WarpDrive).
        A path: one such file (a single policy), or a run directory or
        checkpoint of ours (every policy's model from it). Only parameters are
        loaded; optimizers and envs stay as they are (use ``warp-drive train
        --resume`` to continue a run exactly). Weights saved by WarpDrive 2.7
        itself (its ``FullyConnected``: ``fc``, ``policy_head``, ``vf_head``)
        are converted (:mod:`warp_drive.compat.weights`); a model of another
        shape is refused with the mismatching keys.
        """
        self._check_open()
        if ckpts_dict_or_path is None:
            ckpts = dict(self.translation.checkpoints) if self.translation is not None else {}
            if not ckpts:
                return
        elif isinstance(ckpts_dict_or_path, Mapping):
            ckpts = dict(ckpts_dict_or_path)
        else:
            path = Path(ckpts_dict_or_path)
            if path.is_dir() or path.suffix == ".pt":
                state = load_checkpoint(path, map_location=self.device)
                for tag in self.policies:
                    if tag not in state.get("models", {}):
                        raise ValueError(f"{path} has no model for policy {tag!r} (it has: "
                                         f"{', '.join(state.get('models', {}))})")
                    self._load_policy_weights(tag, state["models"][tag], str(path))
                return
            if len(self.policies) != 1:
                raise ValueError(f"{path}: one model file, but this trainer has policies {list(self.policies)}; pass "
                                 f"{{policy: path}}")
            ckpts = {next(iter(self.policies)): path}
        unknown = [tag for tag in ckpts if tag not in self.policies]
        if unknown:
            raise ValueError(f"load_model_checkpoint: no policy {unknown} in this trainer (policies: "
                             f"{', '.join(self.policies)})")
        steps = []
        for tag, path in ckpts.items():
            if isinstance(path, Mapping):  # DDPG's {actor: path, critic: path}
                state = {part: _load_file(Path(p), self.device) for part, p in path.items() if p}
                names = [str(p) for p in path.values() if p]
            else:
                if not Path(path).is_file():
                    why = not_shipped(path)  # a WarpDrive program's path under get_project_root()
                    raise FileNotFoundError(f"policy {tag!r}: model checkpoint {path} does not exist"
                                            + (f": {why}" if why else ""))
                state, names = _load_file(Path(path), self.device), [str(path)]
            self._load_policy_weights(tag, state, ", ".join(names))
            for name in names:
                found = re.search(r"_(\d+)\.state_dict$", name)
                if found:
                    steps.append(int(found.group(1)))
            if self.verbose:
                print(f"Loaded the {tag!r} model from {', '.join(names)}")
        if steps:
            self.env_steps = max(steps)

    def _load_policy_weights(self, tag: str, state: Mapping[str, Any], source: str) -> None:
        """Policy ``tag``'s model parameters from ``state`` (a model state dict). Subclasses with several
        networks per policy (DDPG: actor and critic) override this."""
        model = self.policies[tag].model
        state = {k[len("module."):] if k.startswith("module.") else k: v for k, v in state.items()}  # DDP's prefix
        mine = model.state_dict()
        if is_warpdrive_state(state):  # saved by WarpDrive 2.7 itself: its FullyConnected's names
            state = convert(state, mine)
        missing, unexpected = sorted(set(mine) - set(state)), sorted(set(state) - set(mine))
        mismatched = [k for k in mine if k in state and tuple(state[k].shape) != tuple(mine[k].shape)]
        if missing or unexpected or mismatched:
            detail = "; ".join(s for s in (f"missing {missing[:4]}" if missing else "",
                                          f"unexpected {unexpected[:4]}" if unexpected else "",
                                          f"other shapes {mismatched[:4]}" if mismatched else "") if s)
            raise ValueError(f"{source}: not a model of policy {tag!r} as configured here ({detail}); weights of "
                             f"another layout are refused (WarpDrive 2.7's own load into a fully_connected model "
                             f"with the fc_dims, ReLU activation and actions they were trained with)")
        model.load_state_dict(state)

    @staticmethod
    def _greedy(sample_params: dict, default: bool = False) -> bool:
        """WarpDrive's sampling keywords: ``use_argmax`` (A2C/PPO), ``scale`` (DDPG: 0 = no exploration noise)."""
        params = dict(sample_params)
        greedy = bool(params.pop("use_argmax", default))
        if "scale" in params:
            scale = params.pop("scale")
            if scale == 0:
                greedy = True
            elif scale != 1:
                raise ValueError(f"scale={scale!r}: 0 (no exploration noise) or 1 (the configured noise); set the "
                                 f"noise itself with the policy's noise_stddev")
        params.pop("damping", None), params.pop("stddev", None)
        if params:
            raise TypeError(f"unknown sampling parameter(s) {sorted(params)}; WarpDrive's: use_argmax, scale")
        return greedy

    def fetch_episode_states(self, list_of_states: list[str] | None = None, env_id: int = 0,
                             include_rewards_actions: bool = False, include_probabilities: bool = False,
                             policy: str = "", **sample_params):
        """One episode of env ``env_id`` with the current policies, as WarpDrive's ``fetch_episode_states``.

        Returns ``{name: (episode_length + 1, *shape) float64}``: row ``t`` is the
        array before step ``t`` (row 0: after the reset), rows after the episode's
        end are NaN. With ``include_rewards_actions``, also ``(actions, rewards)``
        of shapes ``(episode_length, N, ...)`` and ``(episode_length, N)`` (zeros
        after the end), for ``policy``'s agents only when a policy tag is given;
        with ``include_probabilities`` also ``{t: {policy: [per-head action
        probabilities of env_id, (agents, actions)]}}`` (discrete policies).
        Actions are sampled; ``use_argmax=True`` (or DDPG's ``scale=0``) takes the
        most likely ones. Every env steps (they share the launches); only env
        ``env_id``'s rows are copied to the host. Envs are reset after.
        """
        self._check_open()
        greedy = self._greedy(sample_params)
        names = list(list_of_states or [])
        if not isinstance(names, list):
            raise TypeError(f"list_of_states must be a list of array names, got {list_of_states!r}")
        if policy and policy not in self.policies:
            raise ValueError(f"policy {policy!r} is not a policy of this trainer ({', '.join(self.policies)})")
        agents = self.policy_tag_to_agent_id_map[policy] if policy else list(range(self.env.num_agents))
        L = self.env.episode_length
        actions = np.zeros((L, len(agents), *self.env.actions.shape[2:]),
                           dtype=torch.empty((), dtype=self.env.actions.dtype).numpy().dtype)
        rewards = np.zeros((L, len(agents)), dtype=np.float32)
        probabilities: dict[int, dict[str, list[np.ndarray]]] = {}
        if include_probabilities:
            tags = [policy] if policy else list(self.policies)
            continuous = [t for t in tags if not self.policies[t].discrete]
            if continuous:
                raise ValueError(f"include_probabilities: policies {continuous} have continuous actions (no "
                                 f"probabilities)")

        def on_step(step: int, dists: dict) -> None:
            if include_rewards_actions:
                actions[step] = self.env.actions[env_id].index_select(
                    0, torch.tensor(agents, device=self.device)).cpu().numpy()
                rewards[step] = self.env.rewards[env_id, agents].cpu().numpy()
            if include_probabilities:
                probabilities[step] = {}
                for tag in ([policy] if policy else self.policies):
                    n = len(self.policies[tag].agent_ids)
                    probabilities[step][tag] = [h.reshape(self.num_envs, n, -1)[env_id].cpu().numpy()
                                                for h in dists[tag].probs_per_head()]

        episode = self.run_episodes(greedy=greedy, record=tuple(names), env_id=env_id,
                                    on_step=on_step if include_rewards_actions or include_probabilities else None)
        states = {}
        for name, frames in episode["frames"].items():
            padded = np.full((L + 1, *frames.shape[1:]), np.nan)
            padded[: len(frames)] = frames
            states[name] = padded
        if include_rewards_actions and include_probabilities:
            return states, actions, rewards, probabilities
        if include_rewards_actions:
            return states, actions, rewards
        if include_probabilities:
            return states, probabilities
        return states

    def evaluate_episodes(self, num_episodes: int = 1, **sample_params) -> tuple[dict, dict]:
        """Play ``num_episodes`` rounds of one episode in every env, as WarpDrive's ``evaluate_episodes``.

        Returns ``(reward sums, step counts)``: ``{policy: (num_episodes * num_envs,
        policy agents) float32}`` and ``{policy: (num_episodes * num_envs,) int32}``
        (one row per env per round). Unlike WarpDrive (reference §9.17), the
        rewards of the episode's last step are counted and each agent's own
        rewards are summed. Sampled actions unless ``use_argmax=True`` (or
        DDPG's ``scale=0``).
        """
        self._check_open()
        greedy = self._greedy(sample_params)
        if isinstance(num_episodes, bool) or int(num_episodes) != num_episodes or num_episodes < 1:
            raise ValueError(f"num_episodes must be an integer >= 1, got {num_episodes!r}")
        sums: dict[str, list] = {t: [] for t in self.policies}
        steps: dict[str, list] = {t: [] for t in self.policies}
        for _ in range(int(num_episodes)):
            episode = self.run_episodes(greedy=greedy)
            for tag in self.policies:
                sums[tag].append(episode["returns"][tag].astype(np.float32))
                steps[tag].append(episode["steps"].astype(np.int32))
        return ({t: np.concatenate(v) for t, v in sums.items()}, {t: np.concatenate(v) for t, v in steps.items()})

    def graceful_close(self) -> None:
        """WarpDrive's close: release the sampler and the rollout buffers; the trainer cannot be used after.
        (Nothing here would leak without it: device memory is torch's; it is kept for WarpDrive programs.)"""
        if self._closed:
            return
        self.rollout.buffers.clear()
        self.sampler = None
        self._closed = True
        if self.verbose:
            print("Trainer exits gracefully")


class PerfStats:
    """WarpDrive's ``trainer.perf_stats``: times summed over the iterations run, from the trainer's phase timers.

    ``policy_eval_time`` is the models' forward passes, ``action_sample_time``
    the sampling, ``env_step_time`` the env steps and resets, ``training_time``
    the updates, ``total_time`` whole iterations; ``steps`` env steps.
    """

    def __init__(self) -> None:
        self.iters = 0
        self.steps = 0
        self.policy_eval_time = 0.0
        self.action_sample_time = 0.0
        self.env_step_time = 0.0
        self.training_time = 0.0
        self.total_time = 0.0

    def add(self, timers: Mapping[str, float], elapsed: float, env_steps: int) -> None:
        self.iters += 1
        self.steps += int(env_steps)
        self.policy_eval_time += timers.get("inference", 0.0)
        self.action_sample_time += timers.get("sampling", 0.0)
        self.env_step_time += timers.get("env_step", 0.0) + timers.get("reset", 0.0)
        self.training_time += timers.get("update", 0.0)
        self.total_time += elapsed

    def get_perf_stats(self) -> dict[str, float]:
        """WarpDrive's report (its keys); NaN before the first iteration instead of a division by zero."""
        per_iter = lambda t: t * 1000 / self.iters if self.iters else float("nan")  # noqa: E731
        per_sec = lambda t: self.steps / t if t > 0 else float("nan")  # noqa: E731
        return {
            "Mean policy eval time per iter (ms)": per_iter(self.policy_eval_time),
            "Mean action sample time per iter (ms)": per_iter(self.action_sample_time),
            "Mean env. step time per iter (ms)": per_iter(self.env_step_time),
            "Mean training time per iter (ms)": per_iter(self.training_time),
            "Mean total time per iter (ms)": per_iter(self.total_time),
            "Mean steps per sec (policy eval)": per_sec(self.policy_eval_time),
            "Mean steps per sec (action sample)": per_sec(self.action_sample_time),
            "Mean steps per sec (env. step)": per_sec(self.env_step_time),
            "Mean steps per sec (training time)": per_sec(self.training_time),
            "Mean steps per sec (total)": per_sec(self.total_time),
        }

    @staticmethod
    def pretty_print(stats: Mapping[str, float]) -> None:
        print("=" * 40)
        print("Speed performance stats")
        print("=" * 40)
        for key, value in stats.items():
            print(f"{key:40}: {value:10.2f}")


class WarpDriveOutputs(Callback):
    """The training-loop callback of ``Trainer.train()`` (and the Lightning module): WarpDrive's
    ``results.json`` line and printed block at each log, its ``<policy>_<env steps>.state_dict``
    model files at each checkpoint (main process)."""

    def on_log(self, loop, metrics: dict) -> None:
        if loop.is_main:
            loop.trainer._log_warpdrive_metrics(loop.trainer, metrics)

    def on_checkpoint(self, loop, state: dict) -> None:
        if loop.is_main:
            loop.trainer._write_models()


def as_run_config(config: Any, env_wrapper: EnvWrapper):
    """(RunConfig, Translation or None) from a RunConfig, our config dict, or a WarpDrive run-config dict."""
    if not isinstance(config, Mapping):
        return config, None  # a RunConfig (or a stand-in with its attributes)
    if is_warpdrive_config(config) or "env" not in config:
        translation = translate(config, env_wrapper=env_wrapper)
        return translation.run_config, translation
    return RunConfig.from_dict(config), None
