"""Command line: ``warp-drive`` (or ``python -m warp_drive``).

    warp-drive train --config tag_continuous_small
    warp-drive train --config cartpole --set trainer.num_envs=64 policy.shared.lr=1e-3 --backend cpu
    warp-drive train --config cartpole --resume latest
    warp-drive train --config cartpole --auto-scale --memory-budget 2GiB
    warp-drive evaluate runs/cartpole/experiment/20250101-120000 --episodes 20
    warp-drive configs
    warp-drive envs
    warp-drive check DummyEnv

Configuration mistakes (unknown keys, wrong types, a misspelt env name, env
constructor arguments the env rejects) end with a message and exit status 2,
before anything is compiled; so do the env's own mistakes found while it is
built (a kernel that does not compile, with the compiler's file:line of the
.cu; an argument that does not bind; a space that disagrees with its array;
policies that do not fit the env): one line each, ``--debug`` for the
traceback. A traceback means a bug, not a typo. Run directory
problems (a run another process holds, an unsafe or unreadable checkpoint, a
full disk) end with a message and exit status 1. The training
modules (torch and the executors) are imported only by the commands that need
them, so ``--help``, ``configs`` and ``envs`` answer at once.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
from typing import Sequence

from warp_drive import __version__

from warp_drive.runtime import env_vars
from warp_drive.compat.run_config import SHIPPED_FOR_WARPDRIVE_ENV, scaled_overrides
from warp_drive.env.registry import EnvLookupError, get_env_class, registered_envs
from warp_drive.env.scaffold import ScaffoldError, names_for, scaffold
from warp_drive.training import evaluation
from warp_drive.training.autoscale import ScaleError, auto_scale
from warp_drive.training.runs.dirs import resolve_run_dir
from warp_drive.training.config import (
    BACKENDS,
    CONFIG_DIR,
    RESUMABLE_KEYS,
    RUN_CONFIG_FIX,
    ConfigError,
    RunConfig,
    RunError,
    apply_overrides,
    available_configs,
    check_env,
    load_config,
    parse_yaml,
    read_yaml_file,
    refused_setup,
)

EXIT_USAGE = 2  # argparse's status for a bad command line; used for bad configs too
EXIT_INTERRUPTED = 130
EXIT_RUN_ERROR = 1
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STOP_GRACE_S = 30.0  # after a forwarded signal, how long torchrun gets to stop its workers before SIGKILL

TRAIN_EPILOG = """\
examples:
  warp-drive train --config tag_continuous_small
  warp-drive train --config cartpole --set trainer.total_steps=200000 policy.shared.lr=1e-3
  warp-drive train --config my_run.yaml --backend pycuda
  warp-drive train --config cartpole --set 'policy.*.entropy_coef={type: linear, start: 0.02, end: 0}'
  warp-drive train --config cartpole --resume latest
  warp-drive train --config cartpole --nproc 2
  warp-drive train --config tag_continuous_small --auto-scale --memory-budget 4GiB --max-envs 8192
  torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29400 \
      -m warp_drive train --config tag_continuous_small

--nproc N re-launches the command under torch's launcher (torch.distributed.run
--standalone, which picks a free port): N data-parallel processes, each with its
own envs (seed + rank); one GPU each (NCCL) or a share of the CPU (gloo).
Under torchrun the same command needs no flag: it reads RANK/WORLD_SIZE.

--auto-scale tries trainer.num_envs from the config's value upwards, doubling
(up to --max-envs and total_steps / rollout_length), each size in a child
process (a few training iterations) logged with its env steps/s and peak
memory, and trains with the fastest size that fits the memory budget of one
training process: GPU memory on a GPU (default 90% of it), resident host memory
on the cpu executor (default half of what is available, shared by the --nproc
processes).

