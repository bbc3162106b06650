"""Start-up: the trainers' Adam (torch's arithmetic without the torch._dynamo import) and the launch clock
behind the summary's "first iteration N s after launch"."""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from warp_drive.runtime.launch_clock import seconds_since_launch
from warp_drive.training.optim import Adam


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))


def _train(model: torch.nn.Module, optimizer, steps: int, lrs=None) -> None:
    x = torch.randn(128, 6, generator=torch.Generator().manual_seed(1)).to(next(model.parameters()).device)
    for i in range(steps):
        if lrs is not None:
            for group in optimizer.param_groups:
                group["lr"] = lrs[i]
        optimizer.zero_grad()
        model(x).sin().pow(2).mean().backward()
        optimizer.step()


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_adam_matches_torch_fused_adam_bit_for_bit(device):
    ours, theirs = _model().to(device), _model().to(device)
    lrs = [3e-3 * (1 - i / 20) for i in range(12)]  # an annealed learning rate, as the trainers set it
    optimizer = Adam(ours.parameters(), lr=3e-3, eps=1e-5)
    _train(ours, optimizer, 12, lrs)
    _train(theirs, torch.optim.Adam(theirs.parameters(), lr=3e-3, eps=1e-5, fused=True), 12, lrs)
    for a, b in zip(ours.parameters(), theirs.parameters()):
        assert torch.equal(a, b)
    assert {str(state["step"].device) for state in optimizer.state.values()} == {str(next(ours.parameters()).device)}


def test_adam_falls_back_to_torch_foreach_adam_where_no_fused_step_applies():
    """A group mixing dtypes has no single fused call: the foreach sequence, bit for bit torch's foreach Adam."""
    ours, theirs = _model().double(), _model().double()
    for model in (ours, theirs):
        model[2].float()
    x = torch.randn(128, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for model, optimizer in ((ours, Adam(ours.parameters(), lr=3e-3)),
                             (theirs, torch.optim.Adam(theirs.parameters(), lr=3e-3, foreach=True))):
        for _ in range(5):
            optimizer.zero_grad()
            model[2](model[1](model[0](x)).float()).sin().pow(2).mean().backward()
            optimizer.step()
    for a, b in zip(ours.parameters(), theirs.parameters()):
        assert torch.equal(a, b)


def test_adam_stays_within_rounding_of_torch_foreach_adam():
    ours, theirs = _model(), _model()
    _train(ours, Adam(ours.parameters(), lr=3e-3, eps=1e-5), 12)
    _train(theirs, torch.optim.Adam(theirs.parameters(), lr=3e-3, eps=1e-5, foreach=True), 12)
    for a, b in zip(ours.parameters(), theirs.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_adam_state_moves_to_and_from_torch_adam():
    ours, theirs = _model(), _model()
    ours_opt = Adam(ours.parameters(), lr=1e-3)
    _train(ours, ours_opt, 3)
    theirs.load_state_dict(ours.state_dict())
    theirs_opt = torch.optim.Adam(theirs.parameters(), lr=1e-3)
    theirs_opt.load_state_dict(copy.deepcopy(ours_opt.state_dict()))  # a checkpoint of ours, resumed by torch's
    _train(ours, ours_opt, 4)
    _train(theirs, theirs_opt, 4)
    for a, b in zip(ours.parameters(), theirs.parameters()):
        assert torch.equal(a, b)
    back = Adam(_model().parameters(), lr=1e-3)
    back.load_state_dict(theirs_opt.state_dict())
    assert back.state[next(iter(back.state))]["step"].item() == 7.0


def test_adam_refuses_a_loaded_state_it_cannot_follow():
    model = _model()
    theirs = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=0.01)
    _train(model, theirs, 1)
    ours = Adam(model.parameters(), lr=1e-3)
    ours.load_state_dict(theirs.state_dict())
    with pytest.raises(ValueError, match="weight_decay"):
        _train(model, ours, 1)


def test_adam_refuses_bad_hyperparameters():
    with pytest.raises(ValueError, match="lr >= 0"):
        Adam(_model().parameters(), lr=-1.0)
    with pytest.raises(ValueError, match="betas"):
        Adam(_model().parameters(), betas=(0.9, 1.0))


@pytest.mark.slow  # a child process (over ~1.5 s: the full suite, not the fast tier)
def test_training_never_imports_torch_dynamo():
    """torch.optim.Adam imports torch._dynamo (1.5-2 s of a CPU run's start): the build, the first
    iterations and a checkpoint's state must not. A torch upgrade that brings the import back fails here."""
    script = textwrap.dedent("""
        import sys
        from warp_drive.training.config import load_config
        from warp_drive.training.run import build
        for name in ("cartpole", "pendulum_ddpg"):
            trainer = build(load_config(name, ["trainer.backend=cpu", "trainer.num_envs=4"]))
            trainer.iterate()
            trainer.iterate()
            trainer.state_dict()
        print("torch._dynamo" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_the_launch_clock_counts_from_the_process_start():
    out = subprocess.run([sys.executable, "-c", "import time; time.sleep(0.4)\n"
                          "from warp_drive.runtime.launch_clock import seconds_since_launch as s; print(s())"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert 0.4 <= float(out.stdout) < 30.0  # the sleep before the import counts: the clock is the process's
    before = seconds_since_launch()
    time.sleep(0.05)
    assert seconds_since_launch() - before >= 0.04


@pytest.mark.parametrize("setting, expected", [(None, 1), ("2", 2)])
def test_update_threads_follow_warp_drive_torch_update_threads(monkeypatch, setting, expected):
    """On the cpu executor torch keeps one thread, but $WARP_DRIVE_TORCH_UPDATE_THREADS gives the update
    its own count (restored afterwards)."""
    from warp_drive.training.config import load_config
    from warp_drive.training.run import build

    if setting is None:
        monkeypatch.delenv("WARP_DRIVE_TORCH_UPDATE_THREADS", raising=False)
    else:
        monkeypatch.setenv("WARP_DRIVE_TORCH_UPDATE_THREADS", setting)
    trainer = build(load_config("cartpole", ["trainer.backend=cpu", "trainer.num_envs=4", "trainer.rollout_length=8",
                                             "trainer.total_steps=64"]))
    before, seen = torch.get_num_threads(), []
    update = trainer.algorithm.update
    monkeypatch.setattr(trainer.algorithm, "update", lambda *a: (seen.append(torch.get_num_threads()), update(*a))[1])
    trainer.iterate()
    assert seen == [expected] and torch.get_num_threads() == before
