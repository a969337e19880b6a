"""The Python backend: a `torch.autograd.Function` module and its pytest test."""

from symgrad.backends.base import Backend
from symgrad.backends.python import options, render

BACKEND = Backend(
    name="python",
    description="torch.autograd.Function module <module>.py and its test test_<module>.py",
    render=render.render,
    render_options=options.render_options,
)
