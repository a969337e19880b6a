"""symgrad's benchmark suite: generated Functions against autograd, torch.compile and torch.

Run it with `python -m bench --help`. Reports go to build/bench/; the committed
results in bench/results/ are written only with `--save`.
"""
