"""Tables as the pages show them: HTML with formatted numbers and a CSV download link that works from
file:// (the raw numbers go into the CSV)."""
from __future__ import annotations

import base64
import html
import os
import re
from pathlib import Path
from typing import Sequence

import pandas as pd
from IPython.display import HTML, display

from ..report.verdicts import equivalence_p_words
from ..tempfiles import atomic_write_bytes


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


#: Where an estimate meets its interval ("65.1 [62.9, 67.3]", "65.11 ± 2.23"): the one place a numeric
#: cell may break when its column is short of room.
_CI_BREAK = re.compile(r" (?=[\u00b1\[])")
#: Where a long word of a text cell may break (after these characters): ``est_gain_semihard``,
#: ``claims.html#question-10``.
_WORD_BREAK = re.compile(r"([_/]|(?<!&)#)(?=\w)")   # never inside "&#39;"


def mark_numeric_cells(table: str) -> str:
    """Give every ``<td>`` of an HTML table that holds only a number or an interval the class
    ``sec-num`` (``book/_static/sec.css``: right-aligned, never broken inside a number). A cell that
    holds an estimate with its interval is also ``sec-wrap``: the interval is a ``<span>`` of its own
    and may go under the estimate when the column is short of room, never break inside itself.
    Other cells may break long words after ``_``, ``/`` and ``#`` (``<wbr>``)."""
    def repl(m):
        text = html.unescape(m.group(1)).strip()
        if not NUMERIC_CELL.fullmatch(text):
            return "<td>" + _WORD_BREAK.sub(r"\1<wbr>", m.group(1)) + "</td>"
        parts = _CI_BREAK.split(m.group(1).strip(), maxsplit=1)
        if len(parts) == 1:
            return f'<td class="sec-num">{m.group(1)}</td>'
        return f'<td class="sec-num sec-wrap"><span>{parts[0]}</span> <span>{parts[1]}</span></td>'
    return re.sub(r"<td>([^<]*)</td>", repl, table)


def breakable_header(name) -> str:
    """A column name that may break after its underscores (a zero-width space follows each), so that
    ``test_norm_var`` does not set a numeric column's width."""
    return str(name).replace("_", "_\u200b")


#: ``DataFrame.attrs`` keys read by :func:`table_html` (set them with :func:`fold_columns`).
KEY_COLUMNS_ATTR, FOLDED_ATTR = "sec_key_columns", "sec_folded_columns"


def fold_columns(df: pd.DataFrame, keys: Sequence[str], groups: dict[str, Sequence[str]]) -> pd.DataFrame:
    """Mark ``df`` so that :func:`table_html` shows each group of columns (``{title: columns}``) as a
    table of its own, folded under its title below the main table, each row named by the ``keys``
    columns; the main table keeps every other column. The frame itself (and its CSV) keeps every column.
    Columns of a group that ``df`` lacks are skipped, and a group left empty is dropped."""
    missing = [k for k in keys if k not in df.columns]
    if missing:
        raise ValueError(f"key columns {missing} are not in the table; columns: {list(df.columns)}")
    folded = {str(t): [c for c in cols if c in df.columns and c not in keys] for t, cols in groups.items()}
    df.attrs[KEY_COLUMNS_ATTR] = list(keys)
    df.attrs[FOLDED_ATTR] = {t: cols for t, cols in folded.items() if cols}
    return df


#: A verdict table (``report.with_verdict`` / ``report.one_family`` rows) has these columns (the row schema of
#: :data:`sec_lib.report.PAIRED_COLUMNS`); :func:`compact_verdict_table` gives it the key columns first.
VERDICT_COLUMNS = ("estimate", "ci_lo", "ci_hi", "p_adj", "verdict")
#: Its folded groups: the means and the test, then how the verdict was reached (family, margin, counts).
_TEST_DETAILS = ("p_value", "n_unpaired", "sd", "rebuttal_diff", "n_losses", "same_runs_as")
_FAMILY_DETAILS = ("m", "n_counts", "margin", "expected_sign", "family")


def compact_verdict_table(df: pd.DataFrame, floatfmt: str = "{:.2f}") -> pd.DataFrame | None:
    """A verdict table in the book's display form, or None for any other table: the naming columns, then
    the key columns (estimate with its 95% interval in one cell, Holm-adjusted p, verdict, the smallest
    effect the design could detect, n), and the rest folded under it (:func:`fold_columns`) in two groups:
    the means and the test, then the family, margin and counts behind the verdict."""
    est = "estimate"
    if not set(VERDICT_COLUMNS) <= set(df.columns) or not len(df):
        return None
    num = lambda v, sign=False: "n/a" if v is None or pd.isna(v) else (
        ("+" if sign and v > 0 else "") + format_number(float(v), floatfmt))
    n_col = "n" if "n" in df.columns else None
    # the naming columns: those before the first mean or the estimate (loss, head, metric, a setting's value)
    first_value = min(df.columns.get_loc(c) for c in df.columns if c == est or str(c).startswith("mean "))
    names = list(df.columns[:first_value])
    out = df[names].copy()
    out["estimate [95% CI]"] = [num(e, True) + ("" if pd.isna(lo) or pd.isna(hi) else f" [{num(lo, True)}, {num(hi, True)}]")
                                for e, lo, hi in zip(df[est], df["ci_lo"], df["ci_hi"])]
    # where a 'not reproduced' comes from the equivalence test, that test's p beside it, as on the scorecard
    out["adj. p"] = ["n/a" if pd.isna(r["p_adj"]) else f"{r['p_adj']:.2g}{equivalence_p_words(r)}"
                     for r in df.to_dict("records")]
    out["verdict"] = df["verdict"].to_numpy()
    if "mde" in df.columns:
        out["could detect"] = ["" if pd.isna(v) else f"≥ {num(v)}" for v in df["mde"]]
    if n_col:
        out["n"] = ["" if pd.isna(v) else f"{int(v)}" for v in df[n_col]]
    shown = {est, "ci_lo", "ci_hi", "p_adj", "verdict", "mde", n_col, *names}
    means = [c for c in df.columns if str(c).startswith("mean ")]
    test = means + [c for c in _TEST_DETAILS if c in df.columns]
    fam = [c for c in _FAMILY_DETAILS if c in df.columns]
    rest = [c for c in df.columns if c not in shown and c not in test and c not in fam]
    for c in [*test, *fam, *rest]:
        out[c] = df[c].to_numpy()
    return fold_columns(out, names, {"Means and test": test + rest, "How the verdict was reached": fam})


