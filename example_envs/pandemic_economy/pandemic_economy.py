"""PandemicEconomy: a synthetic pandemic-and-economy env with S regional governors and one planner.

**Intended use / out of scope.** A *systems benchmark*: it has the structure of
the COVID-19 economic simulation of Trott et al. 2021, "Building a Foundation
for Data-Driven, Interpretable, and Robust Policy Design using the AI
Economist" (arXiv 2108.02904), the third workload of the WarpDrive paper (two
heterogeneous policies, long episodes, a step dominated by a dense
unemployment filter). Every parameter is *synthetic*: drawn from a seeded
generator over the ranges below, with anonymous regions, no calendar dates, no
data of any real place or epidemic and no calibration. It is **not** a policy
model nor an epidemiological or economic model; nothing it outputs says
anything about real policy. The original's calibrated files are not used,
shipped or loadable.

**Agents.** Regions ``0 .. S-1`` (group ``regions``) and the planner, agent
``S`` (group ``planner``). One step is one day; an episode has ``T`` steps
(truncated, ``_done_ = 2``; the env never terminates).

* Region action ``Discrete(Lv + 1)``: 0 keeps the stringency level, ``k``
  (1..Lv) sets level ``k`` (1 fully open, Lv fully closed; every region starts
  at 1). After a change the region's actions are ignored and masked
  (``action_mask_regions``: only action 0 legal) for the next ``C - 1`` steps,
  so a region changes level at most once every ``C`` steps. Choosing the
  current level is not a change.
* Planner action ``Discrete(M + 1)``: the subsidy level ``l`` (0 = none). It
  is read only on decision steps, ``(t - 1) mod P == 0`` (``t`` = 1, P + 1,
  ...); on every other step only action 0 is legal (``action_mask_planner``)
  and the action is ignored: the level stays.

**Health** (per region, fractions of its population ``N_s``; S + I + R = 1,
with V (vaccinated) and D (dead) parts of R): transmission from the level
``d`` days earlier (a ring of levels per region):
``beta(pi) = max(beta0_s * (1 - kappa_s * (pi - 1) / (Lv - 1)), 0)``,
``beta0_s = R0_s * gamma``. Each day, in float32 and in this order::

    new_inf = min(((beta * S) * I) * (1 - V), S)      # f = V, the vaccinated fraction
    new_rem = gamma * I
    vac     = min(vaccination_rate, S - new_inf) if t >= vaccination_start else 0
    S' = max((S - new_inf) - vac, 0); I' = max((I + new_inf) - new_rem, 0); R' = max((R + new_rem) + vac, 0)
    V' = V + vac; D' = D + mu_s * new_rem; cum_infected' = cum_infected + new_inf

**Unemployment**: ``x = sum_k w_sk sum_{j<L} exp(-j / lambda_k) * dpi_{t-j}``
over the last L daily level changes ``dpi`` (a ring per region, ``change_ring``
(S, 2L): day t's change at slot ``L - 1 - t mod L`` and again L slots later, so
the last L changes, newest first, are one contiguous window; K filters with
``lambda_k`` geometric from ``lambda_min`` to ``lambda_max``); **dense** over
every tap (K * L multiply-adds per region per step: 153,000 per env step at the
defaults, the benchmark's cost); the decay table ``filter_table`` (K, L) is
computed on the host. ``u = clip(base_s - ln 2 + softplus(x), 0, 1)``.

**Economy** (per capita per day, in units of ``output_per_worker`` / 365):
output ``y = work_fraction_s * (1 - u) * max(1 - I' - D', 0) * A / 365``; the
subsidy ``(l / M) * s_max * A / 365`` per capita (``s_max`` = ``max_subsidy``,
0.02 by default: at the top level about a third of the consumption a fully
closed region loses against a fully open one, so a subsidy shifts the
trade-off without swamping the regions' rewards) is added to each region's consumption; the planner pays
``(1 + r)`` per unit of subsidy, so the nation consumes ``sum_s share_s * (y_s + sub_s) - (1 + r) *
sum_s share_s * sub_s`` (``share_s = N_s / sum N``).

**Rewards**: region ``r_s = alpha_s * h_hat + (1 - alpha_s) * e_hat`` with the
raw health index ``h = -(new deaths per capita)`` and the economic index
``e = CRRA((y + sub) / y_open_s)``, ``CRRA(c) = (c^(1-eta) - 1) / (1 - eta)``
(log at eta = 1; c floored at 1e-3), ``y_open_s = work_fraction_s * (1 -
base_s) * A / 365``. Each index is min-max normalised per region by bounds
calibrated at construction: the NumPy reference runs one episode fully open
(action 0 throughout) and one fully closed (level Lv from step 1), no subsidy;
the episode means of ``h`` (closed: 1, open: 0) and ``e`` (open: 1, closed: 0)
are the bounds. The planner's reward is the same on national (population-
weighted) sums net of its subsidy cost, with weight ``planner_alpha``.

**Observations**: a region sees its feature row (S, I, R, V, D, u, y / y_open,
lagged level / Lv, level / Lv, cooldown / (C - 1)), the subsidy timer (steps to
the next decision / P), the subsidy level / M, t / T and its one-hot id: ``13 +
S`` floats. The planner sees every region's feature row, then the timer,
subsidy level and time: ``10 S + 3`` floats. ``state_arrays`` =
(``region_features``, ``national``): the compact global state.

**Parameters** (constructor keyword, default or draw, meaning); draws come from
``np.random.default_rng(seed)`` in the order listed:

=====================  ======================  ==========================================================
name                   default / draw          meaning
=====================  ======================  ==========================================================
num_regions            51                      S
episode_length         540                     T, steps (days) per episode
num_levels             10                      Lv, stringency levels
cooldown               28                      C: steps between two changes of one region
num_subsidy_levels     20                      M
subsidy_period         90                      P: steps between planner decisions
delay                  21                      d: days from a level to its effect on transmission
filter_memory          600                     L: level changes the unemployment filter reads
num_filters            5                       K
lambda_min/max         30 / 540                filter time constants (days), geometric
gamma                  1/14                    recovery rate
vaccination_start      120                     first step with vaccination
vaccination_rate       0.002                   fraction of the population vaccinated per day
output_per_worker      1.0                     A: yearly output per worker (units)
max_subsidy            0.02                    s_max: top level's per-capita subsidy per day, in A / 365
borrow_rate            0.05                    r: the planner pays (1 + r) per unit of subsidy
eta                    2.0                     CRRA coefficient
planner_alpha          0.5                     planner's health weight
R0_range               U[1.3, 2.7]             R0_s (beta0_s = R0_s * gamma)
kappa_range            U[0.5, 0.9]             kappa_s: transmission cut at level Lv
population_range       logU[5e5, 4e7]          N_s (only shares N_s / sum N matter)
work_fraction_range    U[0.55, 0.70]           working-age share
base_unemployment_rng  U[0.03, 0.07]           base_s
death_share_range      U[0.005, 0.02]          mu_s
alpha_range            U[0.3, 0.7]             alpha_s
initial_infected_rng   U[1e-4, 1e-3]           I at reset (S = 1 - I)
filter_weight_range    U[0.005, 0.02]          w_sk, per region and filter
=====================  ======================  ==========================================================

``params_file``: optionally a user's ``.npz`` whose arrays replace draws by
name: ``R0``, ``kappa``, ``population``, ``work_fraction``,
``base_unemployment``, ``death_share``, ``alpha``, ``initial_infected`` (each
shape (S,)) and ``filter_weights`` (S, K); missing names keep their draws.
The project ships no such file.

The NumPy reference (``reference_step``) reproduces the kernel's float32
operations one by one (``wd_expf``/``wd_logf`` through
``warp_drive.runtime.portable_math``, sums in the kernel's order through
``np.cumsum``), so kernel and reference agree bit for bit.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
from gymnasium import spaces

from warp_drive.runtime.data_feed import DataFeed
from warp_drive.env.environment import AGENT_PHASES, TRUNCATED, Environment, Parameter, require_finite
from warp_drive.runtime.portable_math import expf32, logf32

F32 = np.float32
FEATURES = 10
NATIONAL = 4
LN2 = F32(0.693147182)
MIN_CONSUMPTION = F32(1.0e-3)
# Columns of region_params (pandemic_economy.cu's PE_* enums).
REGION_COLUMNS = ("pop_share", "work_fraction", "base_unemployment", "death_share", "alpha", "one_minus_alpha",
                  "output_open", "health_lo", "health_inv", "econ_lo", "econ_inv")
NATIONAL_COLUMNS = ("output_open", "health_lo", "health_inv", "econ_lo", "econ_inv", "alpha", "one_minus_alpha")
PARAM_FILE_KEYS = ("R0", "kappa", "population", "work_fraction", "base_unemployment", "death_share", "alpha",
                   "initial_infected", "filter_weights")
# Per-env state arrays: name -> dtype; each restored from its reset twin.
STATE = {
    "level": np.int32, "cooldown": np.int32, "lagged_level": np.int32, "level_ring": np.int32,
    "change_ring": F32, "susceptible": F32, "infected": F32, "removed": F32, "vaccinated": F32, "deaths": F32,
    "cum_infected": F32, "unemployment": F32, "output": F32, "subsidy": F32, "health_raw": F32, "econ_raw": F32,
    "region_features": F32, "national": F32, "subsidy_level": np.int32,
    "observations_regions": F32, "observations_planner": F32, "action_mask_regions": np.int32,
    "action_mask_planner": np.int32,
}


# The draws' ranges (the docstring's table): fractions lie in [0, 1], the others are positive or non-negative.
_FRACTIONS = ("kappa_range", "work_fraction_range", "base_unemployment_range", "death_share_range", "alpha_range",
              "initial_infected_range")


def _check_ranges(ranges: dict) -> None:
    """Each ``(low, high)`` draw range: two numbers, low <= high, within its quantity's bounds."""
    for name, pair in ranges.items():
        values = np.asarray(pair, np.float64).reshape(-1)
        if values.size != 2 or values[0] > values[1]:
            raise ValueError(f"PandemicEconomy: {name}={pair!r}: expected (low, high) with low <= high")
        low, high = float(values[0]), float(values[1])
        if name in _FRACTIONS and not 0.0 <= low <= high <= 1.0:
            raise ValueError(f"PandemicEconomy: {name}={pair!r}: a fraction, so within [0, 1]")
        if name == "population_range" and low <= 0.0:
            raise ValueError(f"PandemicEconomy: {name}={pair!r}: populations are > 0 (drawn log-uniformly)")
        if low < 0.0:
            raise ValueError(f"PandemicEconomy: {name}={pair!r}: must be >= 0")


