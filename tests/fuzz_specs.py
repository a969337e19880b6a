"""Random specs and their oracle: the same formula run op by op by torch and autograd.

`random_case(seed)` draws a spec deterministically: 1-3 tensor inputs of broadcast-
compatible shapes (size-1 dims, different ranks, 0-d), a number input, `where:` values
reused several times, nested reductions (amax and amin too) with random dims and
keepdim, max/min along a dim and gathers at argmax/argmin, softmax, scans and sort along
a dim, views (unsqueeze, reshape, chunk, cat), kinks and conditions, patterns whose
terms sympy cancels (`a + x - a`, `a * x / a`, `x - x`), and 1-3 outputs (some not
differentiable). Each expression is a small tree that prints itself in the spec language
and evaluates itself with torch, so the oracle is written independently of symgrad.
`check_case` generates the Function and compares the shapes and values of the outputs, a
vjp with cotangents on every output (a None gradient where autograd gives a tensor
fails), a jvp, gradcheck and gradgradcheck with the oracle; it returns None or the first
failure.
"""

from __future__ import annotations

import random
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as nnf

import symgrad

Env = dict[str, Any]
Shape = tuple[int, ...]


@dataclass(frozen=True)
class Node:
    """An expression: its spec text, its torch evaluation and its shape."""

    text: str
    run: Callable[[Env], Any]
    shape: Shape
    # Whether it reads a tensor input (reductions and outputs need one).
    tensor: bool = True


def _broadcast(*shapes: Shape) -> Shape:
    return tuple(torch.broadcast_shapes(*shapes))


def _broadcastable(*shapes: Shape) -> bool:
    try:
        torch.broadcast_shapes(*shapes)
    except RuntimeError:
        return False
    return True


def _huber(d: Any, delta: float) -> Any:
    """torch's Huber loss of a difference (against zeros: its backward misbroadcasts)."""
    return nnf.huber_loss(d, torch.zeros_like(d), reduction="none", delta=delta)


# (spec template, torch function): elementwise functions finite and smooth enough on
# any finite argument, so gradcheck is meaningful wherever the fuzz lands.
UNARY: list[tuple[str, Callable[[Any], Any]]] = [
    ("sin({})", torch.sin),
    ("tanh({})", torch.tanh),
    ("sigmoid({})", torch.sigmoid),
    ("softplus({})", nnf.softplus),
    ("exp(tanh({}))", lambda u: torch.exp(torch.tanh(u))),
    ("log(1 + ({})**2)", lambda u: torch.log(1 + u**2)),
    ("sqrt(({})**2 + 0.5)", lambda u: torch.sqrt(u**2 + 0.5)),
    ("({})**2", lambda u: u**2),
    ("({})**3", lambda u: u**3),
    ("atan({})", torch.atan),
    ("erf({})", torch.erf),
    ("abs({})", torch.abs),
    ("relu({})", torch.relu),
    ("clamp({}, -0.5, 0.5)", lambda u: torch.clamp(u, -0.5, 0.5)),
    ("1 / (1 + ({})**2)", lambda u: 1 / (1 + u**2)),
    ("silu({})", nnf.silu),
    ("mish({})", nnf.mish),
    ("gelu({})", nnf.gelu),
    ("gelu_tanh({})", lambda u: nnf.gelu(u, approximate="tanh")),
    ("elu({}, 0.5)", lambda u: nnf.elu(u, 0.5)),
    ("selu({})", nnf.selu),
    ("leaky_relu({}, 0.1)", lambda u: nnf.leaky_relu(u, 0.1)),
    ("hardswish({})", nnf.hardswish),
    ("hardtanh({}, -0.5, 1)", lambda u: nnf.hardtanh(u, -0.5, 1.0)),
    ("softshrink({}, 0.25)", lambda u: nnf.softshrink(u, 0.25)),
    ("huber({}, 0.5)", lambda u: _huber(u, 0.5)),
    (
        "smooth_l1({}, 0.5)",
        lambda u: nnf.smooth_l1_loss(u, torch.zeros_like(u), reduction="none", beta=0.5),
    ),
    ("-({})", lambda u: -u),
]
BINARY: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("({}) + ({})", lambda a, b: a + b),
    ("({}) - ({})", lambda a, b: a - b),
    ("({}) * ({})", lambda a, b: a * b),
    ("({}) / (1 + ({})**2)", lambda a, b: a / (1 + b**2)),
    ("max({}, {})", torch.maximum),
    ("min({}, {})", torch.minimum),
    ("atan2({}, 1 + ({})**2)", lambda a, b: torch.atan2(a, 1 + b**2)),
    ("huber(({}) - ({}), 1.0)", lambda a, b: _huber(a - b, 1.0)),
    # Huber's loss written out: computed by torch's kernel of the two operands.
    (
        "where(abs(({0}) - ({1})) < 0.5, 0.5 * (({0}) - ({1}))**2,"
        " 0.5 * (abs(({0}) - ({1})) - 0.25))",
        lambda a, b: _huber(a - b, 0.5),
    ),
]


