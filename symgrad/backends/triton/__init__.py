"""Triton kernels for `mode: fused` in the Python target, from the C++ loops' forms."""
