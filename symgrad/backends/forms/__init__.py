"""The forms every backend shares: which torch operation computes each node of a formula."""