# (spec template, torch function of a and x): patterns whose terms sympy cancels.
CANCELLING: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("({a}) + ({x}) - ({a})", lambda a, x: a + x - a),
    ("({x}) - ({a}) + ({a})", lambda a, x: x - a + a),
    ("(1 + ({a})**2) * ({x}) / (1 + ({a})**2)", lambda a, x: (1 + a**2) * x / (1 + a**2)),
    ("({x}) - ({x}) + 0 * ({a})", lambda a, x: x - x + 0 * a),
    ("({a}) - ({a}) + ({x})", lambda a, x: a - a + x),
    ("0 * ({a}) + ({x})", lambda a, x: 0 * a + x),
    ("({x}) * (({a}) - ({a}) + 1)", lambda a, x: x * (a - a + 1)),
    ("({x}) - ({x})", lambda a, x: x - x),
]


def _positions(u: torch.Tensor, dim: int) -> torch.Tensor:
    """0, 1, ... along dim, broadcast like u (the oracle of `position`)."""
    shape = [1] * u.dim()
    shape[dim] = -1
    return torch.arange(u.shape[dim], dtype=u.dtype).view(shape).expand_as(u)


# (spec template of the operand and dim, torch function of both): the scans and sort,
# drawn where a softmax is, along a dim of a tensor with dims.
ALONG_DIM: dict[str, tuple[str, Callable[[Any, int], Any]]] = {
    "cumsum": ("cumsum({}, {})", torch.cumsum),
    "cumprod": ("cumprod({}, {})", torch.cumprod),
    "flip": ("flip({}, {})", lambda u, d: torch.flip(u, (d,))),
    "sort": ("sort({}, dim={})", lambda u, d: torch.sort(u, d).values),
    "sort descending": (
        "sort({}, {}, descending=True)",
        lambda u, d: torch.sort(u, d, descending=True).values,
    ),
    "position": (
        "(1 + position({0}, {1})) * ({0})",
        lambda u, d: (1 + _positions(u, d)) * u,
    ),
}


# Layer norm over the last dim (eps 0.1: rows of two or three values may be nearly equal),
# as the call and written out, which is computed as the call.
LAYER_NORMS: dict[str, str] = {
    "layer_norm": "layer_norm({}, 0.1)",
    "layer_norm written": (
        "(({0}) - mean({0}, dim=-1, keepdim=True)) / sqrt(mean((({0}) - mean({0}, dim=-1,"
        " keepdim=True))**2, dim=-1, keepdim=True) + 0.1)"
    ),
}


