"""The IR of a spec's forward and the passes over it.

Reverse and forward mode, the NaN guards of untaken branches, stability rewrites, CSE
and the save/recompute schedule. Nothing here prints code.
"""
