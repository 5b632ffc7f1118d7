"""Every page's outputs, cell by cell, at two commits: the check that a redesign changed nothing the reader sees.

    python tools/page_outputs.py execute REV OUT [--data-from REV] [--cold] [--only PAGE ...]   # REV's pages -> OUT/nb
    python tools/page_outputs.py compare BEFORE AFTER [--mask-times]          # exit 1 if any output differs

The quick tier's store is shared with whatever else trains into it (a page that counts its runs, such as the tiers
page, sees runs trained since): compare two executions made one after the other, or use ``--cold``.

``execute`` checks REV out into a fresh worktree, overlays ``data/`` (the committed tiers and follow-ups) from
``--data-from`` when given, so that two commits are compared on the same evidence, and runs
``python -m sec_lib.book run --profile cpu`` there with that worktree's own ``sec_lib``. The quick tier's store is
``$SEC_RUNS_DIR`` (the checkout's ``data/runs`` by default); ``--cold`` uses an empty store in OUT instead, so the
quick tier trains from nothing, as on a fresh machine (about 25 minutes on 2 cores). The executed notebooks are
copied to ``OUT/nb``.

``compare`` reads the code cells of each executed notebook in both folders and compares their outputs in order:
the text, HTML, images and widget state each cell shows. What differs between two runs of the same commit is
masked first (:data:`VOLATILE`: memory addresses, temporary paths, widget model ids); it prints each
differing cell with its first differing line, and every page present in one folder only. A cold build trains the
quick tier again, so its wall-clock facts differ from any other build's: ``--mask-times`` masks those too
(:data:`TIMES`), and nothing else.
"""
from __future__ import annotations

import argparse
import base64
import csv
import io
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Patterns masked before outputs are compared: what changes between two runs of the same code on the same data.
VOLATILE = (
    (re.compile(r"0x[0-9a-f]{6,}"), "0x…"),                                   # object addresses in reprs
    (re.compile(r"\b[0-9a-f]{32}\b"), "<id>"),                                # widget model ids (uuid4 hex)
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<id>"),
    (re.compile(r"/tmp/[^\s\"'<>)]*"), "/tmp/…"),                            # scratch folders
)


#: The names of the timing rows of a run's metrics (a run page's table and its CSV download).
TIME_ROWS = ("mean_step_time", "wall_s")
#: With ``--mask-times``: what a cold build measures again, the wall-clock facts of the quick tier it trains anew
#: (its run-hours, a run's seconds and seconds per step, the dates it trained, the size of a table holding them).
#: Everything else a page shows, every metric and every figure, is computed from runs that are bit-identical under
#: the kernel pin, and is compared.
TIMES = (
    (re.compile(r"\b\d[\d,]*(?:\.\d+)? run-hours"), "… run-hours"),
    (re.compile(r"\bit took \d+(?:\.\d+)? (s|min)\b"), r"it took … \1"),
    (re.compile(r"\btrained \d{4}-\d\d-\d\d(?: to \d{4}-\d\d-\d\d)?"), "trained …"),
    # a download's size: the tables hold each run's and step's times, so their compressed size moves by a KB
    (re.compile(r"\(([\w.-]+\.(?:csv|parquet)), \d[\d,]* KB\)"), r"(\1, … KB)"),
    (re.compile(r"(<td>(?:%s)</td>\s*<td class=\"sec-num\">)[^<]*(</td>)"
                % "|".join("_(?:<wbr>)?".join(map(re.escape, row.split("_"))) for row in TIME_ROWS)), r"\1…\2"),
)
_CSV = re.compile(r"data:text/csv;base64,([A-Za-z0-9+/=]+)")
#: Table columns that hold wall-clock facts (the tiers page's run-hours per tier), masked with ``--mask-times`` in
#: a table and in its CSV download.
TIME_COLUMNS = ("run-hours",)
_TABLE = re.compile(r"<table\b.*?</table>", re.S)
_ROW = re.compile(r"<tr\b.*?</tr>", re.S)
_CELL = re.compile(r"(<t[dh]\b[^>]*>)(.*?)(</t[dh]>)", re.S)


def _mask_columns(table: str) -> str:
    """An HTML table with the cells of its :data:`TIME_COLUMNS` masked."""
    head = table.split("</thead>", 1)[0] if "</thead>" in table else ""
    names = [re.sub(r"<[^>]+>", "", c[1]).strip() for c in _CELL.findall(head)]
    cols = [i for i, n in enumerate(names) if n in TIME_COLUMNS]
    if not cols or "</thead>" not in table:
        return table
    body = table.split("</thead>", 1)[1]

    def row(m):
        cells = list(_CELL.finditer(m.group(0)))
        out, last = [], 0
        for i, c in enumerate(cells):
            out.append(m.group(0)[last:c.start()])
            out.append(c.group(1) + ("…" if i in cols else c.group(2)) + c.group(3))
            last = c.end()
        return "".join(out) + m.group(0)[last:]
    return table.split("</thead>", 1)[0] + "</thead>" + _ROW.sub(row, body)


def mask(text: str, times: bool = False) -> str:
    for pattern, repl in VOLATILE + (TIMES if times else ()):
        text = pattern.sub(repl, text)
    if times:
        text = _TABLE.sub(lambda m: _mask_columns(m.group(0)), text)
        text = _CSV.sub(lambda m: "data:text/csv;masked," + _mask_csv(base64.b64decode(m.group(1)).decode()), text)
    return text


