"""The expression language: its functions, conditionals, reductions and activations, one table."""
