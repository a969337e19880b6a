"""symgrad's benchmark suite: generated Functions against autograd, torch.compile and torch.

Run it with `python -m bench --help`; results go to bench/results/.
"""
