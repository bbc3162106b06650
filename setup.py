"""A shim for tools that still run ``setup.py``: every piece of metadata lives in
pyproject.toml (PEP 621), which setuptools reads when ``setup()`` gets no arguments."""

from setuptools import setup

setup()