def crra32(c: np.ndarray, one_minus_eta: np.float32) -> np.ndarray:
    """``pe_crra``: ``(c^(1-eta) - 1) / (1 - eta)`` (``log c`` at eta = 1), c floored at 1e-3, the kernel's bits."""
    x = np.maximum(np.asarray(c, F32), MIN_CONSUMPTION)
    if one_minus_eta == 0:
        return logf32(x)
    return ((expf32(one_minus_eta * logf32(x)) - F32(1.0)) / one_minus_eta).astype(F32)


def ordered_sum(terms: np.ndarray, axis: int = -1) -> np.ndarray:
    """``terms`` summed one by one from index 0 along ``axis`` in float32 (``np.cumsum`` is sequential;
    ``np.sum`` is pairwise and would round differently from the kernel's loop)."""
    return np.take(np.cumsum(terms, axis=axis, dtype=F32), -1, axis=axis)


FILTER_LANES = 8

# The calibration's reference episodes (see PandemicEconomy._calibrate) by a digest of every array they
# start from: a process that builds the same configuration again (a wrapper, a checkpoint's check, a test)
# reuses them instead of re-running 2 x 540 reference steps (about 1.5 s at the defaults).
_CALIBRATION_EPISODES: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _digest(arrays: dict) -> str:
    digest = hashlib.sha256()
    for name in sorted(arrays):
        value = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}:{value.dtype.str}:{value.shape};".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def lane_sum(terms: np.ndarray) -> np.ndarray:
    """``pe_filter_sum``'s order over the last axis: lane q sums the terms q, q + 8, q + 16, ... one by one,
    then the lanes are added in order (the kernel's eight independent chains).

    The terms are laid out as rows of eight, padded with -0.0 (x + -0.0 is x exactly, signed zeros
    included), so that one sequential sum down the rows runs all eight chains at once."""
    count = terms.shape[-1]
    padding = -count % FILTER_LANES
    if padding:
        terms = np.concatenate([terms, np.full(terms.shape[:-1] + (padding,), -0.0, F32)], axis=-1)
    chains = ordered_sum(terms.reshape(*terms.shape[:-1], -1, FILTER_LANES), axis=-2)
    total = chains[..., 0]
    for q in range(1, min(FILTER_LANES, count)):
        total = (total + chains[..., q]).astype(F32)
    return total


