"""``trainer.stop_at_return``: end a run once it has solved its task, by the rule benchmarks use.

Solved means the mean return per agent of each trained policy's most recent
training episodes (at least ``ROLLING_EPISODES`` of them) has reached the
target -- and, with ``trainer.stop_eval_episodes: N``, that a greedy
evaluation of N episodes then averages at least the target too. The training
episodes alone can say "solved" for a policy whose sampled actions do well
while its greedy ones do not (seen on CartPole: rolling 475+, greedy 372); the
evaluation rules that out, as Stable-Baselines3's ``EvalCallback`` with
``StopTrainingOnRewardThreshold`` does.

The evaluation plays on envs of its own (``OnDeviceTrainer.evaluation_twin``:
N envs seeded apart, acting with the training models), so the training envs'
episodes, tallies and random streams go on as if nothing had happened. After
a failed evaluation the next one waits for ``ROLLING_EPISODES`` new training
episodes: the window it trusted has then been replaced.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from warp_drive.training.runs.callbacks import Callback, TrainingLoop

if TYPE_CHECKING:
    from warp_drive.training.loop import OnDeviceTrainer

EVAL_SEED_OFFSET = 1_000_003  # the evaluation envs' seed: the run's plus this (apart from every rank's)


class StopAtReturn(Callback):
    """Stops the loop (``loop.stop_requested``) once solved (module docstring); the run then logs and saves
    as at its last iteration. It reads the episode tallies every iteration: one host read per iteration on a
    GPU, so only when asked for. In a distributed run every rank follows the main rank's decision (the main
    rank alone plays the evaluation)."""

    ROLLING_EPISODES = 20

    def __init__(self) -> None:
        self.windows: dict[str, deque] = {}
        self.seen: dict[str, tuple[float, float]] = {}  # (return sum, episodes) read since the last log
        self.episodes: dict[str, float] = {}  # training episodes ended so far, per policy
        self.evaluated_at: dict[str, float] | None = None  # self.episodes at the last failed evaluation
        self.evaluator: OnDeviceTrainer | None = None

    def on_iteration_end(self, loop: TrainingLoop, metrics: dict[str, float]) -> None:
        target = loop.config.trainer.stop_at_return
        if target is None:
            return
        means = self._rolling_means(loop)
        stop = bool(means) and all(m is not None and m >= target for m in means.values())
        evaluate = loop.config.trainer.stop_eval_episodes
        if stop and evaluate and loop.is_main:
            stop = self._evaluation_agrees(loop, target, int(evaluate))
        if loop.dist is not None:
            stop = bool(loop.dist.broadcast_object(stop))
        if stop and not loop.stop_requested:
            loop.stop_requested = True
            if loop.is_main:
                checked = f", and a greedy evaluation of {evaluate} episodes too" if evaluate else ""
                print(f"stopping early: after {loop.global_step:,} env steps every trained policy's mean return "
                      f"over its last {self.ROLLING_EPISODES}+ training episodes is >= {target}{checked} "
                      f"(trainer.stop_at_return)", flush=True)

    def on_log(self, loop: TrainingLoop, metrics: dict[str, float]) -> None:
        self.seen = {}  # the log step zeroed the tallies

    def _rolling_means(self, loop: TrainingLoop) -> dict[str, float | None]:
        """Per trained policy: the mean return of its fewest whole iterations' worth of most recent training
        episodes holding at least ROLLING_EPISODES of them (None until that many have ended)."""
        tallies = loop.trainer.episode_metrics(reset=False)  # since the last log step (which zeroes them)
        means = {}
        for tag in loop.trainer.policies:
            if not loop.config.policy[tag].to_train:
                continue
            count = tallies[f"charts/episodes/{tag}"]
            total = tallies[f"charts/episodic_return/{tag}"] * count if count else 0.0
            seen_total, seen_count = self.seen.get(tag, (0.0, 0.0))
            self.seen[tag] = (total, count)
            window = self.windows.setdefault(tag, deque())
            if count > seen_count:
                window.append((total - seen_total, count - seen_count))
                self.episodes[tag] = self.episodes.get(tag, 0.0) + count - seen_count
            while len(window) > 1 and sum(n for _, n in list(window)[1:]) >= self.ROLLING_EPISODES:
                window.popleft()
            episodes = sum(n for _, n in window)
            means[tag] = sum(r for r, _ in window) / episodes if episodes >= self.ROLLING_EPISODES else None
        return means

    def _evaluation_agrees(self, loop: TrainingLoop, target: float, episodes: int) -> bool:
        """Whether a greedy evaluation of ``episodes`` episodes reaches ``target`` for every trained policy;
        False without playing while the last failed evaluation's window has not been replaced yet."""
        if self.evaluated_at is not None and any(
                self.episodes[tag] - self.evaluated_at[tag] < self.ROLLING_EPISODES for tag in self.evaluated_at):
            return False
        if self.evaluator is None:
            self.evaluator = loop.trainer.evaluation_twin(episodes, loop.config.trainer.seed + EVAL_SEED_OFFSET)
        returns = self.evaluator.run_episodes(greedy=True)["mean_return"]
        short = {tag: r for tag, r in returns.items() if loop.config.policy[tag].to_train and r < target}
        if not short:
            return True
        self.evaluated_at = dict(self.episodes)
        print(f"after {loop.global_step:,} env steps the training episodes reached {target}, but a greedy "
              f"evaluation of {episodes} episodes gave " + ", ".join(f"{t} {r:.1f}" for t, r in short.items())
              + ": training on", flush=True)
        return False
