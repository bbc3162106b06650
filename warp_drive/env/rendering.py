"""GIFs of episodes: ``episode.gif`` of ``warp-drive train`` and ``warp-drive evaluate --render``.

Environments draw themselves (``Environment.render``) with the helpers here:
``render_tag_episode`` / ``render_gridworld_episode`` (agents as markers) and
``render_polylines_episode`` (any drawing made of line segments: a cart and
pole, a pendulum, a car on a hill, a two-link arm). The module belongs to the
env layer, so an env imports it without the training stack.

Line drawings are drawn with Pillow alone (see ``render_polylines_episode``);
the agent plots with matplotlib. Drawn with an explicit ``matplotlib.figure.Figure`` on a ``FigureCanvasAgg``
instead of ``pyplot``: no global figure registry, no backend switch that would
change the caller's interactive matplotlib session, and it works headless.
Frames are written by ``PillowWriter`` (Pillow is a dependency already).

Each frame shows the positions after step ``t`` (frame 0 is the reset state),
so an episode of T steps gives T + 1 frames. The time counter in the title
also keeps consecutive frames distinct -- Pillow merges identical GIF frames,
which would otherwise make frame counts depend on whether agents moved.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["render_tag_episode", "render_gridworld_episode", "render_polylines_episode", "find_ffmpeg_for_matplotlib",
           "video_animation_class"]

TAGGER_STYLE = dict(color="#d62728", marker="^", label="tagger")
RUNNER_STYLE = dict(color="#1f77b4", marker="o", label="runner")
TAGGED_COLOR = "#b0b0b0"
FIGSIZE = (4.0, 4.0)
DPI = 80


def _as_episode(xs: Any, ys: Any, is_tagger: Any, active: Any | None):
    """Validate shapes: positions ``(T+1, N)``, ``is_tagger (N,)``, ``active (T+1, N)`` (default all True)."""
    xs = np.asarray(xs, dtype=np.float64)
    ys = np.asarray(ys, dtype=np.float64)
    if xs.ndim != 2 or xs.shape != ys.shape or xs.shape[0] < 1:
        raise ValueError(f"xs and ys must both have shape (T+1, N) with T+1 >= 1; got {xs.shape} and {ys.shape}")
    is_tagger = np.asarray(is_tagger, dtype=bool).reshape(-1)
    if is_tagger.shape != (xs.shape[1],):
        raise ValueError(f"is_tagger must have shape (N,) = ({xs.shape[1]},), got {is_tagger.shape}")
    if active is None:
        active = np.ones(xs.shape, dtype=bool)
    else:
        active = np.asarray(active, dtype=bool)
        if active.shape != xs.shape:
            raise ValueError(f"active must have the positions' shape {xs.shape}, got {active.shape}")
    return xs, ys, is_tagger, active


FFMPEG_HINT = ("matplotlib's animations write video (anim.to_html5_video(), anim.save('x.mp4')) with an ffmpeg "
               "binary: put ffmpeg on PATH, or pip install 'warp-drive[warpdrive]' (imageio-ffmpeg brings one)")


def find_ffmpeg_for_matplotlib() -> str | None:
    """The ffmpeg binary matplotlib's animation writer will use, pointing it at imageio-ffmpeg's when needed.

    Nothing changes when matplotlib finds ``rcParams["animation.ffmpeg_path"]``
    itself (``ffmpeg`` on PATH, or a path the user set) or when the user set
    that path at all (a setting is never overridden, even a wrong one). Only
    when the default ``"ffmpeg"`` is not on PATH and the ``imageio-ffmpeg``
    package is installed does the setting become its bundled binary
    (``imageio_ffmpeg.get_ffmpeg_exe()``). Returns the binary's path, or None
    when there is none (``FFMPEG_HINT`` says what to install).
    """
    import shutil

    import matplotlib

    configured = matplotlib.rcParams["animation.ffmpeg_path"]
    found = shutil.which(configured)
    if found is not None or configured != matplotlib.rcParamsDefault["animation.ffmpeg_path"]:
        return found
    try:
        import imageio_ffmpeg

        exe = imageio_ffmpeg.get_ffmpeg_exe()
    except (ImportError, RuntimeError):  # not installed, or its binary is missing for this platform
        return None
    matplotlib.rcParams["animation.ffmpeg_path"] = exe
    return exe


@functools.lru_cache(maxsize=None)
def video_animation_class() -> type:
    """``matplotlib.animation.FuncAnimation`` whose ``to_html5_video()`` finds an ffmpeg binary as
    :func:`find_ffmpeg_for_matplotlib` does and, when there is none, says what to install (``FFMPEG_HINT``)
    instead of matplotlib's "Requested MovieWriter (ffmpeg) not available"."""
    import matplotlib
    from matplotlib.animation import FuncAnimation

    class VideoFuncAnimation(FuncAnimation):
        def to_html5_video(self, embed_limit=None):
            if matplotlib.rcParams["animation.writer"] == "ffmpeg" and find_ffmpeg_for_matplotlib() is None:
                raise RuntimeError(f"no ffmpeg binary for anim.to_html5_video() "
                                   f"(rcParams['animation.ffmpeg_path'] = "
                                   f"{matplotlib.rcParams['animation.ffmpeg_path']!r}): {FFMPEG_HINT}")
            return super().to_html5_video(embed_limit)

    return VideoFuncAnimation


