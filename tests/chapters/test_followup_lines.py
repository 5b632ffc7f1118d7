"""The lines that name the registered follow-ups outside their own sections: on the landing page
(sec_lib.chapters.home), one sentence counts the committed runs of those still training, and a complete one leaves it
(its own sentence then sits under the answer); on the scorecard (sec_lib.chapters.claims.followup_state), each says how
far it is, then where its verdict is; the counts are the committed parquet files' rows."""
import pandas as pd

from sec_lib.chapters import home, scorecard
from sec_lib.runs import longruns


def _status(c4l, c4w, p1c=(0, 160)):
    return [{"question": q, "id": i, "folder": f"data/followups/{i}/", "committed": k, "runs": n, "readme": f"{i}?"}
            for q, i, (k, n) in (("C4", "C4L", c4l), ("C4", "C4W", c4w), ("P1", "P1c", p1c))]


def test_the_sentence_counts_only_the_follow_ups_still_training(monkeypatch):
    monkeypatch.setattr(home, "followup_status", lambda root=None: _status((42, 60), (0, 40)))
    said = home.followups_sentence()
    assert said.startswith("Two registered follow-ups test this estimate")
    assert "C4L (C4L?): 42 of 60 runs committed; C4W (C4W?): 0 of 40 runs committed" in said
    assert said.endswith("Their verdicts join the answer once all their runs are committed.")
    assert "P1c" not in said                          # it follows up another question
    monkeypatch.setattr(home, "followup_status", lambda root=None: _status((60, 60), (12, 40)))
    said = home.followups_sentence()
    assert said.startswith("A registered follow-up tests this estimate") and "C4L" not in said
    assert "C4W (C4W?): 12 of 40 runs committed" in said and said.endswith("once all its runs are committed.")
    monkeypatch.setattr(home, "followup_status", lambda root=None: _status((60, 60), (40, 40)))
    assert home.followups_sentence() == ""
    monkeypatch.setattr(home, "followup_status", lambda root=None: _status((60, 60), (0, 0)))
    assert "C4W" in home.followups_sentence()         # a plan not yet known is not a complete one


def test_the_status_counts_the_committed_runs_of_each_folder():
    rows = {f["id"]: f for f in scorecard.followup_status()}
    path = longruns.folder() / "test" / "runs.parquet"
    have = len(pd.read_parquet(path, columns=["key"])) if path.exists() else 0
    assert rows["C4L"]["committed"] == have and rows["C4L"]["runs"] == 60
    assert rows["C4W"]["runs"] == 40 and rows["C4L"]["question"] == rows["C4W"]["question"] == "C4"


def test_the_landing_notebook_puts_the_brief_under_the_answer_and_the_sentences_below_the_figure():
    from pathlib import Path
    nb = (Path(__file__).resolve().parents[2] / "notebooks" / "home.ipynb").read_text(encoding="utf-8")
    order = [nb.index(s) for s in ("home.answer_block(", "home.followup_brief(T)", "results.headline_figure(",
                                   "home.answer_details(", "home.longer_runs_sentence(T)",
                                   "home.weight_decay_sentence(T)", "home.followups_sentence()")]
    assert order == sorted(order)


def test_the_brief_joins_the_complete_follow_ups_lines_on_the_decisive_tier_only(monkeypatch):
    from sec_lib.chapters import compare_weightdecay, convergence_length
    monkeypatch.setattr(convergence_length, "landing_brief", lambda root=None: "Longer.")
    monkeypatch.setattr(compare_weightdecay, "landing_brief",
                        lambda tier, root=None: "Decayed." if tier == "decisive" else "")
    assert home.followup_brief("decisive") == "Longer. Decayed."
    assert home.followup_brief("cpu") == ""
    monkeypatch.setattr(convergence_length, "landing_brief", lambda root=None: "")
    assert home.followup_brief("decisive") == "Decayed."


def test_the_scorecard_line_counts_then_points_to_the_verdict(tmp_path, monkeypatch):
    from sec_lib.chapters import claims
    k = _status((42, 60), (0, 0), (160, 160))
    assert claims.followup_state(k[0], set()) == "42 of 60 runs committed, no verdict until all are."
    assert claims.followup_state(k[1], set()) == "0 of its runs committed, no verdict until all are."
    assert claims.followup_state(k[2], {"P1c"}) == ('all 160 runs committed; its verdict is its own row, '
                                                    '<a href="#claim-P1c">P1c</a>.')
    assert claims.followup_state(k[2], set()) == "all 160 runs committed; its verdict is on the page that owns its question."
    # after the follow-up's question, its state starts a sentence; after a statement, it follows a semicolon
    assert claims.then("does SEC gain less?", "all 160 runs committed.") == "does SEC gain less? All 160 runs committed."
    assert claims.then("the same runs, longer", "42 of 60 runs committed.") == "the same runs, longer; 42 of 60 runs committed."
    # C4L complete: its primary's Δ and registered verdict, from its own runs (hand-made, known to read "stable")
    from test_convergence_length import CASES, _expected, _repo
    root = _repo(tmp_path, *CASES["stable"])
    m, lo, hi = _expected(root)["SEC − none"]["delta"]
    said = claims.followup_state(_status((60, 60), (0, 40))[0], set(), root)
    assert said == (f"all 60 runs committed: SEC − none changes by Δ = {m:+.2f} R@1 points from 13,500 to 20,250 "
                    f"iterations (95% CI [{lo:+.2f}, {hi:+.2f}]) → <b>stable</b> (<a href=\"convergence.html\">the "
                    "convergence page</a>).")


def test_c4w_folds_beneath_the_primary_test_and_p1c_decides_p1s_question():
    """Once their claims are on the scorecard, C4W (another question: over weight decay) lies under the primary
    test's question, which the primary test still decides; P1c, the same question on fresh seeds, decides P1's, as
    its registration says ("P1 reads ..."), with P1's row, which keeps its verdict, beneath it. Without them, P1 is
    the question it was (its own words)."""
    def table(ids):
        return pd.DataFrame([{"claim": i, "text": f"{i}'s words", "verdict": v, "tier": "decisive"}
                             for i, v in ids])
    statement = next(q for k, q, _, _ in scorecard.QUESTIONS if k == "P1")
    from sec_lib.chapters import pretrained
    assert statement == next(c.claim for c in pretrained.CLAIMS if c.id == "P1")
    with_them = scorecard.questions(table([("C4v", "smaller than claimed"), ("C4W", "inconclusive"),
                                           ("P1", "inconclusive"), ("P1c", "not reproduced")])).set_index("key")
    assert with_them.loc["C4", "decides"] == "C4v" and with_them.loc["C4", "beneath"] == ["C4W"]
    assert with_them.loc["P1", "decides"] == "P1c" and with_them.loc["P1", "beneath"] == ["P1"]
    assert with_them.loc["P1", "question"] == statement and with_them.loc["P1", "group"] == "fails"
    assert with_them.loc["P1", "n_rows"] == 2
    without = scorecard.questions(table([("C4v", "smaller than claimed"), ("P1", "inconclusive")])).set_index("key")
    assert without.loc["P1", "beneath"] == [] and without.loc["C4", "beneath"] == []
    assert without.loc["P1", "decides"] == "P1" and without.loc["P1", "group"] == "undecided"
