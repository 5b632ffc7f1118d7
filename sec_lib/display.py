"""Small display helpers shared by the notebooks: tables with a CSV download link, and verdict text."""
from __future__ import annotations

import base64
import html
import re

import pandas as pd


def csv_link(df: pd.DataFrame, name: str, label: str = "Download this table as CSV") -> str:
    """An <a download> link that carries the CSV in a data: URI, so it works from file:// with no server."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(f"table name {name!r} must use letters, digits, '_', '-' and '.' only")
    payload = base64.b64encode(df.to_csv(index=False).encode()).decode()
    fname = name if name.endswith(".csv") else f"{name}.csv"
    return (f'<a download="{html.escape(fname)}" href="data:text/csv;base64,{payload}" '
            f'class="sec-csv-download">{html.escape(label)} ({html.escape(fname)})</a>')


def table_html(df: pd.DataFrame, name: str, caption: str | None = None, floatfmt: str = "{:.2f}") -> str:
    """The table as HTML (numbers formatted) followed by its CSV download link."""
    shown = df.copy()
    for c in shown.columns:
        if pd.api.types.is_float_dtype(shown[c]):
            shown[c] = shown[c].map(lambda v: "" if pd.isna(v) else floatfmt.format(v))
    cap = f"<p><b>{html.escape(caption)}</b></p>" if caption else ""
    return cap + shown.to_html(index=False, escape=True, border=0, classes="sec-table") + \
        f"<p>{csv_link(df, name)}</p>"


def show_table(df: pd.DataFrame, name: str, caption: str | None = None, floatfmt: str = "{:.2f}") -> None:
    """Display a table with a CSV download link in a notebook (raw numbers go into the CSV)."""
    from IPython.display import HTML, display
    display(HTML(table_html(df, name, caption, floatfmt)))


def fmt_ci(mean: float, lo: float, hi: float, digits: int = 2) -> str:
    """'m ± h' with h the CI half-width, or 'm (n=1)' when the interval is undefined."""
    if pd.isna(lo) or pd.isna(hi):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {(hi - lo) / 2:.{digits}f}"
