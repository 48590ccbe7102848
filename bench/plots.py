"""Tables and PNG line plots for the benches (``bench/curves.py``).

matplotlib is an optional dependency (``pip install -e '.[bench]'``, which ``make bench``
does): without it the tables are still printed and :func:`draw` says why there is no PNG.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out"


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table: ``title`` as a bold first line, then ``header`` and ``rows``
    (floats with one decimal, ints with thousands separators)."""

    def cell(value: object) -> str:
        if isinstance(value, float):
            return f"{value:,.1f}"
        if isinstance(value, int):
            return f"{value:,}"
        return str(value)

    lines = [f"**{title}**", "", "| " + " | ".join(header) + " |"]
    lines.append("|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|")
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def draw(
    name: str,
    title: str,
    xlabel: str,
    xs: Sequence[float],
    series: dict[str, Sequence[float]],
    *,
    ylabel: str = "milliseconds",
    logx: bool = True,
    categories: Sequence[str] | None = None,
) -> Path | None:
    """Plot each of ``series`` (label → one y per x) against ``xs`` into ``bench/out/NAME.png``
    (``categories``: names written under the xs instead of numbers); return its path, or None
    (with a printed reason) when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"(no {name}.png: matplotlib is not installed; pip install -e '.[bench]')")
        return None
    OUT.mkdir(parents=True, exist_ok=True)
    figure, axes = plt.subplots(figsize=(7, 4.2), dpi=110)
    for label, ys in series.items():
        axes.plot(list(xs), list(ys), marker="o", label=label)
    if logx and min(xs) > 0:
        from matplotlib.ticker import FuncFormatter, NullFormatter

        axes.set_xscale("log")
        axes.set_xticks(list(xs))  # the steps themselves, written out: 1,000 not 10^3
        axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
        axes.xaxis.set_minor_formatter(NullFormatter())
    if categories is not None:
        axes.set_xticks(list(xs), list(categories))
        axes.set_xmargin(0.2)
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_ylim(bottom=0)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    path = OUT / f"{name}.png"
    figure.savefig(path)
    plt.close(figure)
    return path