@dataclass
class _Drawer:
    """Draws one random spec: its inputs, `where` values and outputs."""

    rng: random.Random
    leaves: list[Node] = field(default_factory=list)
    # The index inputs drawn: name -> (shape, bound), the values 0 <= i < bound.
    indices: dict[str, tuple[Shape, int]] = field(default_factory=dict)

    def shapes(self) -> list[Shape]:
        """1-3 shapes that broadcast together: suffixes of a base, some dims set to 1."""
        base = tuple(self.rng.choice([2, 3]) for _ in range(self.rng.randint(0, 3)))
        shapes = []
        for _ in range(self.rng.randint(1, 3)):
            rank = self.rng.randint(0, len(base))
            suffix = base[len(base) - rank :]
            shapes.append(tuple(1 if self.rng.random() < 0.3 else n for n in suffix))
        return shapes

    def expression(self, depth: int) -> Node:
        if depth <= 0 or self.rng.random() < 0.2:
            return self.leaf()
        kind = self.rng.random()
        if kind < 0.35:
            template, function = self.rng.choice(UNARY)
            child = self.expression(depth - 1)
            run = _unary(function, child)
            return Node(template.format(child.text), run, child.shape, child.tensor)
        if kind < 0.65:
            if self.rng.random() < 0.2:
                return self.cancelling(depth)
            template, binary = self.rng.choice(BINARY)
            a, b = self.expression(depth - 1), self.expression(depth - 1)
            if not _broadcastable(a.shape, b.shape):
                return a  # a reduction changed the rank: the pair does not broadcast
            text, run = template.format(a.text, b.text), _binary(binary, a, b)
            return Node(text, run, _broadcast(a.shape, b.shape), a.tensor or b.tensor)
        if kind < 0.8:
            return self.reduction(self.expression(depth - 1))
        if kind < 0.83:
            return self.contraction(depth)
        if kind < 0.90:
            return self.softmax(self.expression(depth - 1))
        if kind < 0.93:
            return self.view(depth)
        if kind < 0.96:
            return self.indexed(depth)
        return self.where(depth)

    def leaf(self) -> Node:
        """An input, or now and then a tensor input plus the eps of its dtype."""
        leaf = self.rng.choice(self.leaves)
        if not leaf.tensor or self.rng.random() >= 0.05:
            return leaf

        def run(env: Env) -> Any:
            value = leaf.run(env)
            return value + torch.finfo(value.dtype).eps

        return Node(f"({leaf.text} + finfo_eps({leaf.text}))", run, leaf.shape, True)

    def cancelling(self, depth: int) -> Node:
        """A pattern whose terms sympy cancels (`a + x - a`, `a * x / a`, `x - x`, `0 * a`).

        torch computes it as written, so its value has the broadcast shape of every
        operand, cancelled ones included, and they all get (zero) gradients.
        """
        a, x = self.expression(depth - 1), self.expression(depth - 1)
        if not _broadcastable(a.shape, x.shape):
            return x
        template, function = self.rng.choice(CANCELLING)
        run = _binary(function, a, x)
        shape = tuple(run(_zeros_env(self.leaves, self.indices)).shape)
        tensor = a.tensor if "{a}" in template else False
        return Node(template.format(a=a.text, x=x.text), run, shape, tensor or x.tensor)

    def reduction(self, child: Node) -> Node:
        if not child.tensor:
            return child  # the language reduces tensors only
        if child.shape and self.rng.random() < 0.25:
            return self.extremum_along(child)
        name = self.rng.choice(["sum", "mean", "logsumexp", "amax", "amin"])
        keepdim = self.rng.random() < 0.5
        rank = len(child.shape)
        dims: list[int] | None = None
        if rank and self.rng.random() < 0.7:
            chosen = self.rng.sample(range(rank), self.rng.randint(1, rank))
            negative = self.rng.random() < 0.5
            dims = sorted(d - rank if negative else d for d in chosen)
        text = child.text
        if dims is not None:
            text += f", dim={dims[0] if len(dims) == 1 else dims}"
        if keepdim:
            text += ", keepdim=True"
        run = _reduce(name, child, dims, keepdim)
        shape = tuple(run(_zeros_env(self.leaves, self.indices)).shape)
        return Node(f"{name}({text})", run, shape)

    def extremum_along(self, child: Node) -> Node:
        """max/min(child, dim=d), or a function of child gathered at its argmax/argmin
        (Note [Arg extrema]): the gradient goes to torch's one index."""
        rank, keepdim = len(child.shape), self.rng.random() < 0.5
        dim = self.rng.randrange(rank) - (rank if self.rng.random() < 0.5 else 0)
        name = self.rng.choice(["max", "min", "argmax", "argmin"])
        kept = ", keepdim=True" if keepdim else ""
        if name in ("max", "min"):
            pick = getattr(torch, name)
            text = f"{name}({child.text}, dim={dim}{kept})"

            def run(env: Env) -> Any:
                return pick(child.run(env), dim, keepdim).values

        else:
            template, function = self.rng.choice(UNARY)
            arg = getattr(torch, name)
            index = f"{name}({child.text}, {dim}, keepdim=True)"
            text = f"take_along_dim({template.format(child.text)}, {index}, {dim})"

            def run(env: Env) -> Any:
                value = child.run(env)
                return torch.gather(function(value), dim, arg(value, dim, keepdim=True))

        shape = tuple(run(_zeros_env(self.leaves, self.indices)).shape)
        return Node(text, run, shape)

    def contraction(self, depth: int) -> Node:
        """einsum of one or two operands: letters shared where sizes agree (the language
        does not broadcast a letter), a random output of the letters, matmul's by name."""
        operands = [self.expression(depth - 1) for _ in range(self.rng.randint(1, 2))]
        if not all(o.tensor for o in operands):
            return operands[0]
        letters = iter("ijklmnop")
        sizes: dict[str, int] = {}
        parts = []
        for operand in operands:
            part = ""
            for size in operand.shape:
                shared = [k for k, n in sizes.items() if n == size and k not in part]
                if shared and self.rng.random() < 0.6:
                    part += self.rng.choice(shared)
                else:
                    part += next(letters)
                    sizes[part[-1]] = size
            parts.append(part)
        pool = sorted(sizes)
        output = "".join(self.rng.sample(pool, self.rng.randint(0, len(pool))))
        subscripts = ",".join(parts) + "->" + output
        texts = ", ".join(o.text for o in operands)
        text = (
            f"matmul({texts})" if subscripts == "ij,jk->ik" else f'einsum("{subscripts}", {texts})'
        )

        def run(env: Env) -> Any:
            return torch.einsum(subscripts, *(o.run(env) for o in operands))

        return Node(text, run, tuple(sizes[k] for k in output))

    def softmax(self, child: Node) -> Node:
        if not child.shape or not child.tensor:
            return child
        name = self.rng.choice(["softmax", "log_softmax", *ALONG_DIM, *LAYER_NORMS])
        dim = self.rng.randrange(len(child.shape)) - (
            len(child.shape) if self.rng.random() < 0.5 else 0
        )
        if name in LAYER_NORMS:  # over the last dim only
            size = child.shape[-1:]
            run = lambda env: nnf.layer_norm(child.run(env), size, eps=0.1)  # noqa: E731
            return Node(LAYER_NORMS[name].format(child.text), run, child.shape)
        if name in ALONG_DIM:
            template, along = ALONG_DIM[name]
            run = lambda env: along(child.run(env), dim)  # noqa: E731
            return Node(template.format(child.text, dim), run, child.shape)
        function = torch.softmax if name == "softmax" else torch.log_softmax
        return Node(
            f"{name}({child.text}, dim={dim})",
            lambda env: function(child.run(env), dim),
            child.shape,
        )

    def view(self, depth: int) -> Node:
        """unsqueeze, a reshape (flattened, or with -1), a chunk's piece, or a cat."""
        child = self.expression(depth - 1)
        if not child.tensor:
            return child
        rank, choice = len(child.shape), self.rng.random()
        if choice < 0.3:
            dim = self.rng.randint(-rank - 1, rank)
            run = _view(lambda v: v.unsqueeze(dim), child)
            return self._shaped(f"unsqueeze({child.text}, {dim})", run)
        if choice < 0.55:
            sizes = self.rng.choice([[-1], [1, -1], [-1, 1], [1, -1, 1]])
            run = _view(lambda v: v.reshape(sizes), child)
            return self._shaped(f"reshape({child.text}, {sizes})", run)
        even = [d for d, n in enumerate(child.shape) if n % 2 == 0]
        if choice < 0.8 and even:
            dim, piece = self.rng.choice(even), self.rng.randrange(2)
            run = _view(lambda v: v.chunk(2, dim)[piece], child)
            return self._shaped(f"chunk({child.text}, 2, {dim})[{piece}]", run)
        if not rank:
            return child
        other = self.expression(depth - 1)
        if other.shape != child.shape or not other.tensor:
            template, function = self.rng.choice(UNARY)
            other = Node(template.format(child.text), _unary(function, child), child.shape)
        dim = self.rng.randrange(rank) - (rank if self.rng.random() < 0.5 else 0)

        def cat(env: Env) -> Any:
            return torch.cat([child.run(env), other.run(env)], dim)

        return self._shaped(f"cat([{child.text}, {other.text}], {dim})", cat)

    def indexed(self, depth: int) -> Node:
        """A gather or index_select along a dim, a segment sum or maximum into 1-3
        segments, or a class mask (positions compared with it), by a new index input."""
        child = self.expression(depth - 1)
        if not child.tensor or not child.shape:
            return child
        rank = len(child.shape)
        dim = self.rng.randrange(rank) - (rank if self.rng.random() < 0.5 else 0)
        name = f"i{len(self.indices)}"
        if self.rng.random() < 0.2:
            return self._class_mask(child, dim, name)
        choice = self.rng.random()
        if choice < 0.25:
            self.indices[name] = ((self.rng.randint(1, 4),), child.shape[dim])

            def select(env: Env) -> Any:
                return torch.index_select(child.run(env), dim, env[name])

            return self._shaped(f"index_select({child.text}, {dim}, {name})", select)
        if choice < 0.5 and rank > 1 and self.rng.random() < 0.4:
            return self._gather_view(child, dim, name)
        if choice < 0.5:
            shape = list(child.shape)
            shape[dim] = self.rng.randint(1, 3)
            self.indices[name] = (tuple(shape), child.shape[dim])

            def gather(env: Env) -> Any:
                return torch.gather(child.run(env), dim, env[name])

            return self._shaped(f"gather({child.text}, {dim}, {name})", gather)
        size, amax = self.rng.randint(1, 3), choice < 0.7
        self.indices[name] = ((child.shape[dim],), size)

        def segments(env: Env) -> Any:
            value = child.run(env)
            shape = list(value.shape)
            shape[dim] = size
            if not amax:
                return value.new_zeros(shape).index_add(dim, env[name], value)
            # torch's own scatter_reduce counts an empty segment's zero as a tie: the
            # language shares a maximum's gradient among the tied slices alone.
            view = [1] * value.dim()
            view[dim] = -1
            index = env[name].view(view).expand_as(value)
            return torch.stack(
                [
                    (
                        torch.where(index == s, value, -torch.inf).amax(dim)
                        if bool((env[name] == s).any())
                        else value.new_zeros(shape).select(dim, s)
                    )
                    for s in range(size)
                ],
                dim % value.dim(),
            )

        function = "segment_amax" if amax else "segment_sum"
        return self._shaped(f"{function}({child.text}, {name}, {dim}, {size})", segments)

    def _gather_view(self, child: Node, dim: int, name: str) -> Node:
        """gather(child, dim, unsqueeze(i, dim)), one position per slice as a class target
        is, sometimes through where(i != 1, i, 0): positions computed in the index."""
        shape = list(child.shape)
        classes = shape.pop(dim)
        self.indices[name] = (tuple(shape), classes)
        safe = self.rng.random() < 0.5
        positions = f"where({name} != 1, {name}, 0)" if safe else name

        def gather(env: Env) -> Any:
            index = torch.where(env[name] != 1, env[name], 0) if safe else env[name]
            return torch.gather(child.run(env), dim, index.unsqueeze(dim))

        return self._shaped(f"gather({child.text}, {dim}, unsqueeze({positions}, {dim}))", gather)

    def _class_mask(self, child: Node, dim: int, name: str) -> Node:
        """where(position(child, dim) == i, child, 0), i a class per row along dim (size 1
        there), or where(i != 0, child, -child), i of child's shape: index conditions."""
        shape = list(child.shape)
        if self.rng.random() < 0.5:
            self.indices[name] = (tuple(shape), 2)

            def valid(env: Env) -> Any:
                value = child.run(env)
                return torch.where(env[name] != 0, value, -value)

            return self._shaped(f"where({name} != 0, {child.text}, -({child.text}))", valid)
        classes, shape[dim] = shape[dim], 1
        self.indices[name] = (tuple(shape), classes)

        def mask(env: Env) -> Any:
            value = child.run(env)
            view = [1] * value.dim()
            view[dim] = -1
            positions = torch.arange(value.shape[dim]).view(view)
            return torch.where(positions == env[name], value, 0)

        text = f"where(position({child.text}, {dim}) == {name}, {child.text}, 0)"
        return self._shaped(text, mask)

    def _shaped(self, text: str, run: Callable[[Env], Any]) -> Node:
        return Node(text, run, tuple(run(_zeros_env(self.leaves, self.indices)).shape))

    def where(self, depth: int) -> Node:
        cond = self.expression(depth - 1)
        a, b = self.expression(depth - 1), self.expression(depth - 1)
        if not _broadcastable(cond.shape, a.shape, b.shape):
            return a
        threshold = round(self.rng.uniform(-0.5, 0.5), 2)
        text = f"where({cond.text} > {threshold}, {a.text}, {b.text})"

        def run(env: Env) -> Any:
            return torch.where(cond.run(env) > threshold, a.run(env), b.run(env))

        shape = _broadcast(cond.shape, a.shape, b.shape)
        return Node(text, run, shape, cond.tensor or a.tensor or b.tensor)


