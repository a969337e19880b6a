"""Draw the run's time ratios to eager autograd as a bar chart (a PNG beside the report)."""

from __future__ import annotations

from pathlib import Path

from bench.runner import Results

# The alternatives drawn, in order, and their labels.
_SERIES = (("generated", "symgrad"), ("fused", "symgrad fused"), ("compile", "torch.compile"))


def write_chart(results: Results, path: Path) -> bool:
    """Write the chart to `path`; False (nothing written) without matplotlib or rows."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError:
        return False
    if not results.rows:
        return False
    labels = [f"{row.case}\n{row.elements:.0e}" for row in results.rows]
    figure, axis = pyplot.subplots(figsize=(max(6.0, 0.9 * len(labels)), 4.0))
    width = 0.8 / len(_SERIES)
    for index, (key, label) in enumerate(_SERIES):
        heights = []
        for row in results.rows:
            found, eager = row.measurements.get(key), row.measurements["eager"]
            heights.append(found.ratio_to(eager) if found is not None else 0.0)
        positions = [i + (index - (len(_SERIES) - 1) / 2) * width for i in range(len(labels))]
        axis.bar(positions, heights, width, label=label)
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.set_xticks(range(len(labels)), labels, fontsize=7)
    axis.set_ylabel("time / eager autograd (lower is faster)")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
    return True
