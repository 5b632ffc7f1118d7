"""No "NaN" in the tiers page's tables: every table the page shows, computed from an empty quick
store, a hand-filled one and the committed tiers, has no missing value in a text column (a stage a tier does not
have is ``tiers.MISSING``, a row with nothing to note has a blank note), and no rendered cell reads NaN, None,
NaT or <NA>. Also: these pages print nothing (their outputs are Markdown, HTML and figures)."""
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from sec_lib.chapters import tiers
from sec_lib.figures.tables import table_html
from sec_lib.runs import experiments as ex
from sec_lib.runs.store import ResultStore
from sec_lib.runs.train import RunResult

NAN_CELL = re.compile(r"<td[^>]*>\s*(?:[^<]*\b(?:nan|NaN|None|NaT)\b[^<]*|&lt;NA&gt;)\s*</td>")
E = pd.DataFrame()


def assert_no_nan_text(name: str, table: pd.DataFrame) -> None:
    text = [c for c in table.columns if not pd.api.types.is_numeric_dtype(table[c])]
    missing = {c: int(table[c].isna().sum()) for c in text if table[c].isna().any()}
    assert not missing, f"{name}: text columns with missing values {missing}"
    bad = NAN_CELL.findall(table_html(table, "t"))
    assert not bad, f"{name}: rendered cells {bad[:5]}"


def page_tables(profile: str, root) -> dict:
    out = {"summary": tiers.summary_table(profile, root), "page tiers": tiers.page_tiers(profile)}
    for name, (p, store) in tiers.stores(profile, root).items():
        out[f"pre-registration, {name}"] = tiers.preregistration(p, store)
    return out


def test_the_tiers_tables_have_no_nan_cells(tmp_path):
    """An empty quick store beside whatever tiers are committed (a stage one tier has and another has not)."""
    for name, table in page_tables("smoke", tmp_path).items():
        assert_no_nan_text(name, table)
    summary = tiers.summary_table("smoke", tmp_path)
    quick = summary.iloc[0]
    assert quick["runs"] == 0 and quick["device"] == quick["torch"] == quick["dates"] == tiers.MISSING
    assert tiers.MISSING not in tiers.status_sentence(summary)
    from sec_lib.runs import decisive, mainstage, tier
    if tier.has_tier("decisive"):              # the staged tier has its row, its runs counted over every stage folder
        row = summary.set_index("tier").loc["decisive"]
        assert row["runs"] == len(tier.open_tier(tier.tier_dir("decisive")).runs)
        if decisive.plan_path().exists():
            assert row["main comparison"].endswith(f" of {len(mainstage.configs(decisive.read_plan()))}")
        assert "The **decisive** tier holds" in tiers.status_sentence(summary)
        # the page counts the stages once and hands that table over: the same summary as counting them again
        progress = tiers.decisive_progress()[0]
        pd.testing.assert_frame_equal(tiers.summary_table("smoke", tmp_path, progress=progress), summary)
        edited = progress.assign(committed=progress["committed"] + 1)     # and the table handed over is the one used
        assert tiers.summary_table("smoke", tmp_path, progress=edited).set_index("tier").loc[
            "decisive", "main comparison"] != row["main comparison"]


def test_a_partly_selected_quick_tier_has_no_nan_cells(tmp_path, no_fsync):
    """Learning rates and run length chosen, the η selection half trained: pending rows and computed ones."""
    p = ex.get_profile("smoke")
    store = ResultStore(tmp_path)
    for i, c in enumerate(ex.lr_pilot(p)):
        store.save(RunResult(c, "done", {"R@1": 50.0 + i}, E, E, E, E, E, E))
    sel = ex.eta_selection(ex.tuned(p, "adam", store))
    for c in sel[: len(sel) // 2]:
        store.save(RunResult(c, "done", {"R@1": 60.0}, E, E, E, E, E, E))
    pre = tiers.preregistration(p, store)
    assert {"pending"} < set(pre["value"]) and pre["held-out R@1"].isna().any()     # blanks that are numbers
    assert_no_nan_text("pre-registration", pre)
    assert pre.set_index("choice").loc["run length (iterations)", "note"]           # the blank score is explained


def test_the_committed_tiers_sections_have_no_nan_cells():
    assert_no_nan_text("CPU kinds", tiers.kind_table("reference"))
    lq = tiers.last_quarter("reference")
    if len(lq):
        assert_no_nan_text("last quarter", tiers.last_quarter_summary(lq))
    pilot, _ = tiers.schedule_pilot()
    assert_no_nan_text("schedule pilot", pilot)



def test_the_portability_section_has_no_nan_cells():
    """The reports side by side and each report's estimates: a report made before the table hashes says so in words
    (``portability.NOT_COMPARED``), never with a missing value."""
    from sec_lib.chapters import portability
    shown = portability.page()
    assert_no_nan_text("portability reports", shown.overview)
    for section in shown.sections:
        assert_no_nan_text(section.name, section.table)


NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


@pytest.mark.parametrize("page", ["explore", "tiers", "fairness", "compare"])
def test_the_pages_print_nothing(page):
    """No raw print() on these pages: what a cell says is displayed as Markdown or HTML, not a stdout stream."""
    nb = json.loads((NOTEBOOKS / f"{page}.ipynb").read_text(encoding="utf-8"))
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and not [c for c in code if re.search(r"\bprint\s*\(", c)]