def _unary(function: Callable[[Any], Any], child: Node) -> Callable[[Env], Any]:
    return lambda env: function(child.run(env))


def _binary(function: Callable[[Any, Any], Any], a: Node, b: Node) -> Callable[[Env], Any]:
    return lambda env: function(a.run(env), b.run(env))


def _view(function: Callable[[Any], Any], child: Node) -> Callable[[Env], Any]:
    return lambda env: function(child.run(env))


def _reduce(name: str, child: Node, dims: list[int] | None, keepdim: bool) -> Callable[[Env], Any]:
    def run(env: Env) -> Any:
        value = child.run(env)
        every = list(range(value.dim()))
        axes = every if dims is None else dims
        if name == "logsumexp":
            return torch.logsumexp(value, dim=axes, keepdim=keepdim) if value.dim() else value
        return getattr(torch, name)(value, dim=axes, keepdim=keepdim) if value.dim() else value

    return run


def _zeros_env(leaves: list[Node], indices: Mapping[str, tuple[Shape, int]]) -> Env:
    """An environment of zeros in each leaf's and index's shape, to work out shapes."""
    env: Env = {leaf.text: torch.zeros(leaf.shape) for leaf in leaves}
    env.update(
        {name: torch.zeros(shape, dtype=torch.int64) for name, (shape, _) in indices.items()}
    )
    return env


