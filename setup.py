"""Packaging for warp_drive.

Runtime requirements live in requirements.txt; the optional extras are listed
here (``cuda`` for the PyCUDA executor, ``dev`` for tests, notebooks and demos).
"""

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).resolve().parent


def read_requirements(name="requirements.txt"):
    reqs = []
    for line in (HERE / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            reqs.append(line)
    return reqs


def read_version():
    # warp_drive/__init__.py holds the single version string; parse it rather
    # than importing the package (its dependencies may not be installed yet).
    for line in (HERE / "warp_drive" / "__init__.py").read_text().splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip("\"'")
    raise RuntimeError("__version__ not found in warp_drive/__init__.py")


EXTRAS = {
    "cuda": ["pycuda"],
    "pettingzoo": ["pettingzoo"],
    "lightning": ["lightning>=2.2"],
    "dev": [
        "pytest",
        "pytest-timeout",
        "nbclient",
        "nbformat",
        "ipykernel",
        "pettingzoo",
        "matplotlib",
        "tqdm",
        "lightning>=2.2",
    ],
}

# CUDA C sources and headers (also compiled by the cpu executor with g++), kept
# at any depth under warp_drive/cuda/, plus the training configs.
CUDA_SOURCE_PATTERNS = ["*.h", "*.cuh", "*.hpp", "*.cu", "*.cpp", "*.S"]
PACKAGE_DATA = {
    "warp_drive": [f"cuda/**/{pat}" for pat in CUDA_SOURCE_PATTERNS]
    + ["training/configs/*.yaml"],
    # Each example environment's .cu sits next to its Python class.
    "example_envs": ["**/*.cu", "**/*.h"],
}

long_description = (HERE / "README.md").read_text(encoding="utf-8") if (HERE / "README.md").exists() else ""

setup(
    name="warp_drive",
    version=read_version(),
    description=(
        "End-to-end multi-agent reinforcement learning on a GPU: environment "
        "steps as CUDA C kernels, with a CPU executor for the same sources."
    ),
    long_description=long_description,
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["warp_drive", "warp_drive.*", "example_envs", "example_envs.*"]),
    package_data=PACKAGE_DATA,
    include_package_data=True,
    install_requires=read_requirements(),
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["warp-drive=warp_drive.cli:main"]},
    zip_safe=False,
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: C++",
        "Environment :: GPU :: NVIDIA CUDA",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
