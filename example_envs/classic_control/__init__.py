"""Gymnasium's five classic-control environments, one thread per environment replica.

CartPole, Acrobot, MountainCar, ContinuousMountainCar and Pendulum follow
Gymnasium's dynamics, rewards, termination and time limits; see ``base.py``
for the layout they share.
"""

from example_envs.classic_control.acrobot import Acrobot
from example_envs.classic_control.cartpole import CartPole
from example_envs.classic_control.continuous_mountain_car import ContinuousMountainCar
from example_envs.classic_control.mountain_car import MountainCar
from example_envs.classic_control.pendulum import Pendulum

__all__ = ["Acrobot", "CartPole", "ContinuousMountainCar", "MountainCar", "Pendulum"]