@dataclass(frozen=True)
class Case:
    """One random spec and its oracle."""

    seed: int
    data: dict[str, Any]
    inputs: dict[str, Shape]
    oracle: Callable[..., tuple[Any, ...]]
    differentiable: tuple[bool, ...]
    # Index inputs, declared after the tensors: name -> (shape, bound of the values).
    indices: dict[str, tuple[Shape, int]] = field(default_factory=dict)

    def yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.data, sort_keys=False)


def random_case(seed: int) -> Case:
    """The spec drawn by `seed`, the same on every machine."""
    rng = random.Random(seed)
    drawer = _Drawer(rng)
    shapes = drawer.shapes()
    names = [f"x{i}" for i in range(len(shapes))]
    inputs: dict[str, Any] = {
        n: {"type": "tensor", "shape": list(s)} for n, s in zip(names, shapes, strict=True)
    }
    drawer.leaves = [
        Node(n, lambda env, n=n: env[n], s) for n, s in zip(names, shapes, strict=True)
    ]
    number: dict[str, Any] = {}
    if rng.random() < 0.4:
        number["k"] = {"type": "float", "default": round(rng.uniform(0.2, 1.5), 2)}
        drawer.leaves.append(Node("k", lambda env: env["k"], (), tensor=False))
    where: dict[str, str] = {}
    for index in range(rng.randint(0, 2)):
        node = drawer.expression(2)
        name = f"w{index}"
        where[name] = node.text
        # Reused as a leaf by later values, several times when drawn again.
        leaf = Node(name, lambda env, node=node: node.run(env), node.shape, node.tensor)
        drawer.leaves.append(leaf)
    outputs: dict[str, Any] = {}
    runs: list[Callable[[Env], Any]] = []
    differentiable: list[bool] = []
    for index in range(rng.randint(1, 3)):
        node = drawer.expression(3)
        if not node.tensor and not _broadcastable(node.shape, shapes[0]):
            node = drawer.leaves[0]
        elif not node.tensor:
            node = Node(
                f"({node.text}) + x0",
                lambda env, node=node: node.run(env) + env["x0"],
                _broadcast(node.shape, shapes[0]),
            )
        flag = index == 0 or rng.random() < 0.8
        outputs[f"y{index}"] = node.text if flag else {"expr": node.text, "differentiable": False}
        runs.append(node.run)
        differentiable.append(flag)
    for name, (shape, _) in drawer.indices.items():
        inputs[name] = {"type": "index", "shape": list(shape)}
    inputs.update(number)
    # A tenth of the specs select their first output by an option, from an rng of its
    # own so that the other draws of every seed stay as they were.
    option_rng = random.Random(seed * 7919 + 1)
    if option_rng.random() < 0.1:
        outputs["y0"], runs[0] = _optioned(option_rng, outputs["y0"], runs[0], inputs)
    data: dict[str, Any] = {"name": f"Fuzz{seed}", "inputs": inputs}
    # A fifth ask for `save: memory` or `speed` (Note [Save choices]), from an rng of its own.
    save_rng = random.Random(seed * 7919 + 2)
    if save_rng.random() < 0.2:
        data["save"] = save_rng.choice(["memory", "speed"])
    if where:
        data["where"] = where
    data["outputs"] = outputs

    def oracle(**values: Any) -> tuple[Any, ...]:
        # Numbers as 0-d float64 tensors: torch's functions take no Python floats.
        values = {
            k: torch.tensor(v, dtype=torch.float64) if isinstance(v, float) else v
            for k, v in values.items()
        }
        return tuple(run(values) for run in runs)

    shaped = dict(zip(names, shapes, strict=True))
    return Case(seed, data, shaped, oracle, tuple(differentiable), dict(drawer.indices))