class PandemicEconomy(Environment):
    """Synthetic pandemic-and-economy benchmark: S regions and a planner (see the module docstring)."""

    name = "PandemicEconomy"
    cuda_source = "pandemic_economy.cu"
    step_kernel = "PandemicEconomyStep"
    thread_layout = AGENT_PHASES
    consistency_atol = 0.0
    consistency_rtol = 0.0
    state_arrays = ("region_features", "national")

    # The scalar parameters (the draw ranges and params_file are constructor keywords beside them). None is
    # pushed from here: the kernel's scalars are derived (constants()), which the calibration's reference reads too.
    parameters = (
        Parameter("num_regions", 51, ge=1, kernel=False, doc="regions S (agents 0..S-1; the planner is S)"),
        Parameter("episode_length", 540, ge=1, doc="days per episode"),
        Parameter("num_levels", 10, ge=2, kernel=False, doc="stringency levels a region chooses from"),
        Parameter("cooldown", 28, ge=1, kernel=False, doc="days a region keeps a level before changing it"),
        Parameter("num_subsidy_levels", 20, ge=1, kernel=False, doc="subsidy levels the planner chooses from"),
        Parameter("subsidy_period", 90, ge=1, kernel=False, doc="days between the planner's decisions"),
        Parameter("delay", 21, ge=1, kernel=False, doc="days before a level takes effect"),
        Parameter("filter_memory", 600, ge=1, kernel=False, doc="days of history the filters weigh"),
        Parameter("num_filters", 5, ge=1, kernel=False, doc="exponential filters of the infection history"),
        Parameter("lambda_min", 30.0, gt=0, kernel=False, doc="the shortest filter's time scale (days)"),
        Parameter("lambda_max", 540.0, gt=0, kernel=False, doc="the longest filter's time scale (>= lambda_min)"),
        Parameter("gamma", 1.0 / 14.0, gt=0, le=1, kernel=False, doc="recovery rate per day"),
        Parameter("vaccination_start", 120, kernel=False, doc="the day vaccination starts"),
        Parameter("vaccination_rate", 0.002, ge=0, le=1, kernel=False, doc="fraction vaccinated per day"),
        Parameter("output_per_worker", 1.0, gt=0, kernel=False, doc="yearly output of a worker"),
        Parameter("max_subsidy", 0.02, ge=0, kernel=False, doc="the top subsidy, a fraction of yearly output"),
        Parameter("borrow_rate", 0.05, kernel=False, doc="the planner's interest rate"),
        Parameter("eta", 2.0, kernel=False, doc="CRRA risk aversion of consumption (1: log)"),
        Parameter("planner_alpha", 0.5, ge=0, le=1, kernel=False, doc="the planner's weight of health"),
        Parameter("seed", 0, kernel=False, doc="draws every region's parameters"),
    )

    def __init__(
        self,
        R0_range: tuple[float, float] = (1.3, 2.7),
        kappa_range: tuple[float, float] = (0.5, 0.9),
        population_range: tuple[float, float] = (5e5, 4e7),
        work_fraction_range: tuple[float, float] = (0.55, 0.70),
        base_unemployment_range: tuple[float, float] = (0.03, 0.07),
        death_share_range: tuple[float, float] = (0.005, 0.02),
        alpha_range: tuple[float, float] = (0.3, 0.7),
        initial_infected_range: tuple[float, float] = (1e-4, 1e-3),
        filter_weight_range: tuple[float, float] = (0.005, 0.02),
        params_file: str | Path | None = None,
        **config,
    ):
        super().__init__(**config)  # the table: types, finiteness, bounds
        ranges = {"R0_range": R0_range, "kappa_range": kappa_range, "population_range": population_range,
                  "work_fraction_range": work_fraction_range, "base_unemployment_range": base_unemployment_range,
                  "death_share_range": death_share_range, "alpha_range": alpha_range,
                  "initial_infected_range": initial_infected_range, "filter_weight_range": filter_weight_range}
        require_finite("PandemicEconomy", **ranges)
        _check_ranges(ranges)
        if self.lambda_max < self.lambda_min:
            raise ValueError(f"PandemicEconomy: lambda_max={self.lambda_max!r}: must be >= lambda_min="
                             f"{self.lambda_min!r}. Fix: raise lambda_max or lower lambda_min")
        gamma, lambda_min, lambda_max, planner_alpha = self.gamma, self.lambda_min, self.lambda_max, self.planner_alpha
        self.num_regions = S = self.num_regions
        self.num_agents = S + 1
        self.gamma = F32(gamma)
        self.vaccination_rate = F32(self.vaccination_rate)
        self.output_per_worker_day = F32(float(self.output_per_worker) / 365.0)
        self.subsidy_top_day = F32(float(self.max_subsidy) * float(self.output_per_worker) / 365.0)
        self.one_plus_r = F32(1.0 + float(self.borrow_rate))
        self.one_minus_eta = F32(1.0 - float(self.eta))

        rng = np.random.default_rng(self.seed)
        p = {
            "R0": rng.uniform(*R0_range, S),
            "kappa": rng.uniform(*kappa_range, S),
            "population": np.exp(rng.uniform(math.log(population_range[0]), math.log(population_range[1]), S)),
            "work_fraction": rng.uniform(*work_fraction_range, S),
            "base_unemployment": rng.uniform(*base_unemployment_range, S),
            "death_share": rng.uniform(*death_share_range, S),
            "alpha": rng.uniform(*alpha_range, S),
            "initial_infected": rng.uniform(*initial_infected_range, S),
            "filter_weights": rng.uniform(*filter_weight_range, (S, self.num_filters)),
        }
        if params_file is not None:
            with np.load(params_file) as user:
                for key in user.files:
                    if key not in PARAM_FILE_KEYS:
                        raise ValueError(f"PandemicEconomy: {params_file} has an unknown array {key!r}; known: "
                                         f"{PARAM_FILE_KEYS}")
                    value = np.asarray(user[key], np.float64)
                    if value.shape != p[key].shape:
                        raise ValueError(f"PandemicEconomy: {params_file}: {key!r} has shape {value.shape}, "
                                         f"expected {p[key].shape}")
                    if not np.isfinite(value).all():
                        raise ValueError(f"PandemicEconomy: {params_file}: {key!r} holds NaN or inf")
                    p[key] = value
        self.params = p

        # Transmission per region and level (index 0 unused: a copy of level 1).
        Lv = self.num_levels
        beta0 = (p["R0"] * float(gamma)).astype(F32)
        kappa = p["kappa"].astype(F32)
        levels = np.arange(Lv + 1, dtype=F32)
        levels[0] = 1
        cut = (kappa[:, None] * ((levels[None, :] - F32(1.0)) / F32(Lv - 1))).astype(F32)
        self.beta_table = np.maximum(beta0[:, None] * (F32(1.0) - cut), F32(0.0)).astype(F32)
        # The dense filter's decay table (K, L) and its per-region weights (S, K).
        K, L = self.num_filters, self.filter_memory
        lambdas = (float(lambda_min) * (float(lambda_max) / float(lambda_min)) ** (np.arange(K) / max(K - 1, 1)))
        self.filter_table = np.exp(-np.arange(L)[None, :] / lambdas[:, None]).astype(F32)
        self.filter_weights = p["filter_weights"].astype(F32)

        params = np.zeros((S, len(REGION_COLUMNS)), F32)
        col = {name: i for i, name in enumerate(REGION_COLUMNS)}
        params[:, col["pop_share"]] = p["population"] / p["population"].sum()
        params[:, col["work_fraction"]] = p["work_fraction"]
        params[:, col["base_unemployment"]] = p["base_unemployment"]
        params[:, col["death_share"]] = p["death_share"]
        params[:, col["alpha"]] = p["alpha"]
        params[:, col["one_minus_alpha"]] = 1.0 - p["alpha"]
        employed = params[:, col["work_fraction"]] * (F32(1.0) - params[:, col["base_unemployment"]])
        params[:, col["output_open"]] = employed * self.output_per_worker_day
        params[:, col["health_inv"]] = 1.0
        params[:, col["econ_inv"]] = 1.0
        national = np.zeros(len(NATIONAL_COLUMNS), F32)
        ncol = {name: i for i, name in enumerate(NATIONAL_COLUMNS)}
        national[ncol["output_open"]] = ordered_sum(params[:, col["pop_share"]] * params[:, col["output_open"]])
        national[ncol["health_inv"]] = 1.0
        national[ncol["econ_inv"]] = 1.0
        national[ncol["alpha"]] = planner_alpha
        national[ncol["one_minus_alpha"]] = 1.0 - float(planner_alpha)
        self.region_params, self.national_params = params, national
        self._calibrate(col, ncol)

    # ---------------------------------------------------------------- calibration
    def _calibrate(self, col: dict, ncol: dict) -> None:
        """Min-max bounds of the raw indices from two reference episodes: fully open (env 0) and fully
        closed (env 1, level Lv from step 1), no subsidy."""
        arrays = self.initial_arrays(2)
        arrays.update(self.constants())
        arrays.update({"_timestep_": np.zeros(2, np.int32), "_done_": np.zeros(2, np.int32),
                       "episode_length": np.int32(self.episode_length), "n_agents": np.int32(self.num_agents)})
        key = _digest(arrays)
        if key not in _CALIBRATION_EPISODES:
            sums_h = np.zeros((2, self.num_regions))
            sums_e = np.zeros((2, self.num_regions))
            sums_n = np.zeros((2, 2))
            for step in range(self.episode_length):
                arrays["sampled_actions_regions"][1] = self.num_levels if step == 0 else 0
                self.reference_step(arrays)
                sums_h += arrays["health_raw"]
                sums_e += arrays["econ_raw"]
                sums_n += arrays["national"][:, :2]
            _CALIBRATION_EPISODES[key] = tuple(x / self.episode_length for x in (sums_h, sums_e, sums_n))
        mean_h, mean_e, mean_n = (x.copy() for x in _CALIBRATION_EPISODES[key])

        def bounds(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            span = hi - lo
            return lo.astype(F32), np.where(np.abs(span) > 1e-12, 1.0 / np.where(span == 0, 1.0, span), 1.0).astype(F32)

        rp, np_ = self.region_params, self.national_params
        rp[:, col["health_lo"]], rp[:, col["health_inv"]] = bounds(mean_h[0], mean_h[1])  # open: 0, closed: 1
        rp[:, col["econ_lo"]], rp[:, col["econ_inv"]] = bounds(mean_e[1], mean_e[0])      # closed: 0, open: 1
        (np_[ncol["health_lo"]],), (np_[ncol["health_inv"]],) = bounds(mean_n[0:1, 0], mean_n[1:2, 0])
        (np_[ncol["econ_lo"]],), (np_[ncol["econ_inv"]],) = bounds(mean_n[1:2, 1], mean_n[0:1, 1])
        self.calibration = {"health_open": mean_h[0], "health_closed": mean_h[1], "econ_open": mean_e[0],
                            "econ_closed": mean_e[1], "national_open": mean_n[0], "national_closed": mean_n[1]}

    # ---------------------------------------------------------------- sizes and spaces
    @property
    def region_observation_size(self) -> int:
        return FEATURES + 3 + self.num_regions

    @property
    def planner_observation_size(self) -> int:
        return FEATURES * self.num_regions + 3

    def agent_groups(self) -> dict[str, list[int]]:
        return {"regions": list(range(self.num_regions)), "planner": [self.num_regions]}

    def array_ranges(self) -> dict[str, tuple[int, int]]:
        # int state a checkpoint may hold: levels pick beta_table columns, the rest are counters and flags
        levels = (1, self.num_levels)
        return {"level": levels, "lagged_level": levels, "level_ring": levels, "cooldown": (0, self.cooldown - 1),
                "subsidy_level": (0, self.num_subsidy_levels), "action_mask_regions": (0, 1),
                "action_mask_planner": (0, 1)}

    def observation_space(self, agent_id: int):
        size = self.region_observation_size if agent_id < self.num_regions else self.planner_observation_size
        return spaces.Box(-np.inf, np.inf, shape=(size,), dtype=np.float32)

    def action_space(self, agent_id: int):
        return spaces.Discrete((self.num_levels if agent_id < self.num_regions else self.num_subsidy_levels) + 1)

    # ---------------------------------------------------------------- data
    def initial_arrays(self, num_envs: int) -> dict[str, np.ndarray]:
        """Every per-env array at the start of an episode (the reset twins), plus actions and rewards."""
        E, S = int(num_envs), self.num_regions
        i0 = np.broadcast_to(self.params["initial_infected"].astype(F32), (E, S)).copy()
        a = {
            "level": np.ones((E, S), np.int32), "cooldown": np.zeros((E, S), np.int32),
            "lagged_level": np.ones((E, S), np.int32), "level_ring": np.ones((E, S, self.delay), np.int32),
            "change_ring": np.zeros((E, S, 2 * self.filter_memory), F32),  # each change twice, L apart
            "susceptible": (F32(1.0) - i0).astype(F32), "infected": i0,
            "removed": np.zeros((E, S), F32), "vaccinated": np.zeros((E, S), F32), "deaths": np.zeros((E, S), F32),
            "cum_infected": i0.copy(),
            "unemployment": np.broadcast_to(self.region_params[:, 2], (E, S)).copy(),
            "output": np.broadcast_to(self.region_params[:, 6], (E, S)).copy(),
            "subsidy": np.zeros((E, S), F32), "health_raw": np.zeros((E, S), F32), "econ_raw": np.zeros((E, S), F32),
            "national": np.zeros((E, NATIONAL), F32), "subsidy_level": np.zeros(E, np.int32),
            "action_mask_regions": np.ones((E, S, self.num_levels + 1), np.int32),
            "action_mask_planner": np.ones((E, 1, self.num_subsidy_levels + 1), np.int32),
            "sampled_actions_regions": np.zeros((E, S), np.int32),
            "sampled_actions_planner": np.zeros((E, 1), np.int32),
            "rewards_regions": np.zeros((E, S), F32), "rewards_planner": np.zeros((E, 1), F32),
        }
        features = np.zeros((E, S, FEATURES), F32)
        for k, name in enumerate(("susceptible", "infected", "removed", "vaccinated", "deaths", "unemployment")):
            features[..., k] = a[name]
        features[..., 6] = 1.0
        features[..., 7] = F32(1.0) / F32(self.num_levels)
        features[..., 8] = F32(1.0) / F32(self.num_levels)
        a["region_features"] = features
        a["observations_regions"], a["observations_planner"] = self.observe(
            features, np.zeros(E, np.int32), np.zeros(E, np.int32))
        return a

    def constants(self) -> dict:
        """The shared constant arrays and the scalars the kernel reads."""
        return {
            "beta_table": self.beta_table, "filter_table": self.filter_table, "filter_weights": self.filter_weights,
            "region_params": self.region_params, "national_params": self.national_params,
            "num_regions": np.int32(self.num_regions), "num_levels": np.int32(self.num_levels),
            "cooldown_steps": np.int32(self.cooldown), "num_subsidy_levels": np.int32(self.num_subsidy_levels),
            "subsidy_period": np.int32(self.subsidy_period), "delay": np.int32(self.delay),
            "filter_memory": np.int32(self.filter_memory), "num_filters": np.int32(self.num_filters),
            "gamma": self.gamma, "vaccination_start": np.int32(self.vaccination_start),
            "vaccination_rate": self.vaccination_rate, "output_per_worker_day": self.output_per_worker_day,
            "subsidy_top_day": self.subsidy_top_day, "one_plus_r": self.one_plus_r, "one_minus_eta": self.one_minus_eta,
        }

    def get_data_dictionary(self, num_envs: int) -> DataFeed:
        feed = DataFeed()
        for name, value in self.initial_arrays(num_envs).items():
            feed.add_data(name, value, save_copy_and_apply_at_reset=name in STATE)
        for name, value in self.constants().items():
            feed.add_data(name, value)
        return feed

    # ---------------------------------------------------------------- NumPy reference
    def observe(self, features: np.ndarray, timestep: np.ndarray, subsidy_level: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
        """Observations of the regions (E, S, 13 + S) and of the planner (E, 1, 10 S + 3) at step ``timestep``."""
        E, S = features.shape[:2]
        t = np.asarray(timestep, np.int32)
        P = np.int32(self.subsidy_period)
        timer = (P - (t - 1) % P).astype(F32) / F32(P)  # at reset (t = 0): 1 / P, the next step decides
        extra = np.stack([timer, subsidy_level.astype(F32) / F32(self.num_subsidy_levels),
                          t.astype(F32) / F32(self.episode_length)], axis=1).astype(F32)  # (E, 3)
        regions = np.concatenate([features, np.broadcast_to(extra[:, None, :], (E, S, 3)),
                                  np.broadcast_to(np.eye(S, dtype=F32), (E, S, S))], axis=2).astype(F32)
        planner = np.concatenate([features.reshape(E, -1), extra], axis=1)[:, None, :].astype(F32)
        return regions, planner

    def reference_step(self, a: dict) -> None:
        """One step of every env in NumPy, operation for operation like the kernel."""
        E, S = a["level"].shape
        Lv, C = int(a["num_levels"]), int(a["cooldown_steps"])
        M, P = int(a["num_subsidy_levels"]), int(a["subsidy_period"])
        d, L, K = int(a["delay"]), int(a["filter_memory"]), int(a["num_filters"])
        t = (a["_timestep_"] + 1).astype(np.int32)
        envs = np.arange(E)

        # 1. decisions
        act = a["sampled_actions_regions"]
        old = a["level"].copy()
        cd = a["cooldown"]
        cooling = cd > 0
        change = ~cooling & (act > 0) & (act <= Lv) & (act != old)
        new = np.where(change, act, old).astype(np.int32)
        cd[...] = np.where(cooling, cd - 1, np.where(change, C - 1, cd))
        slot = t % d
        ring = a["level_ring"]
        a["lagged_level"][...] = ring[envs, :, slot]
        ring[envs, :, slot] = new
        newest = (L - 1) - t % L  # and newest + L: the last L changes are one window, newest first
        a["change_ring"][envs, :, newest] = a["change_ring"][envs, :, newest + L] = (new - old).astype(F32)
        a["level"][...] = new
        pa = a["sampled_actions_planner"][:, 0]
        decide = ((t - 1) % P == 0) & (pa >= 0) & (pa <= M)
        a["subsidy_level"][...] = np.where(decide, pa, a["subsidy_level"])

        # 2. regions
        rp = a["region_params"]
        su, inf_, re, va, de = (a[n].copy() for n in ("susceptible", "infected", "removed", "vaccinated", "deaths"))
        beta = a["beta_table"][np.arange(S)[None, :], a["lagged_level"]]
        new_inf = ((beta * su) * inf_) * (F32(1.0) - va)
        new_inf = np.minimum(new_inf, su)
        new_rem = F32(a["gamma"]) * inf_
        vaccinating = (t >= int(a["vaccination_start"]))[:, None]
        vac = np.where(vaccinating, np.minimum(F32(a["vaccination_rate"]), su - new_inf), F32(0.0)).astype(F32)
        su2 = np.maximum((su - new_inf) - vac, F32(0.0))
        in2 = np.maximum((inf_ + new_inf) - new_rem, F32(0.0))
        re2 = np.maximum((re + new_rem) + vac, F32(0.0))
        new_deaths = rp[:, 3] * new_rem
        va2, de2 = va + vac, de + new_deaths
        a["susceptible"][...], a["infected"][...], a["removed"][...] = su2, in2, re2
        a["vaccinated"][...], a["deaths"][...] = va2, de2
        a["cum_infected"][...] = a["cum_infected"] + new_inf

        # the dense filter: taps j = 0 .. L-1 from the newest change, in pe_filter_sum's lanes; filters in order
        idx = ((L - 1) - t % L)[:, None] + np.arange(L)[None, :]  # (E, L): the window of days t, t - 1, ...
        ordered = np.take_along_axis(a["change_ring"], np.broadcast_to(idx[:, None, :], (E, S, L)), axis=2)
        table, weights = a["filter_table"], a["filter_weights"]
        x = None
        for k in range(K):
            acc = lane_sum(table[k][None, None, :] * ordered)
            term = weights[:, k] * acc
            x = term if x is None else x + term
        softplus = np.maximum(x, F32(0.0)) + logf32(F32(1.0) + expf32(-np.abs(x)))
        u = np.minimum(np.maximum((rp[:, 2] - LN2) + softplus, F32(0.0)), F32(1.0)).astype(F32)
        a["unemployment"][...] = u

        apd = F32(a["output_per_worker_day"])
        able = np.maximum((F32(1.0) - in2) - de2, F32(0.0))
        y = ((rp[:, 1] * (F32(1.0) - u)) * able) * apd
        level_sub = a["subsidy_level"]
        sub = np.broadcast_to(((level_sub.astype(F32) / F32(M)) * F32(a["subsidy_top_day"]))[:, None],
                              (E, S)).astype(F32)
        a["output"][...], a["subsidy"][...] = y, sub
        one_minus_eta = F32(a["one_minus_eta"])
        health = -new_deaths
        econ = crra32((y + sub) / rp[:, 6], one_minus_eta)
        a["health_raw"][...], a["econ_raw"][...] = health, econ
        h_hat = (health - rp[:, 7]) * rp[:, 8]
        e_hat = (econ - rp[:, 9]) * rp[:, 10]
        a["rewards_regions"][...] = rp[:, 4] * h_hat + rp[:, 5] * e_hat

        f = a["region_features"]
        for k, value in enumerate((su2, in2, re2, va2, de2, u, y / rp[:, 6])):
            f[..., k] = value
        f[..., 7] = a["lagged_level"].astype(F32) / F32(Lv)
        f[..., 8] = new.astype(F32) / F32(Lv)
        f[..., 9] = cd.astype(F32) / F32(C - 1 if C > 1 else 1)
        regions_obs, planner_obs = self.observe(f, t, level_sub)
        a["observations_regions"][...] = regions_obs
        mask = np.ones((E, S, Lv + 1), np.int32)
        mask[..., 1:] = (cd == 0)[..., None]
        a["action_mask_regions"][...] = mask

        # 3. planner
        share = rp[:, 0]
        n_health = ordered_sum(share * health)
        n_output = ordered_sum(share * y)
        n_subsidy = ordered_sum(share * sub)
        q = a["national_params"]
        net = (n_output + n_subsidy) - F32(a["one_plus_r"]) * n_subsidy
        n_econ = crra32(net / q[0], one_minus_eta)
        a["national"][...] = np.stack([n_health, n_econ, n_subsidy, net], axis=1)
        a["rewards_planner"][:, 0] = q[5] * ((n_health - q[1]) * q[2]) + q[6] * ((n_econ - q[3]) * q[4])
        a["observations_planner"][...] = planner_obs
        pmask = np.ones((E, 1, M + 1), np.int32)
        pmask[..., 1:] = (t % P == 0)[:, None, None]
        a["action_mask_planner"][...] = pmask

        a["_timestep_"][...] = t
        done = a["_done_"]
        done[(t >= a["episode_length"]) & (done == 0)] = TRUNCATED
