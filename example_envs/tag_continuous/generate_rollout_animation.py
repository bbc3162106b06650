"""WarpDrive 2.7's ``generate_tag_env_rollout_animation(trainer)`` (tutorial 5), over ``warp_drive.env.rendering``.

It returns what WarpDrive's returned: a ``matplotlib.animation.FuncAnimation``
of one episode of env 0 with the trainer's current policies (sampled actions),
one frame per step plus the reset state, so ``anim.to_jshtml()``,
``anim.to_html5_video()`` (needs ffmpeg: on PATH, or imageio-ffmpeg's binary,
which ``render.find_ffmpeg_for_matplotlib`` hands matplotlib when it has none;
without either it says what to install) and ``anim.save(...)`` work as in the
tutorial. The figure is a plain ``matplotlib.figure.Figure`` (no pyplot state
is touched), drawn top-down in 2-D with ``render``'s markers and validation
rather than WarpDrive's 3-D axes. Frames after the episode's end are not drawn
(WarpDrive animated them as empty NaN frames). ``gif_path`` also writes
``render.render_tag_episode``'s GIF of the same episode.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from warp_drive.env import rendering as render


def generate_tag_env_rollout_animation(
    trainer: Any,
    fps: float = 50,
    tagger_color: str = "#C843C3",
    runner_color: str = "#245EB6",
    runner_not_in_game_color: str = "#666666",
    fig_width: float = 6,
    fig_height: float = 6,
    gif_path: str | None = None,
):
    """A ``FuncAnimation`` of one TagContinuous episode of ``trainer``'s env 0 (WarpDrive's signature)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if trainer is None:
        raise ValueError("generate_tag_env_rollout_animation needs a trainer")
    if fps <= 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    env = trainer.cuda_envs.env
    states = trainer.fetch_episode_states(["loc_x", "loc_y", "still_in_the_game"])
    played = int(np.sum(~np.isnan(states["loc_x"][:, 0])))  # the reset state and each step of the episode
    taggers = set(int(a) for a in getattr(env, "tagger_ids", getattr(env, "taggers", ())))
    is_tagger = np.array([a in taggers for a in range(env.num_agents)])
    xs, ys, is_tagger, active = render._as_episode(states["loc_x"][:played], states["loc_y"][:played], is_tagger,
                                                   states["still_in_the_game"][:played] > 0)
    if gif_path is not None:
        render.render_tag_episode(gif_path, xs, ys, is_tagger, active, float(env.grid_length), fps=fps,
                                  title="Continuous Tag")

    render.find_ffmpeg_for_matplotlib()  # for anim.to_html5_video() where no ffmpeg is on PATH
    grid = float(env.grid_length)
    fig = Figure(figsize=(fig_width, fig_height))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    pad = 0.03 * grid
    ax.set_xlim(-pad, grid + pad)
    ax.set_ylim(-pad, grid + pad)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_facecolor((0.1, 0.2, 0.5, 0.15))
    tagger_ids, runner_ids = np.flatnonzero(is_tagger), np.flatnonzero(~is_tagger)
    runners = ax.scatter(xs[0, runner_ids], ys[0, runner_ids], s=25, marker=render.RUNNER_STYLE["marker"],
                         c=runner_color, zorder=2)
    taggers_art = ax.scatter(xs[0, tagger_ids], ys[0, tagger_ids], s=100, marker=render.TAGGER_STYLE["marker"],
                             c=tagger_color, zorder=3)
    label = ax.text(0.02, 0.98, "", transform=ax.transAxes, va="top", fontsize=12, color="#666666")
    initial_runners = len(runner_ids)

    def animate(t: int):
        runners.set_offsets(np.column_stack([xs[t, runner_ids], ys[t, runner_ids]]))
        taggers_art.set_offsets(np.column_stack([xs[t, tagger_ids], ys[t, tagger_ids]]))
        runners.set_facecolors([runner_color if a else runner_not_in_game_color for a in active[t, runner_ids]])
        left = int(active[t, runner_ids].sum())
        label.set_text(f"continuous tag\ntime step: {t:4d}\nrunners left: {left:4d} "
                       f"({100 * left / max(initial_runners, 1):.0f}%)")
        return runners, taggers_art, label

    return render.video_animation_class()(fig, animate, frames=np.arange(played), interval=1000.0 / fps)