def _optioned(
    rng: random.Random, text: str, run: Callable[[Env], Any], inputs: dict[str, Any]
) -> tuple[str, Callable[[Env], Any]]:
    """The output `text` chosen among forms by a str option (shapes differ) or a bool flag."""
    if rng.random() < 0.5:
        inputs["flag"] = {"type": "bool", "default": rng.random() < 0.5}
        return f"where(flag, {text}, -({text}))", lambda env: run(env) if env["flag"] else -run(env)
    default = rng.choice(["keep", "total", "twice"])
    inputs["mode"] = {"type": "str", "choices": ["keep", "total", "twice"], "default": default}
    chosen = {"keep": lambda v: v, "total": torch.sum, "twice": lambda v: 2 * v}
    option = f'where(mode == "keep", {text}, where(mode == "total", sum({text}), 2 * ({text})))'
    return option, lambda env: chosen[env["mode"]](run(env))


def check_case(case: Case) -> str | None:
    """None if symgrad agrees with the oracle on every check, else what failed first."""
    try:
        spec = symgrad.spec_from_dict(case.data)
        function = getattr(symgrad.load_module(spec, formatted=False), spec.module)
    except Exception as error:  # generation must succeed for every drawn spec
        return f"generate: {type(error).__name__}: {error}"
    generator = torch.Generator().manual_seed(case.seed)
    tensors = [
        (3 * torch.rand(shape, generator=generator, dtype=torch.float64) - 1.5).requires_grad_()
        for shape in case.inputs.values()
    ]
    numbers = {
        k: v["default"]
        for k, v in case.data["inputs"].items()
        if v["type"] in ("float", "str", "bool")
    }
    # Index values last from the generator, so that the tensors of index-free seeds stay.
    indices = {
        name: torch.randint(bound, shape, generator=generator)
        for name, (shape, bound) in case.indices.items()
    }
    numbers = {**indices, **numbers}  # passed after the tensors, in the spec's order
    names = list(case.inputs)
    try:
        expected = case.oracle(**dict(zip(names, tensors, strict=True)), **numbers)
    except RuntimeError as error:
        return f"oracle: {error}"  # a bad draw (a fuzz bug), reported too
    if not all(torch.isfinite(e).all() for e in expected):
        return None  # nothing meaningful to compare
    try:
        return _compare(case, function, tensors, numbers, expected)
    except Exception as error:
        return f"crash: {type(error).__name__}: {error}\n{traceback.format_exc(limit=-3)}"


