"""Continuous Tag: taggers chase runners on a square (class + CUDA C step kernel)."""

from .tag_continuous import TagContinuous

__all__ = ["TagContinuous"]
