"""The C++ backend: a LibTorch torch::autograd::Function, its loader and its test."""

from symgrad.backends.base import Backend
from symgrad.backends.cpp import options, render

BACKEND = Backend(
    name="cpp",
    description="LibTorch torch::autograd::Function <module>.cpp, registered as an operator;"
    " its loader <module>.py and test test_<module>.py",
    render=render.render,
    render_options=options.render_options,
)
