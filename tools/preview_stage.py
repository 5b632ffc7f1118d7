"""Execute chapter pages on a decisive stage that is still training: a developer's check, never the book.

    python tools/preview_stage.py pretrained --sweeps ftrates,pretrained --out /tmp/preview
    python tools/preview_stage.py home claims --sweeps pretrained --out /tmp/preview

A page switches to the decisive tier only once that tier holds every run the page reads
(``sec_lib.chapters.evidence.evidence_profile``), so a page's decisive-tier code paths first run on the day its
stage completes. This runs them earlier: each notebook of ``notebooks/`` named is executed (papermill, in a fresh
kernel) with the pages that read any of ``--sweeps`` forced onto the decisive tier, its missing runs skipped, and
the other pages as the book shows them. It found that the pretrained page refused the decisive tier's
relative-SEC arm, 56 runs before the stage completed.

The executed notebooks and their text (markdown and text outputs, ``<page>.txt``) go to ``--out``, never to
``book/``: their numbers come from a partial stage and mean nothing. Set ``SEC_RUNS_DIR`` to a quick-tier store
for the pages that show the quick tier beside it.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"

#: The cell inserted after the parameters cell: a page that reads any of the forced chapters shows the decisive
#: tier, whatever it holds, and a missing run is skipped instead of stopping the page.
PATCH = """import functools as _ft, sec_lib.chapters.evidence as _e, sec_lib.chapters.common as _cm
_orig_ep = _e.evidence_profile
_e.evidence_profile = lambda profile, chapters, root=None: ('decisive' if set(chapters) & {forced!r}
                                                            else _orig_ep(profile, chapters, root))
_cm.load_runs = _ft.partial(_cm.load_runs, missing="skip")
"""


def page_text(nb: dict) -> str:
    """The markdown cells and the text outputs of an executed notebook, in order (figures as ``[figure]``)."""
    out = []
    for c in nb["cells"]:
        if c["cell_type"] == "markdown":
            out.append("".join(c["source"]))
            continue
        for o in c.get("outputs", []):
            d = o.get("data", {})
            if o.get("output_type") == "stream":
                out.append("".join(o.get("text", "")))
            elif o.get("output_type") == "error":
                out.append(f"ERROR {o.get('ename')}: {o.get('evalue')}")
            elif "text/markdown" in d:
                out.append("".join(d["text/markdown"]))
            elif "image/png" in d:
                out.append("[figure]")
            elif "text/plain" in d:
                out.append("".join(d["text/plain"])[:3000])
    return "\n\n".join(out) + "\n"


def preview(page: str, forced: set[str], out: Path) -> int:
    """Execute ``notebooks/<page>.ipynb`` under :data:`PATCH` into ``out``; papermill's exit status."""
    nb = json.loads((NOTEBOOKS / f"{page}.ipynb").read_text())
    nb["cells"].insert(1, {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                           "id": "preview-stage-patch", "source": [PATCH.format(forced=set(sorted(forced)))]})
    src, dst = out / f"{page}.in.ipynb", out / f"{page}.ipynb"
    src.write_text(json.dumps(nb))
    with open(out / f"{page}.log", "w") as log:
        rc = subprocess.call([sys.executable, "-m", "papermill", str(src), str(dst), "--cwd", str(NOTEBOOKS),
                              "-k", "python3"], stdout=log, stderr=subprocess.STDOUT)
    if dst.exists():
        (out / f"{page}.txt").write_text(page_text(json.loads(dst.read_text())))
    return rc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="+", help="notebook names (notebooks/<name>.ipynb)")
    ap.add_argument("--sweeps", required=True,
                    help="comma-separated chapters (sec_lib.runs.experiments.SWEEPS) whose pages read the "
                         "decisive tier as it is now")
    ap.add_argument("--out", required=True, type=Path, help="a scratch folder (created), not under book/")
    a = ap.parse_args(argv)
    from sec_lib.runs import experiments as ex
    forced = {c for c in a.sweeps.split(",") if c}
    bad = sorted(forced - set(ex.SWEEPS))
    missing = sorted(p for p in a.pages if not (NOTEBOOKS / f"{p}.ipynb").exists())
    if bad or missing or not forced:
        ap.error((f"unknown sweep(s) {bad}; valid: {', '.join(ex.SWEEPS)}. " if bad or not forced else "")
                 + (f"no notebook for {missing}; valid: {', '.join(sorted(p.stem for p in NOTEBOOKS.glob('*.ipynb')))}"
                    if missing else ""))
    if (ROOT / "book") in a.out.resolve().parents or a.out.resolve() == ROOT / "book":
        ap.error("--out must not be under book/: a preview's numbers come from a partial stage")
    a.out.mkdir(parents=True, exist_ok=True)
    worst = 0
    for page in a.pages:
        rc = preview(page, forced, a.out)
        log, text = a.out / f"{page}.log", a.out / f"{page}.txt"
        print(f"{page}: {'ok' if rc == 0 else f'failed (rc {rc}; see {log})'}; text in {text}")
        worst = max(worst, rc)
    return worst


if __name__ == "__main__":
    sys.exit(main())
