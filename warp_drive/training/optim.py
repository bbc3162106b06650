"""Adam for the trainers (torch's fused Adam step, and no ``torch._dynamo`` import), and a gradient clip.

Why not ``torch.optim.Adam``: its constructor, ``step`` and ``zero_grad``
import ``torch._dynamo`` (their ``torch._disable_dynamo`` /
``_use_grad_for_differentiable`` wrappers do it on first use), which costs
1.5-2 s of every run's start-up on a CPU -- most of a short run's launch ->
first iteration. And on a CPU it steps one parameter at a time unless asked
for ``foreach`` or ``fused``.

:class:`Adam` is a ``torch.optim.Optimizer`` (Lightning, LR schedulers and
checkpoints see an ordinary optimizer, with Adam's state keys ``step``,
``exp_avg``, ``exp_avg_sq``, so state dicts move between it and
``torch.optim.Adam``). Its step is ``torch.optim.Adam(fused=True)``'s: the
step counters advanced by one ``foreach`` add, then one ``torch._fused_adam_``
call over every parameter -- on a CPU 48 us for a 64x64 actor-critic's 12
tensors against 275 us for the ``foreach`` sequence, a sixth of a CartPole
PPO minibatch step. The two agree bit for bit (tested, on a GPU too); for a
device without a fused kernel it falls back to ``torch.optim.Adam(foreach=True)``'s
operation sequence, also bit for bit. No weight decay, AMSGrad or
``maximize``. Only the ``_disable_dynamo`` wrapper is skipped, which matters
only when ``torch.compile`` traces a function that calls the optimizer: the
trainers never do.
"""

from __future__ import annotations

import torch
from torch.optim import Optimizer


def _undecorated(method):
    """The function under torch's ``_disable_dynamo`` wrapper (functools.wraps keeps it as ``__wrapped__``)."""
    return getattr(method, "__wrapped__", method)


# torch.optim.Adam's other keys, at the values this step implements: a state dict of either class loads into the other.
TORCH_ADAM_KEYS = {"weight_decay": 0.0, "amsgrad": False, "maximize": False, "foreach": None, "capturable": False,
                   "differentiable": False, "fused": True, "decoupled_weight_decay": False}
FUSED_DEVICES = ("cpu", "cuda")  # where torch has a _fused_adam_ kernel (floating-point parameters)


class Adam(Optimizer):
    """Adam (Kingma & Ba) with torch's defaults and bias correction; ``lr`` may be changed in ``param_groups``."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        if not lr >= 0.0 or not eps >= 0.0 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"Adam: need lr >= 0, eps >= 0 and 0 <= betas < 1, got lr={lr}, eps={eps}, "
                             f"betas={betas}")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, **TORCH_ADAM_KEYS})

    add_param_group = _undecorated(Optimizer.add_param_group)
    state_dict = _undecorated(Optimizer.state_dict)
    load_state_dict = _undecorated(Optimizer.load_state_dict)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.detach_().zero_()

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            kinds = {(p.device, p.dtype, g.is_sparse) for p, g in zip(params, grads)}
            if any(sparse for _, _, sparse in kinds):
                raise RuntimeError("Adam: sparse gradients are not supported")
            unsupported = {k: group[k] for k in ("weight_decay", "amsgrad", "maximize") if group.get(k, False)}
            if unsupported:  # e.g. a torch.optim.Adam state dict with weight decay, loaded into this one
                raise ValueError(f"Adam: this optimizer implements none of {unsupported}; use torch.optim.Adam")
            (device, dtype, _), *others = kinds
            fused = not others and device.type in FUSED_DEVICES and dtype.is_floating_point
            states = [self.state[p] for p in params]
            if not all(states) or (fused and states[0]["step"].device != device):
                self._init_states(params, states, device if fused else torch.device("cpu"))
            step = self._fused_step if fused else self._foreach_step
            step(params, grads, states, group)
        return loss

    @staticmethod
    def _init_states(params, states, step_device: torch.device) -> None:
        """As torch's Adam: a float32 step counter (on the device for the fused step), zeroed moments; a
        counter saved elsewhere (a foreach-era checkpoint's, on the host) moves to ``step_device``."""
        for p, state in zip(params, states):
            if not state:
                state["step"] = torch.tensor(0.0, dtype=torch.float32, device=step_device)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            elif state["step"].device != step_device:
                state["step"] = state["step"].to(step_device)

    @staticmethod
    def _fused_step(params, grads, states, group) -> None:
        """torch.optim.adam._fused_adam's path for one device and dtype, float learning rate, no grad scaler."""
        beta1, beta2 = group["betas"]
        steps = [s["step"] for s in states]
        torch._foreach_add_(steps, 1)
        torch._fused_adam_(params, grads, [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states], [],
                           steps, lr=group["lr"], beta1=beta1, beta2=beta2, weight_decay=0.0, eps=group["eps"],
                           amsgrad=False, maximize=False)

    @staticmethod
    def _foreach_step(params, grads, states, group) -> None:
        """torch.optim.adam._multi_tensor_adam's float-hyperparameter path, operation for operation."""
        beta1, beta2 = group["betas"]
        lr, eps = group["lr"], group["eps"]
        steps = [s["step"] for s in states]
        exp_avgs = [s["exp_avg"] for s in states]
        exp_avg_sqs = [s["exp_avg_sq"] for s in states]
        if steps[0].is_cpu:
            torch._foreach_add_(steps, torch.tensor(1.0, device="cpu"), alpha=1.0)
        else:
            torch._foreach_add_(steps, 1)
        torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)
        bias_correction1 = [1 - beta1 ** s.item() for s in steps]
        bias_correction2 = [1 - beta2 ** s.item() for s in steps]
        step_size = [(lr / bc) * -1 for bc in bias_correction1]
        bias_correction2_sqrt = [bc ** 0.5 for bc in bias_correction2]
        denom = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_div_(denom, bias_correction2_sqrt)
        torch._foreach_add_(denom, eps)
        torch._foreach_addcdiv_(params, exp_avgs, denom, step_size)
@torch.no_grad()
def clip_grad_norm(params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """``nn.utils.clip_grad_norm_``'s arithmetic (foreach norms, their 2-norm, a scale clamped at 1) on a
    list of parameters that share a device and dtype, without its per-call grouping and generator walks:
    a sixth of a small model's minibatch step on a CPU. Returns the total norm before clipping."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.zeros(())
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
    torch._foreach_mul_(grads, torch.clamp(float(max_norm) / (total + 1e-6), max=1.0))
    return total