#: What a table cell shows for a missing value that is not a float (floats show a blank): no page shows
#: "NaN", "None" or "<NA>".
MISSING_CELL = "—"


def _html_table(df: pd.DataFrame, floatfmt: str) -> str:
    shown = df.copy()
    for c in shown.columns:
        if pd.api.types.is_float_dtype(shown[c]):
            exact = str(c) in EXACT_COLUMNS
            shown[c] = shown[c].map(lambda v: "" if pd.isna(v) else (f"{v:g}" if exact else format_number(v, floatfmt)))
        elif not pd.api.types.is_datetime64_any_dtype(shown[c]) and shown[c].isna().any():
            # text, nullable integers: MISSING_CELL, never NaN, None or <NA> (dates: to_html's na_rep below)
            shown[c] = shown[c].astype(object).where(shown[c].notna(), MISSING_CELL)
    if not isinstance(shown.columns, pd.MultiIndex):
        shown.columns = [breakable_header(c) for c in shown.columns]
    return mark_numeric_cells(shown.to_html(index=False, escape=True, border=0, classes="sec-table",
                                            na_rep=MISSING_CELL))


def caption_html(caption: str) -> str:
    """A table's caption as HTML: escaped, a `column` name in backticks set as code (as in the page's prose)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(caption))


def table_html(df: pd.DataFrame, name: str, caption: str | None = None, floatfmt: str = "{:.2f}") -> str:
    """The table as HTML (numbers formatted, an interval kept on one line or wholly under its estimate,
    headers that may break after an underscore) followed by its CSV download link (raw numbers, raw
    column names, every column). Column groups marked by :func:`fold_columns` follow the main table,
    each in a ``<details class="sec-more">`` of its own; a verdict table without such marks gets the
    book's display form first (:func:`compact_verdict_table`)."""
    raw = df
    if FOLDED_ATTR not in df.attrs:
        df = compact_verdict_table(df, floatfmt)
        df = raw if df is None else df
    keys = list(df.attrs.get(KEY_COLUMNS_ATTR, []))
    folded = dict(df.attrs.get(FOLDED_ATTR, {}))
    gone = {c for cols in folded.values() for c in cols}
    cap = f"<p><b>{caption_html(caption)}</b></p>" if caption else ""
    out = cap + _html_table(df[[c for c in df.columns if c not in gone]], floatfmt)
    for title, cols in folded.items():
        out += (f'<details class="sec-more"><summary>{html.escape(title)}</summary>'
                f"{_html_table(df[[*keys, *cols]], floatfmt)}</details>")
    return out + f"<p>{csv_link(raw, name)}</p>"


def show_table(df: pd.DataFrame, name: str, caption: str | None = None, floatfmt: str = "{:.2f}") -> None:
    """Display a table with a CSV download link in a notebook (raw numbers go into the CSV)."""
    display(HTML(table_html(df, name, caption, floatfmt)))


#: MIME types of the files the pages offer for download.
MIME_TYPES = {".csv": "text/csv", ".parquet": "application/vnd.apache.parquet", ".json": "application/json"}


#: Where the runner has a page write its download files: ``$SEC_DOWNLOADS_DIR`` (the site's
#: ``book/_static/downloads``, which the build copies to ``_static/downloads/``; see :func:`file_link`).
DOWNLOADS_ENV = "SEC_DOWNLOADS_DIR"
#: The downloads folder as seen from a page under ``book/nb/`` of the built site.
DOWNLOADS_HREF = "../../_static/downloads/"


def file_link(data: bytes, filename: str, label: str) -> str:
    """An <a download> link to ``data`` (the MIME type from the extension, one of :data:`MIME_TYPES`).

    When the runner set ``$SEC_DOWNLOADS_DIR`` (:data:`DOWNLOADS_ENV`), ``data`` is written there
    (atomically) and the link points at the copy the build serves (:data:`DOWNLOADS_HREF`), so the page
    does not carry it; otherwise (a notebook run by hand) the link carries it in a data: URI. Both work
    from file:// with no server."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", filename):
        raise ValueError(f"file name {filename!r} must use letters, digits, '_', '-' and '.' only")
    ext = "." + filename.rsplit(".", 1)[-1] if "." in filename else ""
    if ext not in MIME_TYPES:
        raise ValueError(f"file name {filename!r} has extension {ext!r}; valid: {', '.join(MIME_TYPES)}")
    data = bytes(data)
    folder = os.environ.get(DOWNLOADS_ENV)
    if folder:
        atomic_write_bytes(Path(folder) / filename, data)
        href = DOWNLOADS_HREF + filename
    else:
        href = f"data:{MIME_TYPES[ext]};base64,{base64.b64encode(data).decode()}"
    return (f'<a download="{html.escape(filename)}" href="{html.escape(href)}" '
            f'class="sec-csv-download">{html.escape(label)} ({html.escape(filename)}, {len(data) / 1024:.0f} KB)</a>')
