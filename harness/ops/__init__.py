"""Operators: the contract (base.py), the catalogue (registry.py), shapes per level (shapes.py)
and the built-in ops, one module each (their modules import torch and Triton: only the op
process loads them)."""