def _mask_csv(text: str) -> str:
    """A CSV with the values of its timing rows (:data:`TIME_ROWS`, a run's metrics) and of its timing columns
    (:data:`TIME_COLUMNS`) masked."""
    rows = list(csv.reader(io.StringIO(text)))
    cols = [i for i, n in enumerate(rows[0]) if n in TIME_COLUMNS] if rows else []
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    for k, r in enumerate(rows):
        if r and r[0] in TIME_ROWS:
            r = [r[0], "…"]
        elif k and cols:
            r = ["…" if i in cols else v for i, v in enumerate(r)]
        w.writerow(r)
    return out.getvalue()


def cell_outputs(cell: dict, times: bool = False) -> list[str]:
    """One code cell's outputs as masked text, one entry per output and mime type (images by their base64)."""
    out = []
    for o in cell.get("outputs", []):
        kind = o.get("output_type")
        if kind == "stream":
            out.append(f"stream:{o.get('name')}:" + mask("".join(o.get("text", "")), times))
        elif kind == "error":
            out.append("error:" + mask(f"{o.get('ename')}: {o.get('evalue')}", times))
        else:
            for mime, value in sorted(o.get("data", {}).items()):
                text = value if isinstance(value, str) else ("".join(value) if isinstance(value, list)
                                                             else json.dumps(value, sort_keys=True))
                out.append(f"{kind}:{mime}:" + mask(text, times))
    return out


def page_outputs(path: Path, times: bool = False) -> list[list[str]]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [cell_outputs(c, times) for c in nb["cells"] if c.get("cell_type") == "code"]


def compare(before: Path, after: Path, times: bool = False) -> list[str]:
    """The differences between two folders of executed notebooks (``<folder>/nb/**/*.ipynb`` or ``<folder>/**/*.ipynb``),
    as lines to print; empty when every page's every cell shows the same. ``times``: mask :data:`TIMES` too."""
    def pages(d: Path) -> dict[str, Path]:
        d = d / "nb" if (d / "nb").is_dir() else d
        return {str(p.relative_to(d).with_suffix("")): p for p in sorted(d.rglob("*.ipynb"))
                if not any(part.startswith(".") for part in p.relative_to(d).parts)}      # not a partial .tmp-* file

    a, b = pages(before), pages(after)
    diffs = [f"{name}: only in {before}" for name in sorted(set(a) - set(b))]
    diffs += [f"{name}: only in {after}" for name in sorted(set(b) - set(a))]
    for name in sorted(set(a) & set(b)):
        oa, ob = page_outputs(a[name], times), page_outputs(b[name], times)
        if len(oa) != len(ob):
            diffs.append(f"{name}: {len(oa)} code cells before, {len(ob)} after")
            continue
        for i, (ca, cb) in enumerate(zip(oa, ob)):
            if ca != cb:
                la, lb = "\n".join(ca).splitlines(), "\n".join(cb).splitlines()
                first = next((d for d in difflib.unified_diff(la, lb, lineterm="", n=0)
                              if d[:1] in "+-" and d[:3] not in ("---", "+++")), "(same lines, other order)")
                diffs.append(f"{name}: code cell {i} differs: {first[:200]}")
    return diffs


def execute(rev: str, out: Path, data_from: str | None = None, cold: bool = False, only=()) -> Path:
    """Run every page of ``rev`` (see the module docstring); returns ``out/nb``."""
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="page-outputs-"))
    tree = work / "tree"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(tree), rev], check=True)
    try:
        if data_from:
            subprocess.run(["git", "-C", str(tree), "checkout", data_from, "--", "data/"], check=True)
        for name in ("node_modules",):
            if (REPO / name).exists():
                (tree / name).symlink_to(REPO / name)
        env = dict(os.environ, PYTHONPATH=str(tree))
        env.setdefault("SEC_DATA_DIR", str(REPO / "data"))
        env["SEC_RUNS_DIR"] = str(out / "store") if cold else env.get("SEC_RUNS_DIR", str(REPO / "data" / "runs"))
        subprocess.run([sys.executable, "-m", "sec_lib.book", "run", "--profile", "cpu", "--root", str(tree),
                        *(["--only", *only] if only else [])], cwd=tree, env=env, check=True)
        shutil.rmtree(out / "nb", ignore_errors=True)
        shutil.copytree(tree / "book" / "nb", out / "nb")
        (out / "commit.txt").write_text(subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"],
                                                       capture_output=True, text=True).stdout)
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)
        shutil.rmtree(work, ignore_errors=True)
    return out / "nb"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("execute", help="run every page of a commit into OUT/nb")
    e.add_argument("rev")
    e.add_argument("out", type=Path)
    e.add_argument("--data-from", default=None, help="take data/ (committed tiers and follow-ups) from this commit")
    e.add_argument("--cold", action="store_true", help="an empty quick-tier store in OUT (train from nothing)")
    e.add_argument("--only", nargs="*", default=(), help="only these pages")
    c = sub.add_parser("compare", help="compare two folders of executed pages cell by cell")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    c.add_argument("--mask-times", action="store_true",
                   help="also mask the quick tier's wall-clock facts (run-hours, seconds, dates): for a cold build")
    args = ap.parse_args(argv)
    if args.cmd == "execute":
        print(execute(args.rev, args.out, args.data_from, args.cold, args.only))
        return 0
    for folder in (args.before, args.after):
        if not folder.is_dir():
            print(f"error: {folder} is not a folder of executed notebooks", file=sys.stderr)
            return 2
    diffs = compare(args.before, args.after, args.mask_times)
    for line in diffs:
        print(line)
    n = len({d.split(":")[0] for d in diffs})
    print(f"{n} page(s) differ" if diffs else "every page's outputs are the same, cell by cell")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
