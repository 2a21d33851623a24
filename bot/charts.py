"""PNG charts of a Reply's time series, for Slack threads and `kbot ask --png FILE`.

Drawn with matplotlib's Agg backend (no display needed). Made to be read at Slack's thumbnail
size: one panel per unit, thick lines, few ticks, the y axis labelled with its unit, the x axis in
UTC, and the incident window shaded so the eye goes to it first.
"""

from __future__ import annotations

import datetime as dt
import io

from framework.reply import Series

WIDTH_IN, HEIGHT_IN, DPI = 8.0, 3.2, 100  # 800x320 per panel: legible when Slack shrinks it to 360 px


def _time(value: str) -> dt.datetime:
    parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


def y_limits(values: list[float], auto: tuple[float, float]) -> tuple[float, float]:
    """The y axis of a panel: from 0 (or below, for negative values); a panel of zeros runs 0..1,
    not matplotlib's -0.04..0.04 around them."""
    if values and min(values) == max(values) == 0:
        return 0.0, 1.0
    return min(0.0, auto[0]), auto[1]


def chart_png(series: list[Series], title: str) -> bytes:
    """One PNG with a panel per unit (partitions, records/s ...); every series of a unit shares a panel."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    units: dict[str, list[Series]] = {}
    for s in series:
        if s.points:
            units.setdefault(s.unit, []).append(s)
    if not units:
        raise ValueError("no points to chart")
    fig, axes = plt.subplots(
        len(units), 1, figsize=(WIDTH_IN, HEIGHT_IN * len(units)), dpi=DPI, squeeze=False, sharex=True
    )
    try:
        for ax, (unit, group) in zip(axes[:, 0], units.items()):
            for s in group:
                xs = [_time(t) for t, _v in s.points]
                ax.plot(
                    xs,
                    [v for _t, v in s.points],
                    linewidth=2.2,
                    label=s.label or s.title,
                    drawstyle="steps-post" if len(xs) > 1 else "default",
                    marker="o" if len(xs) < 3 else None,
                )
            window = next((s.window for s in group if s.window), None)
            if window:
                ax.axvspan(_time(window[0]), _time(window[1]), color="tab:red", alpha=0.12, label="incident window")
            ax.set_ylabel(unit, fontsize=11)
            ax.set_ylim(*y_limits([v for s in group for _t, v in s.points], ax.get_ylim()))
            ax.grid(True, alpha=0.3)
            ax.tick_params(labelsize=10)
            if len(group) > 1 or window:
                ax.legend(fontsize=9, loc="best", framealpha=0.8)
        bottom = axes[-1, 0]
        bottom.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz=dt.timezone.utc))
        bottom.xaxis.set_major_locator(mdates.AutoDateLocator(minticks=3, maxticks=7, tz=dt.timezone.utc))
        bottom.set_xlabel("time (UTC)", fontsize=11)
        axes[0, 0].set_title(title, fontsize=13, loc="left")
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return buf.getvalue()
    finally:
        plt.close(fig)