def _blit_writer_class():
    """``PillowWriter`` that grabs the Agg canvas as drawn (blitted) instead of re-rendering the figure."""
    from matplotlib.animation import PillowWriter
    from PIL import Image

    class BlitPillowWriter(PillowWriter):
        palette = None  # the first frame's adaptive palette, which every later frame reuses

        def grab_canvas(self) -> None:
            canvas = self.fig.canvas
            frame = Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
            frame = frame.convert("RGB")  # RGB quantizes to GIF's palette better than RGBA
            # Quantizing each frame on its own was most of a GIF's cost (Pillow builds a palette per frame
            # when saving); the frames of one drawing share their colours, so one palette serves them all.
            if self.palette is None:
                self.palette = frame.quantize(colors=128, dither=Image.Dither.NONE)
            self._frames.append(frame.quantize(palette=self.palette, dither=Image.Dither.NONE))

    return BlitPillowWriter


def _write_gif(
    out_path: str | os.PathLike,
    xs: np.ndarray,
    ys: np.ndarray,
    is_tagger: np.ndarray,
    active: np.ndarray,
    limits: tuple[float, float],
    fps: float,
    title: str,
    grid_cells: int | None = None,
    marker_size: float = 60.0,
) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    _BlitPillowWriter = _blit_writer_class()
    if fps <= 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    n_frames = xs.shape[0]
    taggers, runners = np.flatnonzero(is_tagger), np.flatnonzero(~is_tagger)

    fig = Figure(figsize=FIGSIZE, dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xlim(*limits)
    ax.set_ylim(*limits)
    ax.set_aspect("equal")
    ax.tick_params(labelsize=7)
    if grid_cells is not None:  # cell borders at half-integers
        ticks = np.arange(grid_cells + 1) - 0.5
        ax.set_xticks(ticks, minor=True)
        ax.set_yticks(ticks, minor=True)
        ax.grid(which="minor", color="#e0e0e0", linewidth=0.6)
        ax.tick_params(which="minor", length=0)
    # Runners below taggers, so a tagger standing on a runner stays visible.
    runner_art = ax.scatter(xs[0, runners], ys[0, runners], s=marker_size, marker=RUNNER_STYLE["marker"],
                            c=RUNNER_STYLE["color"], edgecolors="k", linewidths=0.4, zorder=2)
    tagger_art = ax.scatter(xs[0, taggers], ys[0, taggers], s=marker_size * 1.2, marker=TAGGER_STYLE["marker"],
                            c=TAGGER_STYLE["color"], edgecolors="k", linewidths=0.4, zorder=3)
    handles = [
        Line2D([], [], linestyle="", marker=TAGGER_STYLE["marker"], color=TAGGER_STYLE["color"], label="tagger"),
        Line2D([], [], linestyle="", marker=RUNNER_STYLE["marker"], color=RUNNER_STYLE["color"], label="runner"),
    ]
    if not active.all():
        handles.append(Line2D([], [], linestyle="", marker="o", color=TAGGED_COLOR, label="tagged out"))
    ax.legend(handles=handles, loc="upper right", fontsize=6, framealpha=0.7)
    heading = ax.set_title("", fontsize=9)
    prefix = f"{title}  " if title else ""
    width = len(str(n_frames - 1))

    # Blitting: the static parts (axes, ticks, grid, legend) are rendered once;
    # each frame restores that background and draws only the moving artists.
    # Redrawing the whole figure per frame spent most of its time on tick labels.
    for art in (runner_art, tagger_art, heading):
        art.set_animated(True)
    canvas = fig.canvas
    canvas.draw()
    background = canvas.copy_from_bbox(fig.bbox)

    writer = _BlitPillowWriter(fps=fps)
    with writer.saving(fig, str(out_path), dpi=DPI):
        for t in range(n_frames):
            runner_art.set_offsets(np.column_stack([xs[t, runners], ys[t, runners]]))
            tagger_art.set_offsets(np.column_stack([xs[t, taggers], ys[t, taggers]]))
            runner_art.set_facecolors([RUNNER_STYLE["color"] if a else TAGGED_COLOR for a in active[t, runners]])
            tagger_art.set_facecolors([TAGGER_STYLE["color"] if a else TAGGED_COLOR for a in active[t, taggers]])
            n_left = int(active[t, runners].sum())
            heading.set_text(f"{prefix}t = {t:>{width}d}/{n_frames - 1}   runners left: {n_left}/{len(runners)}")
            canvas.restore_region(background)
            for art in (runner_art, tagger_art, heading):
                ax.draw_artist(art)
            writer.grab_canvas()
    return out_path


def render_tag_episode(
    out_path: str | os.PathLike,
    xs: Any,
    ys: Any,
    is_tagger: Any,
    active: Any | None,
    grid_length: float,
    fps: float = 10,
    title: str = "",
) -> Path:
    """GIF of a continuous Tag episode on ``[0, grid_length]^2``.

    ``xs``, ``ys``: ``(T+1, N)`` positions; ``is_tagger``: ``(N,)``;
    ``active``: ``(T+1, N)`` still-in-the-game flags (tagged-out runners are
    drawn grey), or None when everyone stays in. Returns the GIF's path.
    """
    xs, ys, is_tagger, active = _as_episode(xs, ys, is_tagger, active)
    if not grid_length > 0:
        raise ValueError(f"grid_length must be > 0, got {grid_length}")
    pad = 0.03 * float(grid_length)
    return _write_gif(out_path, xs, ys, is_tagger, active, (-pad, float(grid_length) + pad), fps, title)


def _fan_out(xs: np.ndarray, ys: np.ndarray, radius: float = 0.22) -> tuple[np.ndarray, np.ndarray]:
    """Spread agents that share a cell on a small circle around its centre; lone agents stay centred."""
    xs, ys = xs.copy(), ys.copy()
    for t in range(xs.shape[0]):
        cells: dict[tuple[float, float], list[int]] = {}
        for i, key in enumerate(zip(xs[t], ys[t])):
            cells.setdefault(key, []).append(i)
        for members in cells.values():
            k = len(members)
            if k > 1:
                angle = 2 * np.pi * np.arange(k) / k
                xs[t, members] += radius * np.cos(angle)
                ys[t, members] += radius * np.sin(angle)
    return xs, ys


def render_gridworld_episode(
    out_path: str | os.PathLike,
    xs: Any,
    ys: Any,
    is_tagger: Any,
    grid_length: int,
    fps: float = 5,
    title: str = "",
    active: Any | None = None,
) -> Path:
    """GIF of a gridworld Tag episode: integer cells ``0 .. grid_length`` per axis.

    ``xs``, ``ys``: ``(T+1, N)`` cell coordinates; ``active`` optional as in
    ``render_tag_episode``. Agents sharing a cell (all taggers start on one)
    are fanned out around the cell centre so each stays visible.
    """
    xs, ys, is_tagger, active = _as_episode(xs, ys, is_tagger, active)
    if int(grid_length) != grid_length or grid_length < 1:
        raise ValueError(f"grid_length must be a positive integer, got {grid_length}")
    xs, ys = _fan_out(xs, ys)
    cells = int(grid_length) + 1
    marker = max(12.0, 60.0 * (11 / cells) ** 2) if cells > 11 else 60.0
    return _write_gif(out_path, xs, ys, is_tagger, active, (-0.5, cells - 0.5), fps, title, grid_cells=cells,
                      marker_size=marker)


Polyline = tuple[Sequence[float], Sequence[float]]  # (xs, ys) of one line through its points
POLYLINE_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e")  # the moving parts' colours, in draw order


def render_polylines_episode(
    out_path: str | os.PathLike,
    n_frames: int,
    draw: Callable[[int], Sequence[Polyline]],
    limits: tuple[float, float, float, float],
    background: Sequence[Polyline] = (),
    fps: float = 30,
    title: str = "",
    linewidth: float = 3.0,
    max_frames: int = 120,
) -> Path:
    """GIF of ``n_frames`` frames, frame ``t`` drawn as the polylines ``draw(t)`` returns.

    ``draw`` returns the same number of polylines every frame (the moving
    parts); ``background`` is drawn once (e.g. the track or the ground).
    ``limits`` is ``(xmin, xmax, ymin, ymax)`` in the drawing's units, kept
    at equal aspect. Longer episodes show every k-th step (and the last) so
    that at most ``max_frames`` are drawn.

    Drawn with Pillow alone, on palette images: line drawings need neither
    matplotlib's axes nor a quantizer, and importing matplotlib and setting up
    its figure was most of the GIF's cost at the end of every run (a CartPole
    GIF: 1.1 s with matplotlib, 0.1 s with Pillow).
    """
    from PIL import Image, ImageDraw

    if fps <= 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    if n_frames < 1:
        raise ValueError(f"n_frames must be >= 1, got {n_frames}")
    xmin, xmax, ymin, ymax = (float(v) for v in limits)
    if not (xmax > xmin and ymax > ymin):
        raise ValueError(f"limits must be (xmin, xmax, ymin, ymax) with xmax > xmin and ymax > ymin, got {limits}")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    size, margin, header = int(FIGSIZE[0] * DPI), 12, 20  # pixels: the image, its border, the title's band
    scale = min((size - 2 * margin) / (xmax - xmin), (size - 2 * margin - header) / (ymax - ymin))
    left = (size - scale * (xmax - xmin)) / 2
    bottom = size - margin - ((size - 2 * margin - header) - scale * (ymax - ymin)) / 2

    def pixels(xs: Sequence[float], ys: Sequence[float]) -> list[tuple[float, float]]:
        xs, ys = np.asarray(xs, dtype=np.float64).ravel(), np.asarray(ys, dtype=np.float64).ravel()
        if xs.shape != ys.shape:
            raise ValueError(f"a polyline's xs and ys must have the same length, got {xs.size} and {ys.size}")
        return list(zip((left + (xs - xmin) * scale).tolist(), (bottom - (ys - ymin) * scale).tolist()))

    palette = [255, 255, 255, 128, 128, 128, 0, 0, 0, *(c for h in POLYLINE_COLORS for c in bytes.fromhex(h[1:]))]
    still = Image.new("P", (size, size), 0)
    still.putpalette(palette)
    canvas = ImageDraw.Draw(still)
    for xs, ys in background:
        canvas.line(pixels(xs, ys), fill=1, width=1)
    width = max(1, round(linewidth * DPI / 72))
    dot = max(1.5, width * 0.6)
    stride = -(-n_frames // max(1, int(max_frames)))
    shown = sorted({*range(0, n_frames, stride), n_frames - 1})
    digits = len(str(n_frames - 1))
    prefix = f"{title}  " if title else ""
    count = None
    frames = []
    for t in shown:
        parts = draw(t)
        if count is None:
            count = len(parts)
        elif len(parts) != count:
            raise ValueError(f"draw({t}) returned {len(parts)} polylines, draw(0) {count}")
        frame = still.copy()
        canvas = ImageDraw.Draw(frame)
        for i, (xs, ys) in enumerate(parts):
            points, ink = pixels(xs, ys), 3 + i % len(POLYLINE_COLORS)
            canvas.line(points, fill=ink, width=width, joint="curve")
            for x, y in points:
                canvas.ellipse((x - dot, y - dot, x + dot, y + dot), fill=ink)
        # The time counter also keeps consecutive frames distinct: Pillow merges identical GIF frames.
        canvas.text((margin, 4), f"{prefix}t = {t:>{digits}d}/{n_frames - 1}", fill=2)
        frames.append(frame)
    frames[0].save(out_path, save_all=True, append_images=frames[1:], duration=round(1000 / fps), loop=0)
    return out_path
