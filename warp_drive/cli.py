"""Command line: ``warp-drive`` (or ``python -m warp_drive``).

    warp-drive train --config tag_continuous_small
    warp-drive train --config cartpole --set trainer.num_envs=64 policy.shared.lr=1e-3 --backend cpu
    warp-drive train --config cartpole --resume latest
    warp-drive train --config cartpole --auto-scale --memory-budget 2GiB
    warp-drive evaluate runs/cartpole/experiment/20250101-120000 --episodes 20
    warp-drive configs
    warp-drive envs

Configuration mistakes (unknown keys, wrong types, a misspelt env name, env
constructor arguments the env rejects) end with a message and exit status 2,
before anything is compiled; a traceback means a bug, not a typo. The training
modules (torch and the executors) are imported only by the commands that need
them, so ``--help``, ``configs`` and ``envs`` answer at once.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from warp_drive import __version__
from warp_drive.training.autoscale import ScaleError, auto_scale
from warp_drive.training.config import (
    BACKENDS,
    CONFIG_DIR,
    ConfigError,
    available_configs,
    check_env,
    load_config,
    parse_yaml,
)

EXIT_USAGE = 2  # argparse's status for a bad command line; used for bad configs too
EXIT_INTERRUPTED = 130

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

--auto-scale first finds the largest trainer.num_envs (up to --max-envs, and to
total_steps / rollout_length), then the fewest num_minibatches of each trained
PPO policy, that fit the memory budget of one training process: GPU memory on a
GPU (default 90% of it), resident host memory on the cpu executor (default half
of what is available, shared by the --nproc processes). Each size is tried in a
child process (a few training iterations), logged with its peak memory and env
steps/s; training then runs with the chosen sizes.

--set KEY=VALUE takes a dotted key path into the config and a YAML value
(200, 3e-4, true, null, [64, 64], {type: linear, start: 1e-3, end: 0}).
The key must exist in the config schema, except below env.config and
model.extra; policy.*.KEY sets KEY in every policy. Give --set once with
several pairs or repeat it; later values win, and --backend wins over both.
"""

EVALUATE_EPILOG = """\
examples:
  warp-drive evaluate runs/cartpole/experiment/20250101-120000
  warp-drive evaluate latest --episodes 50 --sample
  warp-drive evaluate runs/tag_continuous_small/experiment/20250101-120000 --render tag.gif

Actions are the policy's most likely ones unless --sample is given.
--render writes a GIF of one episode (Tag environments).
"""

CONFIGS_EPILOG = f"""\
Shipped configs live in {CONFIG_DIR}.
Train one by name (warp-drive train --config NAME), or copy it, edit it and
pass its path.
"""

ENVS_EPILOG = """\
Built-in environments, those registered with warp_drive.register_env in this
process, and those installed through the 'warp_drive.envs' entry-point group.
Use a name as env.name in a config.
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
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    formatter = argparse.RawDescriptionHelpFormatter

    train = commands.add_parser(
        "train", help="train policies from a run config", formatter_class=formatter, epilog=TRAIN_EPILOG,
        description="Validate a run config, train its policies, and print the run directory "
        "(config.yaml, metrics.csv, TensorBoard events, checkpoints/).",
    )
    train.add_argument("--config", "-c", required=True, metavar="NAME_OR_PATH",
                       help="a shipped config's name (see 'warp-drive configs') or a YAML file")
    train.add_argument("--set", dest="overrides", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                       help="override config values, e.g. trainer.num_envs=200 policy.tagger.lr=3e-4")
    train.add_argument("--backend", choices=BACKENDS, default=None,
                       help="executor for the env kernels (sets trainer.backend; default: the config's)")
    train.add_argument("--resume", metavar="RUN_DIR|latest", default=None,
                       help="continue a run from its latest checkpoint ('latest': the newest run under "
                       "saving.basedir)")
    train.add_argument("--no-progress", dest="progress", action="store_false",
                       help="no progress bar (for logs and CI)")
    train.add_argument("--nproc", type=_positive_int, default=None, metavar="N",
                       help="data-parallel training with N processes on this machine (via torchrun)")
    train.add_argument("--auto-scale", action="store_true",
                       help="first find the largest num_envs, then the largest PPO minibatch, that fit the memory "
                       "budget (each tried in a child process), and train with them")
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
    evaluate.add_argument("run_dir", metavar="RUN_DIR", help="a run directory, or 'latest'")
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
    envs.set_defaults(handler=cmd_envs)
    return parser


# --------------------------------------------------------------------------- commands
def cmd_train(args: argparse.Namespace) -> int:
    overrides = list(args.overrides)
    if args.backend is not None:
        overrides.append(f"trainer.backend={args.backend}")
    config = load_config(args.config, overrides)
    check_env(config)  # a misspelt env name or constructor argument fails here, before any compile
    if args.auto_scale:
        chosen = auto_scale_sizes(args, config)
        args.overrides = [*args.overrides, *chosen]  # after the user's, so they win; --nproc workers get them too
        config = load_config(args.config, [*overrides, *chosen])
    elif args.memory_budget is not None or args.max_envs is not None:
        raise ConfigError("--memory-budget and --max-envs only apply with --auto-scale")
    if args.nproc is not None:
        return launch_workers(args)

    from warp_drive.training import run  # torch, executors: only now

    run_dir = run.train(config, resume=args.resume, progress=args.progress)
    if os.environ.get("RANK", "0") == "0":  # one line per run, not per torchrun worker
        print(f"run directory: {run_dir}")
    return 0


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

    torchrun's elastic agent owns the processes: ``--standalone`` starts a local
    rendezvous on a free port, and when any worker fails the agent stops the
    others and exits non-zero with that worker's error (its traceback is on
    stderr). We add no process management of our own.
    """
    import subprocess

    argv = ["train", "--config", args.config]
    if args.overrides:
        argv += ["--set", *args.overrides]
    if args.backend is not None:
        argv += ["--backend", args.backend]
    if args.resume is not None:
        argv += ["--resume", args.resume]
    if not args.progress:
        argv.append("--no-progress")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(args.nproc),
               "-m", "warp_drive", *argv]
    return subprocess.run(command).returncode


def cmd_evaluate(args: argparse.Namespace) -> int:
    from warp_drive.training import run

    result = run.evaluate(args.run_dir, args.episodes, args.render, greedy=not args.sample, backend=args.backend)
    returns = result.get("mean_return", {})
    mode = "sampled" if args.sample else "greedy"
    print(f"{result.get('episodes', args.episodes)} episodes ({mode} actions)")
    if returns:
        width = max(len("policy"), *(len(tag) for tag in returns))
        print(f"{'policy':<{width}}  mean return")
        for tag, value in returns.items():
            print(f"{tag:<{width}}  {value:>11.3f}")
    if result.get("gif"):
        print(f"episode GIF: {result['gif']}")
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


def cmd_envs(args: argparse.Namespace) -> int:
    from warp_drive.registry import registered_envs

    for name in registered_envs():
        print(name)
    return 0


# --------------------------------------------------------------------------- entry point
def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (0 ok, 2 bad usage or config, 130 interrupted)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors: return the status instead of exiting
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return args.handler(args)
    except ConfigError as exc:
        print(f"warp-drive {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except FileNotFoundError as exc:  # a run directory or checkpoint that is not there
        print(f"warp-drive {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ScaleError as exc:  # --auto-scale found nothing that fits, or a probe hit a bug
        print(f"warp-drive {args.command}: auto-scale: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"warp-drive {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