WarpDrive 2.7 run configs (its run_configs/*.yaml) are detected and translated
key by key (train_batch_size -> rollout_length, num_episodes x episode_length ->
total_steps, vf_loss_coeff -> vf_coef, ...; WarpDrive's defaults written out);
the translation is printed and saved as warpdrive_translation.txt in the run.
--set takes WarpDrive's keys for such a file (trainer.train_batch_size=400), and
ours for what it lacks (trainer.backend=cpu). Its example script's flags work:
  warp-drive train -e tag_continuous            (our shipped config of that env)
  warp-drive train -e my_warpdrive_config.yaml -n 2 --results_dir first
  warp-drive train --config single_cartpole.yaml -a
-n/--num_gpus is --nproc; -a/--auto_scale is --auto-scale.

--set KEY=VALUE takes a dotted key path into the config and a YAML value
(200, 3e-4, true, null, [64, 64], {type: linear, start: 1e-3, end: 0}).
The key must exist in the config schema, except below env.config and
model.extra; policy.*.KEY sets KEY in every policy. Give --set once with
several pairs or repeat it; later values win, and --backend wins over both.

--resume RUN_DIR|latest continues a run from its newest intact checkpoint
(an unreadable one is skipped with a warning; one holding pickled code is
refused). 'latest' is the newest run of the --config given. The run keeps its
own config.yaml: --config must name the config it was started from, --backend
must match its backend, and --set may change only:
  """ + "\n  ".join(RESUMABLE_KEYS) + """
e.g. --set trainer.total_steps=2000000 extends a finished run. One process at a
time may train in a run directory (a lock file, <run>/.lock).

saving.keep_checkpoints (default 5) keeps the newest K checkpoints of a run
(0 keeps every one). saving.name and saving.tag are relative paths inside
saving.basedir.

On SIGINT/SIGTERM the --nproc launcher passes the signal on to torchrun and
its workers and waits for them (SIGKILL after 30 s); workers also die with
the torchrun agent if it is killed.
"""

EVALUATE_EPILOG = """\
examples:
  warp-drive evaluate runs/cartpole/experiment/20250101-120000
  warp-drive evaluate latest --episodes 50 --sample
  warp-drive evaluate runs/tag_continuous_small/experiment/20250101-120000 --render tag.gif

Actions are the policy's most likely ones unless --sample is given.
Prints per policy the mean ± std, min and max of the episodes' returns (each
the mean over the policy's agents), the team return (the policy's agents'
returns summed, mean ± std over the episodes) and the mean episode length.
--random CONFIG prints the same table for uniformly random legal actions in
that config's env (no run needed): the baseline to compare a trained run with.
  warp-drive evaluate --random cartpole --episodes 50
--render writes a GIF of one episode (environments that draw themselves:
Tag, the classic-control envs).
"""

CONFIGS_EPILOG = f"""\
Shipped configs live in {CONFIG_DIR}.
Train one by name (warp-drive train --config NAME), or copy it, edit it and
pass its path.
"""

CHECK_EPILOG = """\
examples:
  warp-drive check DummyEnv
  warp-drive check my_env.my_env:MyEnv --set env.config.num_agents=8
  warp-drive check --config my_run.yaml --steps 200
  warp-drive check TagContinuous --skip gpu-build --num-envs 2

Checks: construction (EnvWrapper on the cpu executor), gpu-build (nvcc for
sm_75, sm_80, sm_90, sm_120 and -G: build errors, spills, block limits), asan
and race (a random rollout under AddressSanitizer, and under ThreadSanitizer
with shuffled threads; each in a child process started with its runtime
preloaded), host-api (one episode of env.reset/env.step), consistency (the
kernel against reference_step on cpu and cpu-gpu), rollout (random legal
actions with resets: NaN/inf, int state outside array_ranges(), masks with no
legal action). A check that this machine cannot run says SKIP and why.
"""

ENVS_EPILOG = """\
Built-in environments, those registered with warp_drive.register_env in this
process, and those installed through the 'warp_drive.envs' entry-point group.
Use a name as env.name in a config. --describe NAME prints the env's parameter
table (name, type, default, bounds, whether the kernel gets it, doc): the keys
env.config takes; for an env without a table, its constructor's signature.
An env of your own needs no registering: name it as package.module:Class
(env.name, --describe, check), imported from the current directory first,
then sys.path: run the command in the folder that holds your package.
A packaged env registers through its pyproject.toml:
  [project.entry-points."warp_drive.envs"]
  MyEnv = "my_pkg.my_env:MyEnv"
  [tool.setuptools.package-data]
  my_pkg = ["*.cu"]
"""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="warp-drive",
        description="WarpDrive: multi-agent reinforcement learning with environment steps as CUDA C kernels "
        "(on a GPU through PyCUDA, or on any machine through the cpu executor).",
        epilog="Run 'warp-drive COMMAND --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the Python traceback of a failure instead of its one-line message")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    formatter = argparse.RawDescriptionHelpFormatter

    train = commands.add_parser(
        "train", help="train policies from a run config", formatter_class=formatter, epilog=TRAIN_EPILOG,
        description="Validate a run config, train its policies, and print the run directory "
        "(config.yaml, metrics.csv, TensorBoard events, checkpoints/).",
    )
    source = train.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", "-c", metavar="NAME_OR_PATH",
                        help="a shipped config's name (see 'warp-drive configs') or a YAML file (ours, or a "
                        "WarpDrive 2.7 run config: translated, and the translation printed and saved in the run)")
    source.add_argument("--env", "-e", metavar="NAME", default=None,
                        help="WarpDrive's example-script flag: our shipped config of that env (its WarpDrive name, "
                        "e.g. tag_continuous or single_cartpole, or ours), or a run config file")
    train.add_argument("--set", dest="overrides", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                       help="override config values, e.g. trainer.num_envs=200 policy.tagger.lr=3e-4")
    train.add_argument("--backend", choices=BACKENDS, default=None,
                       help="executor for the env kernels (sets trainer.backend; default: the config's)")
    train.add_argument("--resume", metavar="RUN_DIR|latest", default=None,
                       help="continue a run from its newest intact checkpoint ('latest': the newest run of this "
                       "config under saving.basedir); --set may then change only " + ", ".join(RESUMABLE_KEYS))
    train.add_argument("--no-progress", dest="progress", action="store_false",
                       help="no progress bar (for logs and CI)")
    train.add_argument("--nproc", "-n", "--num_gpus", dest="nproc", type=_positive_int, default=None, metavar="N",
                       help="data-parallel training with N processes on this machine (via torchrun): one GPU each, "
                       "or, without GPUs, N processes sharing the CPU on the cpu executor (default: 1, or a "
                       "WarpDrive config's trainer.num_gpus)")
    train.add_argument("--run-name", "--results_dir", "--results-dir", dest="results_dir", metavar="NAME",
                       default=None, help="the run directory's name under saving.basedir/name/tag instead of a "
                       "timestamp (new or empty; --results_dir is WarpDrive's name for it)")
    train.add_argument("--no-evaluate", dest="evaluate", action="store_false",
                       help="skip the evaluation episodes before and after training, their summary and the "
                       "episode GIF (checkpoints and metrics are written as usual)")
    train.add_argument("--track", action="store_true",
                       help="also log to Weights & Biases (pip install wandb; settings in saving.wandb; offline "
                       "into the run directory when there is no W&B login)")
    train.add_argument("--callback", dest="callbacks", action="append", default=[], metavar="MODULE:CLASS",
                       help="add a training-loop callback: a class importable from MODULE, built with no "
                       "arguments (see warp_drive.training.runs.callbacks); repeat for several")
    train.add_argument("--auto-scale", "--auto_scale", "-a", dest="auto_scale", action="store_true",
                       help="try num_envs sizes (doubling, each in a child process) and train with the fastest "
                       "that fits the memory budget")
    train.add_argument("--memory-budget", metavar="SIZE", default=None,
                       help="with --auto-scale: memory of one training process, e.g. 2GiB or 512MiB (default: 90%% "
                       "of the GPU's, or half of the host memory available on the cpu executor)")
    train.add_argument("--max-envs", type=_positive_int, default=None, metavar="N",
                       help="with --auto-scale: the most envs to try (default 65,536)")
    train.set_defaults(handler=cmd_train)

    evaluate = commands.add_parser(
        "evaluate", help="run a trained run's policies and report mean returns", formatter_class=formatter,
        epilog=EVALUATE_EPILOG,
        description="Load a run's latest checkpoint, play episodes, and print the mean episodic return per policy.",
    )
    evaluate.add_argument("run_dir", metavar="RUN_DIR", nargs="*",
                          help="a run directory, or 'latest'; several (one per training seed): the team return's "
                               "IQM over them with a 95%% bootstrap confidence interval")
    evaluate.add_argument("--random", metavar="CONFIG", default=None,
                          help="instead of a run: the baseline of a run config (a shipped config's name or a YAML "
                               "file, as train --config takes) where every agent takes a uniformly random legal "
                               "action (the action mask respected; Box actions uniform within their bounds)")
    evaluate.add_argument("--json", metavar="OUT.json", default=None,
                          help="write the episodes' team returns per run in marl-eval's JSON format")
    evaluate.add_argument("--episodes", "-n", type=_positive_int, default=10, help="episodes to play (default 10)")
    evaluate.add_argument("--render", metavar="OUT.gif", default=None, help="write a GIF of one episode")
    evaluate.add_argument("--sample", action="store_true",
                          help="sample actions from the policy instead of taking the most likely ones")
    evaluate.add_argument("--backend", choices=BACKENDS, default=None,
                          help="executor for the env kernels (default: the run's)")
    evaluate.set_defaults(handler=cmd_evaluate)

    configs = commands.add_parser("configs", help="list the shipped run configs", formatter_class=formatter,
                                  epilog=CONFIGS_EPILOG, description="List the shipped run configs.")
    configs.set_defaults(handler=cmd_configs)

    envs = commands.add_parser("envs", help="list the registered environments", formatter_class=formatter,
                               epilog=ENVS_EPILOG, description="List the registered environment names.")
    envs.add_argument("--describe", metavar="NAME", default=None,
                      help="an env's parameters (its env.config keys): a registered name or package.module:Class")
    envs.set_defaults(handler=cmd_envs)

    check = commands.add_parser(
        "check", help="run every check this machine can do on an env", formatter_class=formatter,
        epilog=CHECK_EPILOG, description="Check an environment: construction, GPU-shaped builds, the host API, "
        "the consistency checker, race mode, ASan and a NaN/range scan; one table per env, exit 1 on a failure.")
    check.add_argument("envs", nargs="*", metavar="ENV", help="a registered name or package.module:Class")
    check.add_argument("--config", "-c", metavar="NAME_OR_PATH", help="a run config: check its env.name "
                       "with its env.config")
    check.add_argument("--set", dest="overrides", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                       help="override env.config values, e.g. env.config.num_agents=8")
    check.add_argument("--num-envs", type=_positive_int, default=3, help="env replicas per run (default 3)")
    check.add_argument("--steps", type=_positive_int, default=None, help="steps of each rollout (default 100)")
    check.add_argument("--only", action="extend", nargs="+", default=[], metavar="CHECK",
                       help="run only these checks")
    check.add_argument("--skip", action="extend", nargs="+", default=[], metavar="CHECK", help="leave these out")
    check.add_argument("--timeout", type=float, default=600.0, help="seconds per sanitizer child (default 600)")
    check.set_defaults(handler=cmd_check)

    new = commands.add_parser(
        "new", help="scaffold a new environment in a folder you own", formatter_class=formatter,
        description="Write NAME's folder: the env class and its kernel (a small task that trains, to replace "
        "with yours), a run config naming it package.module:Class, a pyproject.toml with the entry point and the "
        ".cu as package data, a test that runs check, and a README. Then: warp-drive check; warp-drive train.")
    new.add_argument("name", metavar="NAME", help="the env's name, e.g. Foraging or level_based_foraging")
    new.add_argument("--dir", dest="parent", default=".", help="where to create the folder (default: here)")
    new.set_defaults(handler=cmd_new)
    return parser


# --------------------------------------------------------------------------- commands
def resolve_env_flag(args: argparse.Namespace) -> None:
    """WarpDrive's ``-e NAME``: sets ``args.config`` (and prepends the overrides that name needs)."""
    from pathlib import Path

    name = args.env
    if Path(name).expanduser().is_file() or name.endswith((".yaml", ".yml")):
        args.config = name
    elif name in SHIPPED_FOR_WARPDRIVE_ENV:
        args.config, extra = SHIPPED_FOR_WARPDRIVE_ENV[name]
        args.overrides = [*extra, *args.overrides]
    elif name in available_configs():
        args.config = name
    else:
        known = sorted({*SHIPPED_FOR_WARPDRIVE_ENV, *available_configs()})
        raise ConfigError(f"-e {name}: no config for that env (known: {', '.join(known)}; or pass a run config "
                          f"file, ours or WarpDrive's)")
    args.env = None
    if os.environ.get("RANK", "0") == "0":
        print(f"-e {name}: config {args.config}" + (f" with {' '.join(args.overrides)}" if args.overrides else ""))


def cmd_train(args: argparse.Namespace) -> int:
    if getattr(args, "env", None):
        resolve_env_flag(args)
    overrides = list(args.overrides)
    if args.backend is not None:
        overrides.append(f"trainer.backend={args.backend}")
    if args.resume is not None:
        config = resume_config(args)
    else:
        config = load_config(args.config, overrides)
    translation = getattr(config, "warpdrive_translation", None)
    if translation is not None:
        if os.environ.get("RANK", "0") == "0":
            print(translation.text(), flush=True)
        if args.nproc is None and translation.num_processes > 1 and "WORLD_SIZE" not in os.environ:
            args.nproc = translation.num_processes  # WarpDrive's -n default: the config's num_gpus
    check_env(config)  # a misspelt env name or constructor argument fails here, before any compile
    if args.auto_scale:
        chosen = auto_scale_sizes(args, config)
        if translation is not None:  # the batch of a WarpDrive config is over all envs: keep steps per env

            chosen = scaled_overrides(chosen, config.trainer.rollout_length)
        args.overrides = [*args.overrides, *chosen]  # after the user's, so they win; --nproc workers get them too
        config = load_config(args.config, [*overrides, *chosen])
    elif args.memory_budget is not None or args.max_envs is not None:
        raise ConfigError("--memory-budget and --max-envs only apply with --auto-scale")
    if args.nproc is not None:
        if config.trainer.backend == "pycuda":  # one line here rather than a traceback from every worker
            import importlib.util

            if importlib.util.find_spec("pycuda") is None:
                raise RunError("backend 'pycuda' is unavailable: PyCUDA is not installed. It needs an NVIDIA GPU "
                               "and pip install 'warp_drive[cuda]'; or use --backend cpu")
        return launch_workers(args)
    if "LOCAL_RANK" in os.environ and "RANK" in os.environ:  # a torchrun worker: end with the agent
        parent = os.getppid()
        die_with_parent()
        if os.getppid() != parent:  # the agent died before prctl took effect
            return EXIT_INTERRUPTED

    from warp_drive.training import run  # deferred: the training stack, for the commands that train
    from warp_drive.training.runs.callbacks import load_callback  # deferred: with the training stack above

    callbacks = [load_callback(spec) for spec in args.callbacks]
    if "LOCAL_RANK" not in os.environ:  # a torchrun worker binds its GPU first (distributed.init), then starts it
        check_backend(config.trainer.backend)
    extra = {"run_name": args.results_dir} if args.results_dir is not None else {}
    extra.update({"callbacks": callbacks} if callbacks else {})
    extra.update({"track": True} if args.track else {})
    extra.update({"evaluate": False} if not args.evaluate else {})
    run_dir = run.train(config, resume=args.resume, progress=args.progress, **extra)
    if os.environ.get("RANK", "0") == "0":  # one line per run, not per torchrun worker
        print(f"run directory: {run_dir}")
    return 0


def check_backend(name: str) -> None:
    """Start the executor now, so a missing PyCUDA or GPU is one error line naming the fix, not a traceback
    from deep inside the trainer."""
    from warp_drive.runtime.backends import get_backend  # deferred: the executors bring torch; only training needs them

    try:
        get_backend(name)
    except RuntimeError as exc:  # the backend's message says what is missing and how to get it
        fix = " The pycuda backend needs an NVIDIA GPU and pip install 'warp_drive[cuda]'." if name == "pycuda" else ""
        raise RunError(f"backend {name!r} is unavailable: {exc}{fix}") from None


def resume_config(args: argparse.Namespace):
    """The config of ``train --resume``: the run's own ``config.yaml`` plus the allowed ``--set`` values.

    Also resolves ``args.resume`` to the run's absolute path (so --nproc workers
    all find the same run). Refused, naming both values: a ``--config`` other
    than the one the run was started from, a ``--backend`` other than its
    backend, and ``--set`` of a key outside ``RESUMABLE_KEYS``.
    """
    if args.auto_scale:
        raise ConfigError("--auto-scale chooses the sizes of a new run; a resumed run keeps its own "
                          "(drop --auto-scale or --resume)")
    for item in args.overrides:
        key = item.partition("=")[0].strip()
        if key not in RESUMABLE_KEYS:
            raise ConfigError(f"--set {item}: {key} cannot change when resuming (the run keeps the values in its "
                              f"config.yaml); keys that may: {', '.join(RESUMABLE_KEYS)}")
    # The config's name and basedir say which run to look for; the other values come from the run itself
    # (so trainer.total_steps is checked against the run's num_envs, not the shipped config's).
    where = [item for item in args.overrides if item.partition("=")[0].strip() == "saving.basedir"]
    requested = load_config(args.config, where)
    run_dir = resolve_run_dir(args.resume, requested.saving.basedir, name=requested.name)
    saved = read_yaml_file(run_dir / "config.yaml", RUN_CONFIG_FIX)
    if not isinstance(saved, dict):
        raise ConfigError(f"{run_dir / 'config.yaml'}: not a run config (the top level must be a mapping)")
    if saved.get("name") != requested.name:
        raise ConfigError(f"--config {args.config} (name {requested.name!r}) conflicts with the run {run_dir}, "
                          f"which was started from config {saved.get('name')!r}; resume it with --config "
                          f"{saved.get('name')} or pick a run of {requested.name!r}")
    saved_backend = str((saved.get("trainer") or {}).get("backend", "auto")).lower()
    if args.backend is not None and args.backend != saved_backend:
        raise ConfigError(f"--backend {args.backend} conflicts with the run {run_dir}, which trains on backend "
                          f"{saved_backend!r} (trainer.backend in its config.yaml); drop --backend to resume it")
    args.resume = str(run_dir.resolve())
    return RunConfig.from_dict(apply_overrides(saved, args.overrides), source=str(run_dir / "config.yaml"))


def auto_scale_sizes(args: argparse.Namespace, config) -> list[str]:
    """Run the auto-scaler for ``train --auto-scale``; return its ``--set`` overrides."""
    if args.resume is not None:
        raise ConfigError("--auto-scale chooses the sizes of a new run; a resumed run keeps its own "
                          "(drop --auto-scale or --resume)")
    if "WORLD_SIZE" in os.environ:
        raise ConfigError("--auto-scale under torchrun would search once per process; use "
                          "'warp-drive train --auto-scale --nproc N', or run the search once and pass its "
                          "overrides with --set")
    result = auto_scale(config, args.memory_budget, args.max_envs, processes=args.nproc or 1,
                        log=lambda line: print(line, flush=True))
    return result.overrides


def launch_workers(args: argparse.Namespace) -> int:
    """Re-run this ``train`` command as ``args.nproc`` workers under torch's launcher; return its exit status.

    torchrun's elastic agent owns the workers: ``--standalone`` starts a local
    rendezvous on a free port, and when any worker fails the agent stops the
    others and exits non-zero with that worker's error (its traceback is on
    stderr). This process only has to make sure nothing outlives it: see
    :func:`supervise` (signals) and :func:`die_with_parent` (a killed agent).
    """
    import subprocess

    argv = ["train", "--config", args.config]
    if args.overrides:
        argv += ["--set", *args.overrides]
    if args.backend is not None:
        argv += ["--backend", args.backend]
    if args.resume is not None:
        argv += ["--resume", args.resume]
    if args.results_dir is not None:
        argv += ["--results_dir", args.results_dir]
    if not args.progress:
        argv.append("--no-progress")
    if args.track:
        argv.append("--track")
    for spec in args.callbacks:
        argv += ["--callback", spec]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(args.nproc),
               "-m", "warp_drive", *argv]
    child = subprocess.Popen(command, start_new_session=True, preexec_fn=die_with_parent)
    return supervise(child)


def supervise(child, grace: float = STOP_GRACE_S) -> int:
    """Wait for torchrun; pass SIGINT/SIGTERM/SIGHUP on to its process group; return its exit status.

    torchrun runs in its own session, so a terminal's Ctrl-C reaches it only
    through us, once; before this, a SIGTERM ended this launcher alone while
    torchrun and its workers trained on. torchrun answers a signal by stopping
    its workers; if it has not exited ``grace`` seconds later, its group is
    SIGKILLed (the workers, in sessions of their own, die with it through
    :func:`die_with_parent`). A signal ends us with ``128 + signum``.
    """
    import subprocess
    import time

    received: list[int] = []
    deadline = None

    def forward(signum, frame):
        received.append(signum)
        _signal_group(child.pid, signum)

    previous = {s: signal.signal(s, forward) for s in FORWARDED_SIGNALS}
    try:
        while True:
            try:
                code = child.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                pass
            if received and deadline is None:
                deadline = time.monotonic() + grace
            elif deadline is not None and time.monotonic() > deadline:
                _signal_group(child.pid, signal.SIGKILL)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    _signal_group(child.pid, signal.SIGKILL)  # anything left in torchrun's group once it is gone
    if received:
        return 128 + received[0]
    return code if code >= 0 else 128 - code


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def die_with_parent(signum: int = signal.SIGTERM) -> None:
    """Ask Linux to send this process ``signum`` when its parent dies (``prctl(PR_SET_PDEATHSIG)``).

    Called in torchrun (by the launcher, before exec) and in every worker at
    startup: workers run in sessions of their own, so a SIGKILLed torchrun
    agent, which cannot stop them, used to leave them training as orphans.
    A no-op where prctl is unavailable (not Linux).
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    except (OSError, AttributeError):
        return


def cmd_evaluate(args: argparse.Namespace) -> int:
    from warp_drive.training import run  # deferred: the training stack, for the commands that train

    if args.backend is not None:
        check_backend(args.backend)
    if args.random is not None:
        if args.run_dir or args.json or args.sample:
            raise ConfigError("--random CONFIG evaluates uniformly random actions in that config's env: give no "
                              "RUN_DIR, --json or --sample with it")
        config = load_config(args.random)
        check_env(config)  # a misspelt env name or constructor argument: one line, before any compile
        result = run.evaluate_random(config, args.episodes, args.render, backend=args.backend)
        print_evaluation(result, args.episodes, "uniformly random legal actions")
        return 0
    if not args.run_dir:
        raise ConfigError("give a RUN_DIR (or 'latest'), or --random CONFIG for the random baseline")
    if len(args.run_dir) > 1 or args.json:
        if args.render:
            raise ConfigError("--render draws one run's episode: give one RUN_DIR")
        return evaluate_runs(args, [run.evaluate(d, args.episodes, None, greedy=not args.sample,
                                                 backend=args.backend) for d in args.run_dir])
    result = run.evaluate(args.run_dir[0], args.episodes, args.render, greedy=not args.sample, backend=args.backend)
    print_evaluation(result, args.episodes, "sampled actions" if args.sample else "greedy actions")
    return 0


def print_evaluation(result: dict, episodes: int, mode: str) -> None:
    """The single-run table of ``evaluate`` (and of ``evaluate --random``): per policy the episodes' return per
    agent (mean ± std, min, max) and beside it the team return (the policy's agents summed, mean ± std)."""
    length = result.get("mean_length")
    print(f"{result.get('episodes', episodes)} episodes ({mode})"
          + (f", mean episode length {length:.1f} steps" if length is not None else ""))
    stats = result.get("returns") or {tag: {"mean": value} for tag, value in result.get("mean_return", {}).items()}
    if not stats:
        return
    team = result.get("team") or {}
    cells = {}
    for tag, s in stats.items():
        cells[tag] = f"{s['mean']:.3f} ± {s['std']:.3f}  (min {s['min']:.3f}, max {s['max']:.3f})" \
            if "std" in s else f"{s['mean']:.3f}"
    width = max(len("policy"), *(len(tag) for tag in stats))
    column = max(len("return per agent"), *(len(c) for c in cells.values()))
    print(f"{'policy':<{width}}  {'return per agent':<{column}}" + ("  team return (agents summed)" if team else ""))
    for tag, cell in cells.items():
        t = team.get(tag)
        extra = f"  {t['mean']:.3f} ± {t['std']:.3f}  ({t['agents']} agent{'s' if t['agents'] != 1 else ''})" \
            if t else ""
        print(f"{tag:<{width}}  {cell:<{column}}{extra}".rstrip())
    if result.get("gif"):
        print(f"episode GIF: {result['gif']}")


def evaluate_runs(args: argparse.Namespace, results: list[dict]) -> int:
    """Several runs of one config (seeds): the team return's IQM and 95% bootstrap CI per policy; --json."""
    names = [str(r["config"].name) for r in results]
    if len(set(names)) != 1:
        raise ConfigError(f"evaluate compares runs of one config; got {sorted(set(names))}")
    mode = "sampled" if args.sample else "greedy"
    print(f"{len(results)} run(s) x {args.episodes} episodes ({mode} actions): team return (the policy's agents "
          f"summed), IQM [95% bootstrap CI over runs], mean")
    data: dict = {}
    for tag in results[0]["team_returns"]:
        runs = {f"run_{i}": r["team_returns"][tag] for i, r in enumerate(results)}
        s = evaluation.summarize(runs)
        print(f"  {tag}: {s['iqm']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}], mean {s['mean']:.3f}")
        config = results[0]["config"]
        # marl-eval compares algorithms within a task: the task is the policy and the env's settings, the
        # algorithm the config (simple_spread_ippo and simple_spread_mappo then meet in one task).
        settings = ",".join(f"{k}={v}" for k, v in sorted(config.env.config.items()))
        task = f"{tag}[{settings}]" if settings else tag
        block = evaluation.marl_eval_json(config.env.name, task, config.name, runs,
                                          step_count=max(r["env_steps"] for r in results))
        data.setdefault(config.env.name, {}).update(block[config.env.name])
    if args.json:
        print(f"marl-eval JSON: {evaluation.write_marl_eval_json(args.json, data)}")
    return 0


def _describe(name: str) -> tuple[str, str, str, str]:
    """(env, policies, steps, first comment line) of a shipped config, for the listing."""
    path = CONFIG_DIR / f"{name}.yaml"
    text = path.read_text(encoding="utf-8")
    summary = next((line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")), "")
    try:
        config = load_config(path)
    except ConfigError:
        raw = parse_yaml(text) or {}
        return str(raw.get("env", {}).get("name", "?")), "?", "?", f"(invalid) {summary}"
    policies = ",".join(f"{tag}:{p.algorithm}" for tag, p in config.policy.items())
    return config.env.name, policies, f"{config.trainer.total_steps:,}", summary


def cmd_configs(args: argparse.Namespace) -> int:
    rows = [("NAME", "ENV", "POLICIES", "ENV STEPS", "DESCRIPTION")]
    rows += [(name, *_describe(name)) for name in available_configs()]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(w) if i != 3 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
              + "  " + row[4])
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from warp_drive.env import env_check  # deferred: the executors bring torch; only check needs them

    env_vars.check_all()
    names, config = list(args.envs), {}
    if args.config:
        loaded = load_config(args.config, args.overrides)
        if names and names != [loaded.env.name]:
            raise ConfigError(f"check {' '.join(names)} --config {args.config}: the config's env is "
                              f"{loaded.env.name!r}; give the config or the env names, not both")
        names, config = [loaded.env.name], dict(loaded.env.config)
    elif args.overrides:
        outside = [item for item in args.overrides if not item.startswith("env.config.")]
        if outside:
            raise ConfigError(f"--set {outside[0]}: without --config, check takes env.config.KEY=VALUE only")
        config = apply_overrides({"env": {"config": {}}}, args.overrides)["env"]["config"]
    if not names:
        raise ConfigError("check: give an ENV (a registered name or package.module:Class) or --config")
    unknown = sorted(set(args.only + args.skip) - set(env_check.CHECKS))
    if unknown:
        raise ConfigError(f"check: no check named {', '.join(unknown)} (checks: {', '.join(env_check.CHECKS)})")
    checks = [c for c in env_check.CHECKS if (not args.only or c in args.only) and c not in args.skip]
    return env_check.main(names, config, args.num_envs, args.steps, checks, timeout=args.timeout)


def cmd_new(args: argparse.Namespace) -> int:
    try:
        root = scaffold(args.name, args.parent)
    except ScaffoldError as exc:
        raise ConfigError(str(exc)) from None
    names = names_for(args.name)
    spec = f"{names['package']}.{names['package']}:{names['class_name']}"
    print(f"wrote {root}/ ({', '.join(sorted(str(p.relative_to(root)) for p in root.rglob('*') if p.is_file()))})")
    print(f"next, in {root}:\n  warp-drive check {spec}\n  warp-drive train --config {names['package']}.yaml")
    return 0


def cmd_envs(args: argparse.Namespace) -> int:
    if args.describe is not None:
        print(describe_env(args.describe))
        return 0
    for name in registered_envs():
        print(name)
    return 0


def describe_env(name: str) -> str:
    """``warp-drive envs --describe``: the env's parameter table and any constructor keywords beside it."""
    env_class = get_env_class(name)
    lines = [f"{env_class.__name__} ({env_class.__module__}): the keys of env.config"]
    lines.append(env_class.describe())
    table = {p.name for p in env_class.parameters}
    others = [key for key in env_class.config_keys() if key not in table]
    if env_class.parameters and others:
        lines.append(f"constructor keywords beside the table: {', '.join(others)}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- entry point
def setup_logging() -> None:
    """The ``warp_drive`` logger's diagnostics (warnings, the auto-scaler's and loaders' notes) to stderr,
    unless the program already configured it."""
    import logging

    logger = logging.getLogger("warp_drive")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("warp-drive: %(levelname)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (0 ok, 2 bad usage or config, 130 interrupted)."""
    parser = build_parser()
    setup_logging()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors: return the status instead of exiting
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        if args.command in ("train", "evaluate"):
            env_vars.check_all()  # a WARP_DRIVE_* variable that does not parse: one line now, not mid-run
        return args.handler(args)
    except Exception as exc:
        if args.debug:
            raise
        return report_failure(args.command, exc)
    except KeyboardInterrupt:
        print(f"warp-drive {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


# What to do about an OSError, by errno: the one-line message's fix.
OS_ERROR_FIXES = {
    errno.ENOSPC: "free space on that disk, or point saving.basedir at another",
    errno.EACCES: "make it writable for you, or point saving.basedir elsewhere",
    errno.EROFS: "the filesystem is read-only: point saving.basedir at a writable one",
    errno.ENOTDIR: "a file stands where a directory is needed: move it, or choose another saving.basedir",
    errno.EDQUOT: "your disk quota is used up: free some, or point saving.basedir elsewhere",
}


def report_failure(command: str, exc: Exception) -> int:
    """Print a failure as one line naming its cause and its fix (``--debug`` shows the traceback instead);
    returns the exit status. Exceptions nobody anticipated propagate: their traceback is the report."""
    if isinstance(exc, (ConfigError, env_vars.EnvVarError)):
        print(f"warp-drive {command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(exc, FileNotFoundError):  # a run directory or checkpoint that is not there
        print(f"warp-drive {command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(exc, RunError):  # a run directory in use, an unsafe or unreadable checkpoint, a full disk
        print(f"warp-drive {command}: error: {exc}", file=sys.stderr)
        return EXIT_RUN_ERROR
    kernels = sys.modules.get("warp_drive.runtime.backends.errors")  # loaded by whatever raised one of its errors
    if refused_setup(exc) or isinstance(exc, EnvLookupError) or (
            kernels is not None and isinstance(exc, kernels.KernelBuildError)):
        # The user's env, kernel or policies refused at construction (run.build marks those), an env name that
        # leads nowhere, a kernel that does not build: the user's input is wrong, and its message says how.
        print(f"warp-drive {command}: error: {one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    if kernels is not None and isinstance(exc, kernels.KernelLaunchError):  # a kernel that failed mid-run
        print(f"warp-drive {command}: error: {one_line(exc)}", file=sys.stderr)
        return EXIT_RUN_ERROR
    if isinstance(exc, ScaleError):  # --auto-scale found nothing that fits, or a probe hit a bug
        print(f"warp-drive {command}: auto-scale: {exc}", file=sys.stderr)
        return 1
    if isinstance(exc, FloatingPointError):  # NonFiniteError: a NaN or inf in a rollout or an update
        print(f"warp-drive {command}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_RUN_ERROR
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        fix = OS_ERROR_FIXES.get(exc.errno, "see --debug for where it happened")
        print(f"warp-drive {command}: error: {exc.strerror or exc}{where}: {fix}", file=sys.stderr)
        return EXIT_RUN_ERROR
    if isinstance(exc, MemoryError):
        print(f"warp-drive {command}: error: out of memory: use fewer envs (trainer.num_envs) or a shorter "
              f"env.config.episode_length", file=sys.stderr)
        return EXIT_RUN_ERROR
    raise exc


def one_line(exc: BaseException) -> str:
    """An error's message on one line: a build error's first line and the compiler's first error
    (``KernelBuildError.one_line``), anything else with its line breaks squashed (a KeyError's unquoted)."""
    if callable(getattr(exc, "one_line", None)):
        return exc.one_line()
    text = exc.args[0] if isinstance(exc, KeyError) and len(exc.args) == 1 else exc
    return " ".join(str(text).split())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
