"""Tables as the pages show them: HTML with formatted numbers and a CSV download link that works from
file:// (the raw numbers go into the CSV)."""
from __future__ import annotations

import base64
import html
import re

import pandas as pd
from IPython.display import HTML, display


def csv_link(df: pd.DataFrame, name: str, label: str = "Download this table as CSV") -> str:
    """An <a download> link that carries the CSV in a data: URI, so it works from file:// with no server."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(f"table name {name!r} must use letters, digits, '_', '-' and '.' only")
    payload = base64.b64encode(df.to_csv(index=False).encode()).decode()
    fname = name if name.endswith(".csv") else f"{name}.csv"
    return (f'<a download="{html.escape(fname)}" href="data:text/csv;base64,{payload}" '
            f'class="sec-csv-download">{html.escape(label)} ({html.escape(fname)})</a>')


#: Columns holding settings, shown exactly (0.005 must not read as 0.01).
EXACT_COLUMNS = ("eta", "lr", "lr_head", "momentum", "mu", "weight_decay")


def format_number(v, floatfmt: str = "{:.2f}") -> str:
    """``floatfmt`` for ordinary values; two significant digits below 0.1 so small numbers
    (p-values, variances, interval bounds near 0) do not print as 0.00."""
    if pd.isna(v):
        return ""
    return floatfmt.format(v) if v == 0 or abs(v) >= 0.1 else f"{v:.2g}"


#: A cell that holds only a number or an interval ("65.11 ± 2.23", "65.1 [62.9, 67.3]", "-0.53").
NUMERIC_CELL = re.compile(r"[\s\d.,+\-\u2212\u00b1\[\]()%eE\u00d7<>=~\u2248/]*\d[\s\d.,+\-\u2212\u00b1\[\]()%eE\u00d7<>=~\u2248/]*")


def mark_numeric_cells(table: str) -> str:
    """Give every ``<td>`` of an HTML table that holds only a number or an interval the class
    ``sec-num`` (``book/_static/sec.css``: right-aligned, never wrapped inside the cell)."""
    def repl(m):
        text = html.unescape(m.group(1)).strip()
        return f'<td class="sec-num">{m.group(1)}</td>' if NUMERIC_CELL.fullmatch(text) else m.group(0)
    return re.sub(r"<td>([^<]*)</td>", repl, table)


def breakable_header(name) -> str:
    """A column name that may break after its underscores (a zero-width space follows each), so that
    ``test_norm_var`` does not set a numeric column's width."""
    return str(name).replace("_", "_\u200b")


def table_html(df: pd.DataFrame, name: str, caption: str | None = None, floatfmt: str = "{:.2f}") -> str:
    """The table as HTML (numbers formatted, intervals kept on one line, headers that may break after
    an underscore) followed by its CSV download link (raw numbers, raw column names)."""
    shown = df.copy()
    for c in shown.columns:
        if pd.api.types.is_float_dtype(shown[c]):
            exact = str(c) in EXACT_COLUMNS
            shown[c] = shown[c].map(lambda v: "" if pd.isna(v) else (f"{v:g}" if exact else format_number(v, floatfmt)))
    if not isinstance(shown.columns, pd.MultiIndex):
        shown.columns = [breakable_header(c) for c in shown.columns]
    cap = f"<p><b>{html.escape(caption)}</b></p>" if caption else ""
    table = mark_numeric_cells(shown.to_html(index=False, escape=True, border=0, classes="sec-table"))
    return cap + table + f"<p>{csv_link(df, name)}</p>"


def show_table(df: pd.DataFrame, name: str, caption: str | None = None, floatfmt: str = "{:.2f}") -> None:
    """Display a table with a CSV download link in a notebook (raw numbers go into the CSV)."""
    display(HTML(table_html(df, name, caption, floatfmt)))


#: MIME types of the files the pages offer for download.
MIME_TYPES = {".csv": "text/csv", ".parquet": "application/vnd.apache.parquet", ".json": "application/json"}


def file_link(data: bytes, filename: str, label: str) -> str:
    """An <a download> link carrying ``data`` in a data: URI (works from file:// with no server);
    the MIME type comes from the extension (one of :data:`MIME_TYPES`)."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", filename):
        raise ValueError(f"file name {filename!r} must use letters, digits, '_', '-' and '.' only")
    ext = "." + filename.rsplit(".", 1)[-1] if "." in filename else ""
    if ext not in MIME_TYPES:
        raise ValueError(f"file name {filename!r} has extension {ext!r}; valid: {', '.join(MIME_TYPES)}")
    payload = base64.b64encode(bytes(data)).decode()
    return (f'<a download="{html.escape(filename)}" href="data:{MIME_TYPES[ext]};base64,{payload}" '
            f'class="sec-csv-download">{html.escape(label)} ({html.escape(filename)}, {len(data) / 1024:.0f} KB)</a>')
