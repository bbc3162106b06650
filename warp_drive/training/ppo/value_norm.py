"""Value normalisation (MAPPO's): the critic learns returns on a running scale."""

from __future__ import annotations

import torch


class ValueNormalizer(torch.nn.Module):
    """Running mean and variance of the returns a critic learns (MAPPO's value normalisation).

    The critic predicts ``(return - mean) / std``: the value loss keeps one
    scale whatever the rewards' (a Pendulum return of -1,000 and a CartPole
    one of 500 alike). The statistics merge batch by batch exactly (Chan et
    al.) in float64 buffers, which a checkpoint holds and data-parallel ranks
    average (``Distributed.average_buffers``) so every rank normalises alike.
    """

    def __init__(self, eps: float = 1e-5):
        super().__init__()
        self.eps = float(eps)
        self.register_buffer("mean", torch.zeros((), dtype=torch.float64))
        self.register_buffer("var", torch.ones((), dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def update(self, returns: torch.Tensor) -> None:
        x = returns.reshape(-1).to(torch.float64)
        n = x.numel()
        if n == 0:
            return
        delta, total = x.mean() - self.mean, self.count + n
        m2 = self.var * self.count + x.var(unbiased=False) * n + delta.square() * self.count * n / total
        self.mean.add_(delta * n / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def _std(self) -> torch.Tensor:
        return torch.sqrt(self.var + self.eps)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        return ((x - self.mean) / self._std()).to(x.dtype)

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        return (x * self._std() + self.mean).to(x.dtype)
