"""Presentation: `symgrad show`, its LaTeX, plots, and the generated spec reference."""
