"""The rollout every algorithm shares: device buffers, env steps, resets, episode tallies, evaluation episodes.

:class:`Rollout` keeps ``(T, E * n, ...)`` buffers per policy on the device --
observations, final observations before a reset (they bootstrap truncated
episodes), actions, rewards, and, where the env has them, the action masks
the actions were chosen under and who was in the game before and after each
step -- plus ``(T, E)`` done flags, and the buffers its algorithm declares
(``Algorithm.buffers``). :meth:`Rollout.collect` steps every env
``rollout_length`` times, calling the algorithm at the points
``training/algorithm.py`` lists; done envs are reset by the kernels and the
episodes that ended are tallied, all without a host copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch
from gymnasium import spaces

from warp_drive.env.environment import TERMINATED
from warp_drive.training.algorithm import Algorithm
from warp_drive.training.policies import (Policy, policy_active, policy_mask, policy_obs, policy_rewards,
                                          write_env_actions)
from warp_drive.env.wrapper import EnvWrapper


@dataclass
class EpisodeTally:
    """One policy's returns on the device: the running sums ``(E, n)`` and the episodes finished since the
    last :meth:`Rollout.episode_metrics` (mean per agent, sum over the team, count)."""

    running: torch.Tensor
    finished_sum: torch.Tensor
    finished_count: torch.Tensor
    finished_team_sum: torch.Tensor

    @classmethod
    def zeros(cls, num_envs: int, agents: int, device: torch.device) -> "EpisodeTally":
        return cls(torch.zeros((num_envs, agents), device=device), *(torch.zeros((), device=device) for _ in range(3)))

    def add(self, rewards: torch.Tensor, ended: torch.Tensor) -> None:
        """This step's rewards ``(E, n)``; ``ended (E, 1)``: the env's episode ended with it."""
        self.running += rewards
        self.finished_sum += (self.running.mean(dim=1, keepdim=True) * ended).sum()
        self.finished_team_sum += (self.running.sum(dim=1, keepdim=True) * ended).sum()
        self.finished_count += ended.sum()
        self.running *= ~ended

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return self.running, self.finished_sum, self.finished_count, self.finished_team_sum


class Rollout:
    """Buffers, stepping and tallies for ``policies`` on ``env`` (module docstring)."""

    def __init__(self, env: EnvWrapper, policies: dict[str, Policy], length: int, timed: Callable[[str], Any]):
        self.env, self.policies, self.length, self.timed = env, policies, int(length), timed
        self.num_envs, self.device = env.num_envs, env.data_manager.device
        self.done = torch.zeros((self.length, self.num_envs), dtype=torch.int32, device=self.device)
        self.buffers: dict[str, dict[str, torch.Tensor]] = {}
        self.tallies = {tag: EpisodeTally.zeros(self.num_envs, len(p.agent_ids), self.device)
                        for tag, p in policies.items()}

    def allocate(self, algorithm: Algorithm) -> None:
        """Every policy's buffers: the shared ones and those ``algorithm`` declares."""
        T = self.length
        for tag, p in self.policies.items():
            B = self.num_envs * len(p.agent_ids)
            heads = 1 if isinstance(p.action_space, spaces.Discrete) else (
                len(p.action_space.nvec) if p.discrete else int(np.prod(p.action_space.shape)))
            specs = {"obs": ((T, B, p.obs_dim), torch.float32), "final_obs": ((T, B, p.obs_dim), torch.float32),
                     "actions": ((T, B, heads), torch.int64 if p.discrete else torch.float32),
                     "rewards": ((T, B), torch.float32)}
            if self.env.active is not None:  # who was in the game when acting, and after the step
                specs["active"] = specs["active_after"] = ((T, B), torch.bool)
            mask = policy_mask(self.env, p)
            if mask is not None:  # the masks the actions were chosen under, for the update's log-probabilities
                specs["masks"] = ((T, *mask.shape), torch.bool)
            specs.update(algorithm.buffers(p))
            self.buffers[tag] = {name: torch.zeros(shape, dtype=dtype, device=self.device)
                                 for name, (shape, dtype) in specs.items()}

    @torch.no_grad()
    def collect(self, algorithm: Algorithm) -> None:
        """``length`` steps of every env into the buffers."""
        for t in range(self.length):
            for tag, p in self.policies.items():
                buf = self.buffers[tag]
                obs = policy_obs(self.env, p)
                if "active" in buf:
                    buf["active"][t] = policy_active(self.env, p)
                acted = algorithm.act(p, obs, t)
                buf["obs"][t] = obs
                buf["actions"][t] = acted.actions.reshape(buf["actions"].shape[1:]).to(buf["actions"].dtype)
                if "masks" in buf:
                    buf["masks"][t] = policy_mask(self.env, p)
                algorithm.record(p, t, obs, acted)
            self.step(t, algorithm)

    def step(self, t: int, algorithm: Algorithm) -> None:
        """Step every env once; record step ``t``'s rewards, done flags and final observations (before the
        reset: they bootstrap truncated episodes), tally the episodes that ended, then reset the done envs."""
        with self.timed("env_step"):
            self.env.step_all_envs()
        done = self.env.done
        self.done[t] = done
        ended = (done > 0).unsqueeze(1)
        for tag, p in self.policies.items():
            buf = self.buffers[tag]
            rewards = policy_rewards(self.env, p)
            buf["rewards"][t] = rewards.reshape(-1)
            buf["final_obs"][t] = policy_obs(self.env, p)
            if "active_after" in buf:  # before the reset: who left the game in this step
                buf["active_after"][t] = policy_active(self.env, p)
            algorithm.after_step(p, t)
            self.tallies[tag].add(rewards, ended)
        with self.timed("reset"):
            self.env.reset_only_done_envs()

    def ended(self, p: Policy) -> tuple[torch.Tensor, torch.Tensor]:
        """``(terminated, ended)`` ``(T, E * n)`` of the last rollout: an agent's episode ended with the env's,
        or (terminally) when it left the game in that step."""
        done = self.done.repeat_interleave(len(p.agent_ids), dim=1)  # (T, E * n): agents of an env in a row
        terminated, ended = done == TERMINATED, done > 0
        buf = self.buffers[p.tag]
        if "active" in buf:
            left = buf["active"] & ~buf["active_after"]
            terminated, ended = terminated | left, ended | left
        return terminated, ended

    # ------------------------------------------------------------------ episode tallies
    def episode_metrics(self, reset: bool = True) -> dict[str, float]:
        """Per policy, over the episodes ended since the last call: the mean episodic return of an agent
        (``charts/episodic_return``) and of the policy's agents together (``charts/team_return``: their sum,
        what cooperative-MARL papers and JaxMARL report), and the episodes counted."""
        out = {}
        for tag, tally in self.tallies.items():
            count = float(tally.finished_count)
            out[f"charts/episodic_return/{tag}"] = float(tally.finished_sum) / count if count else float("nan")
            out[f"charts/team_return/{tag}"] = float(tally.finished_team_sum) / count if count else float("nan")
            out[f"charts/episodes/{tag}"] = count
            if reset:
                for t in tally.tensors()[1:]:
                    t.zero_()
        return out

    def forget_partial_episodes(self) -> None:
        """Zero the returns of the episodes in progress (after every env was reset outside a rollout)."""
        for tally in self.tallies.values():
            tally.running.zero_()

    def discard_nonfinite_returns(self) -> None:
        """After a skipped rollout, the episode tallies must not carry its NaNs forward."""
        for tally in self.tallies.values():
            for t in (tally.running, tally.finished_sum, tally.finished_team_sum):
                t.copy_(torch.where(torch.isfinite(t), t, torch.zeros_like(t)))

    def tally_state(self) -> dict[str, tuple[torch.Tensor, ...]]:
        return {tag: tuple(t.cpu() for t in tally.tensors()) for tag, tally in self.tallies.items()}

    def load_tally_state(self, state: dict) -> None:
        for tag, tally in self.tallies.items():
            running, total, count, *team = state[tag]  # no team sum in earlier checkpoints
            tally.running.copy_(running)
            tally.finished_sum.copy_(total)
            tally.finished_count.copy_(count)
            tally.finished_team_sum.copy_(team[0] if team else total * running.shape[1])

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def run_episodes(self, algorithm: Algorithm, greedy: bool = True, record: tuple[str, ...] = (), env_id: int = 0,
                     on_step: Callable[[int, dict], None] | None = None,
                     uniform: torch.Generator | None = None) -> dict[str, Any]:
        """Play one episode in every env (from a fresh reset) and return each policy's mean episodic return;
        optionally record arrays of env ``env_id`` at every step.

        Also returned: ``returns`` (policy -> (num_envs, policy agents) episode sums, the final step's reward
        included) and ``steps`` ((num_envs,) steps each env's episode took). ``on_step(step, dists)``, if
        given, runs after each env step while env ``env_id``'s episode goes on, before any reset (``dists``:
        policy -> the action distribution the step's actions came from; empty with ``uniform``).
        ``uniform`` (a generator): the policies are not asked; every agent takes a uniformly random legal
        action (:meth:`act_uniform`): the baseline a trained policy is compared with.
        """
        self.env.reset_all_envs()
        algorithm.restart()
        E = self.num_envs
        if not 0 <= int(env_id) < E:
            raise ValueError(f"env_id {env_id} is not an env of this trainer (0..{E - 1})")
        returns = {t: torch.zeros((E, len(p.agent_ids)), device=self.device) for t, p in self.policies.items()}
        steps = torch.zeros(E, dtype=torch.int32, device=self.device)
        finished = torch.zeros(E, dtype=torch.bool, device=self.device)
        frames = {name: [self.env_row(name, env_id)] for name in record}
        for step in range(self.env.episode_length):
            dists = {}
            for p in self.policies.values():
                if uniform is not None:
                    self.act_uniform(p, uniform)
                    continue
                p.model.eval()
                dists[p.tag] = algorithm.act(p, policy_obs(self.env, p), greedy=greedy).dist
                p.model.train()
            self.env.step_all_envs()
            active = (~finished).unsqueeze(1)
            for t, p in self.policies.items():
                returns[t] += policy_rewards(self.env, p) * active
            steps += active.squeeze(1).to(steps.dtype)
            if (record or on_step is not None) and not bool(finished[env_id]):
                for name in record:
                    frames[name].append(self.env_row(name, env_id))
                if on_step is not None:
                    on_step(step, dists)
            finished |= self.env.done > 0
            if bool(finished.all()):
                break
            algorithm.restart(self.env.done > 0)
            self.env.reset_only_done_envs()
        self.env.reset_all_envs()
        algorithm.restart()
        return {
            "mean_return": {t: float(r.mean()) for t, r in returns.items()},
            "returns": {t: r.cpu().numpy() for t, r in returns.items()},
            "steps": steps.cpu().numpy(),
            "frames": {name: np.stack(v) for name, v in frames.items()},
        }

    def act_uniform(self, p: Policy, generator: torch.Generator) -> None:
        """Uniformly random legal actions of the policy's agents into the env's action array: each discrete head
        uniform over the actions the env's action mask allows (all, without a mask), a Box uniform within its
        bounds (refused when a bound is infinite: there is no uniform distribution to draw from)."""
        rows = self.num_envs * len(p.agent_ids)
        space = p.action_space
        if isinstance(space, spaces.Box):
            low = torch.as_tensor(np.asarray(space.low, np.float32).reshape(-1), device=self.device)
            high = torch.as_tensor(np.asarray(space.high, np.float32).reshape(-1), device=self.device)
            if not bool(torch.isfinite(low).all() and torch.isfinite(high).all()):
                raise ValueError(f"policy {p.tag!r}: a uniform random baseline needs finite action bounds, but "
                                 f"its action space is {space}")
            draw = torch.rand((rows, low.numel()), generator=generator, device=self.device)
            write_env_actions(self.env, p, low + (high - low) * draw)
            return
        sizes = [int(space.n)] if isinstance(space, spaces.Discrete) else [int(n) for n in space.nvec]
        mask = policy_mask(self.env, p)
        weights = torch.ones((rows, sum(sizes)), device=self.device) if mask is None else mask.float()
        heads = []
        for head in weights.split(sizes, dim=1):
            head = torch.where(head.sum(dim=1, keepdim=True) > 0, head, torch.ones_like(head))  # a row masked out
            heads.append(torch.multinomial(head, 1, generator=generator))
        write_env_actions(self.env, p, torch.cat(heads, dim=1))

    def env_row(self, name: str, env_id: int) -> np.ndarray:
        """Env ``env_id``'s slice of array ``name``, on the host (one row copied, not the whole array)."""
        dm = self.env.data_manager
        if not dm.is_data_on_device(name):
            raise KeyError(f"{name!r} is not an array of {self.env.name} (arrays: {', '.join(dm.array_names)})")
        tensor = dm.data_on_device_via_torch(name)
        if tensor.dim() == 0 or tensor.shape[0] != self.num_envs:
            raise ValueError(f"{name!r} has shape {tuple(tensor.shape)}, not one row per env ({self.num_envs}); "
                             f"only per-env arrays can be fetched per episode")
        self.env.backend.synchronize()
        return tensor[env_id].detach().cpu().numpy().copy()

