"""Example environments: each a Python class with a NumPy reference plus one CUDA C step kernel."""
