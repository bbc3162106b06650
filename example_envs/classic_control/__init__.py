"""Gymnasium's five classic-control environments, one thread per environment replica.

CartPole, Acrobot, MountainCar, ContinuousMountainCar and Pendulum follow
Gymnasium's dynamics, rewards, termination and time limits; see ``base.py``
for the layout they share.
"""

from .acrobot import Acrobot
from .cartpole import CartPole
from .continuous_mountain_car import ContinuousMountainCar
from .mountain_car import MountainCar
from .pendulum import Pendulum

__all__ = ["Acrobot", "CartPole", "ContinuousMountainCar", "MountainCar", "Pendulum"]
