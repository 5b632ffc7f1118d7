"""Tables in the book: settings print exactly, small numbers keep their digits, the CSV keeps raw values."""
import base64
import re

import pandas as pd
import pytest

from sec_lib.figures.tables import csv_link, format_number, table_html


def test_small_numbers_and_settings_are_not_rounded_away():
    df = pd.DataFrame({"eta": [0.005, 0.5], "R@1": [65.111, 70.0], "ci_lo": [-0.0042, 1.234], "p_value": [0.0012, 0.5]})
    html = table_html(df, "t")
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", html)        # numeric cells carry class="sec-num"
    assert "0.005" in cells and "0.5" in cells
    assert "65.11" in cells and "-0.0042" in cells and "0.0012" in cells
    payload = re.search(r"base64,([A-Za-z0-9+/=]+)", html).group(1)
    assert "0.005,65.111,-0.0042,0.0012" in base64.b64decode(payload).decode()
    assert format_number(0.0) == "0.00" and format_number(float("nan")) == ""


def test_csv_link_rejects_unsafe_names():
    with pytest.raises(ValueError, match="letters, digits"):
        csv_link(pd.DataFrame({"a": [1]}), "../evil")


def test_an_interval_goes_whole_under_its_estimate_and_long_words_may_break():
    df = pd.DataFrame({"loss": ["ms"], "R@1": ["65.11 ± 2.23"], "gain": ["+1.25 [-9.34, +11.84]"],
                       "page": ["claims.html#question-10"], "fn": ["est_gain_semihard"], "q": ["it's"]})
    html = table_html(df, "t")
    assert '<td class="sec-num sec-wrap"><span>65.11</span> <span>± 2.23</span></td>' in html
    assert '<td class="sec-num sec-wrap"><span>+1.25</span> <span>[-9.34, +11.84]</span></td>' in html
    assert "claims.html#<wbr>question-10" in html and "est_<wbr>gain_<wbr>semihard" in html
    assert "<wbr>" not in re.search(r"<td>it[^<]*s</td>", html).group(0)     # never inside an entity (&#x27;)


def test_folded_columns_get_tables_of_their_own_and_the_csv_keeps_every_column():
    from sec_lib.figures.tables import fold_columns
    df = pd.DataFrame({"loss": ["ms", "npair"], "R@1": [1.0, 2.0], "NMI": [3.0, 4.0], "F1": [5.0, 6.0]})
    out = fold_columns(df, ["loss"], {"Secondary: NMI, F1": ["NMI", "F1", "absent"], "Empty": []})
    assert out is df and list(df.columns) == ["loss", "R@1", "NMI", "F1"]
    html = table_html(df, "t")
    main, more = html.split('<details class="sec-more">')
    assert html.count("<details") == 1 and "<summary>Secondary: NMI, F1</summary>" in more
    heads = lambda part: re.findall(r"<th>([^<]*)</th>", part)
    assert heads(main) == ["loss", "R@1"] and heads(more) == ["loss", "NMI", "F1"]
    payload = re.search(r"base64,([A-Za-z0-9+/=]+)", html).group(1)
    assert base64.b64decode(payload).decode().splitlines()[0] == "loss,R@1,NMI,F1"
    with pytest.raises(ValueError, match="key columns"):
        fold_columns(df, ["variant"], {"x": ["NMI"]})


def test_missing_values_never_read_nan_none_or_na():
    """A missing value of a text, nullable-integer or date column shows MISSING_CELL ("—"), a missing
    float a blank; no cell reads NaN, None, NaT or <NA>. The CSV keeps the missing values empty."""
    from sec_lib.figures.tables import MISSING_CELL
    df = pd.DataFrame({"note": ["x", None, float("nan")], "R@1": [1.0, float("nan"), 2.0],
                       "runs": pd.array([1, None, 3], dtype="Int64"),
                       "date": [pd.NaT, pd.Timestamp("2026-01-02"), pd.NaT]})
    html = table_html(df, "t")
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", html)
    assert not [c for c in cells if re.search(r"\b(nan|NaN|None|NaT)\b|&lt;NA&gt;", c)], cells
    assert cells == ["x", "1.00", "1", MISSING_CELL, MISSING_CELL, "", MISSING_CELL, "2026-01-02",
                     MISSING_CELL, "2.00", "3", MISSING_CELL]
    payload = re.search(r"base64,([A-Za-z0-9+/=]+)", html).group(1)
    assert base64.b64decode(payload).decode().splitlines()[2] == ",,,2026-01-02"


def test_a_captions_backticked_column_names_are_set_as_code_and_the_rest_is_escaped():
    from sec_lib.figures.tables import caption_html, table_html
    cap = "the mean over the seeds a `seeds` column counts; `chosen` marks <η> & more"
    assert caption_html(cap) == ("the mean over the seeds a <code>seeds</code> column counts; <code>chosen</code> "
                                 "marks &lt;η&gt; &amp; more")
    out = table_html(pd.DataFrame({"a": [1.0]}), "t", caption=cap)
    assert out.startswith("<p><b>the mean over the seeds a <code>seeds</code>") and "`" not in out.split("</b>")[0]
