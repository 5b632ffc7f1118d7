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