def _compare(
    case: Case,
    function: Callable[..., Any],
    tensors: list[torch.Tensor],
    numbers: dict[str, Any],
    expected: tuple[Any, ...],
) -> str | None:
    """The generated Function against the oracle: values, vjp, jvp, gradcheck and
    gradgradcheck (`numbers` are the index and number inputs, after the tensors)."""
    actual = function(*tensors, *numbers.values())
    actual = actual if isinstance(actual, tuple) else (actual,)
    for index, (mine, want) in enumerate(zip(actual, expected, strict=True)):
        if mine.shape != want.shape or not torch.allclose(mine, want, rtol=1e-7, atol=1e-9):
            return f"forward y{index}: {mine} != {want}"
    # A differentiable output that reads no input requiring grad has no gradient to compare.
    chosen = [i for i, d in enumerate(case.differentiable) if d and expected[i].requires_grad]
    if not chosen:
        return None
    generator = torch.Generator().manual_seed(case.seed + 1)
    cotangents = [
        torch.randn(expected[i].shape, generator=generator, dtype=torch.float64) for i in chosen
    ]
    mine = torch.autograd.grad([actual[i] for i in chosen], tensors, cotangents, allow_unused=True)
    want = torch.autograd.grad(
        [expected[i] for i in chosen], tensors, cotangents, allow_unused=True
    )
    for name, tensor, a, b in zip(case.inputs, tensors, mine, want, strict=True):
        if a is None and b is not None:
            return f"vjp {name}: None where autograd gives a tensor of shape {list(b.shape)}"
        # A gradient where autograd has None must be zeros (an output it does not read).
        a, b = (torch.zeros_like(tensor) if g is None else g for g in (a, b))
        if a.shape != b.shape or not torch.allclose(a, b, rtol=1e-6, atol=1e-8):
            return f"vjp {name}: {a} != {b}"

    def differentiable(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outputs = function(*args, *numbers.values())
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        return tuple(outputs[i] for i in chosen)

    def reference(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outputs = case.oracle(**dict(zip(case.inputs, args, strict=True)), **numbers)
        return tuple(outputs[i] for i in chosen)

    primals = tuple(t.detach() for t in tensors)
    tangents = tuple(
        torch.randn(t.shape, generator=generator, dtype=torch.float64) for t in primals
    )
    _, mine_t = torch.func.jvp(differentiable, primals, tangents)
    _, want_t = torch.func.jvp(reference, primals, tangents)
    for index, (a, b) in enumerate(zip(mine_t, want_t, strict=True)):
        if a.shape != b.shape or not torch.allclose(a, b, rtol=1e-6, atol=1e-8):
            return f"jvp y{chosen[index]}: {a} != {b}"
    if not torch.autograd.gradcheck(differentiable, tuple(tensors), raise_exception=False):
        return "gradcheck"
    if not torch.autograd.gradgradcheck(differentiable, tuple(tensors), raise_exception=False):
        return "gradgradcheck"
    return None
