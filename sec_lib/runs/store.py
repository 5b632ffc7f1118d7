"""The result store: one folder per run, keyed by a hash of its config, written atomically and verified on every read.

Layout of ``<root>/<key>/`` (``key``: 16 lowercase hex digits, :func:`run_key`)::

    config.json     the TrainConfig
    result.json     status, final metrics, error message, wall time, provenance
    steps.parquet   per-step log            tracked.parquet  tracked samples' norms
    evals.parquet   periodic test metrics   test_norms.parquet, cosines.parquet, grad_scatter.parquet
    manifest.json   size and sha256 of every file above (written last)

Writing (safe with any number of writers and readers, on a local or a shared network disk; no locks): a run is
written into a unique ``<root>/.tmp-<key>-<host>-<pid>-<random>/`` folder and published by one ``os.rename`` of
that folder to ``<root>/<key>``. A rename onto an existing, non-empty folder fails, so a published record is
never deleted or overwritten under a reader: when the key already holds a complete record the second writer
discards its copy and keeps the stored one (a failed run is replaced by a finished one only when asked,
``replace=True``: the old record is renamed aside first). A record that is there but corrupt is moved to
quarantine first.

Reading: :meth:`ResultStore.has` checks the manifest's file sizes; :meth:`ResultStore.get` reads every file
once, checks it against the manifest's sha256, then parses the tables asked for from the bytes it checked (so a
record replaced mid-read cannot give a mix of two records), checks that the metrics are numbers (finite, or
NaN). A record that fails is reported (log warning naming the key, the path and the reason), moved to
``<root>/.quarantine/<key>-<timestamp>/`` and treated as missing, so the runner trains it again. Records written
before manifests existed are accepted when every file loads and the metrics check out; a manifest is then added
to them (atomically), so the cheap check applies next time.
"""
from __future__ import annotations

import datetime
import errno
import hashlib
import io
import json
import logging
import math
import os
import re
import shutil
import tempfile
import uuid
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import pandas as pd

from ..params import ParameterError
from ..tempfiles import clear_partial_runs, temp_prefix
from .provenance import provenance
from .config import RunResult, TrainConfig, failed_step_of, run_key, with_schema
from .train import train

log = logging.getLogger(__name__)

TABLES = ("steps", "tracked", "evals", "test_norms", "cosines", "grad_scatter")
FILES = ("config.json", *(f"{t}.parquet" for t in TABLES), "result.json")
MANIFEST = "manifest.json"
QUARANTINE = ".quarantine"
STATUSES = ("done", "failed")
_KEY = re.compile(r"[0-9a-f]{16}")


class CorruptRecord(ValueError):
    """A stored run that is incomplete or damaged (the message names its key, path and the problem)."""

    def __init__(self, key: str, path: Path, reason: str):
        super().__init__(f"stored run {key} at {path} is corrupt: {reason}")
        self.key, self.path, self.reason = key, Path(path), reason


def default_root() -> Path:
    """``$SEC_RUNS_DIR`` if set, else ``data/runs`` under the repository (or the current directory)."""
    env = os.environ.get("SEC_RUNS_DIR")
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parents[2]
    base = repo if (repo / "pyproject.toml").exists() else Path.cwd()
    return base / "data" / "runs"


def check_key(key) -> str:
    """``key`` if it is a well-formed store key (16 lowercase hex digits), else ParameterError."""
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise ParameterError(f"store key {key!r} is not valid; expected 16 lowercase hex digits (a run_key)")
    return key


def check_metrics(metrics) -> dict:
    """``metrics`` if it maps names to numbers that are finite or NaN, else ValueError naming the bad one."""
    if not isinstance(metrics, dict):
        raise ValueError(f"metrics is a {type(metrics).__name__}, not a mapping of names to numbers")
    for name, v in metrics.items():
        if not isinstance(name, str) or isinstance(v, bool) or not isinstance(v, (int, float)) or math.isinf(v):
            raise ValueError(f"metric {name!r} = {v!r} is not a finite number or NaN")
    return metrics


def _manifest(blobs: dict) -> bytes:
    files = {name: {"size": len(b), "sha256": hashlib.sha256(b).hexdigest()} for name, b in blobs.items()}
    return json.dumps({"version": 1, "files": files}, indent=1, sort_keys=True).encode()


def _write(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())            # on disk (or the server) before the folder is published


def _timestamp() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")


class ResultStore:
    """Reads and writes runs under ``root`` (default: :func:`default_root`).

    ``quarantined`` lists (key, path, reason, moved_to) of the corrupt records this object moved
    aside; a caller (the runner) reports them.
    """

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else default_root()
        self.quarantined: list[tuple[str, Path, str, Path]] = []

    def path(self, cfg_or_key) -> Path:
        """The folder of a run, from its config or its key (16 lowercase hex digits; nothing else)."""
        key = check_key(cfg_or_key) if isinstance(cfg_or_key, str) else run_key(cfg_or_key)
        return self.root / key

    # -- reading ------------------------------------------------------------------------------
    def has(self, cfg_or_key) -> bool:
        """Whether a complete record is stored: every file the manifest lists, with its size (no
        checksums; :meth:`get` checks those). A record that fails is quarantined: False."""
        return self._verified(cfg_or_key, full=False) is not None

    def get(self, cfg_or_key, tables: Iterable[str] = TABLES) -> RunResult | None:
        """The stored result, checked against its manifest; None when absent or corrupt (quarantined).

        ``tables``: the per-run tables the caller needs; the others come back empty. Every store has this
        ``get`` (the committed tier, :class:`sec_lib.runs.tier.TierStore`, then reads only those tables); here
        every file is checked against the manifest and only those tables are parsed (:meth:`_read`)."""
        unknown = set(tables := tuple(tables)) - set(TABLES)
        if unknown:
            raise ValueError(f"unknown tables {sorted(unknown)}; valid: {', '.join(TABLES)}")
        out = self._verified(cfg_or_key, full=True, tables=tables)
        if not isinstance(out, RunResult):
            return None
        return dataclasses.replace(out, **{t: pd.DataFrame() for t in TABLES if t not in tables})

    def meta(self, key: str) -> dict:
        """The record's result.json (status, metrics, error, wall time, provenance); check it first
        with :meth:`has` or :meth:`get`."""
        return json.loads((self.path(key) / "result.json").read_text())

    def load(self, path: str | Path) -> RunResult:
        """Read one record folder, fully checked; raises :class:`CorruptRecord` (nothing is moved)."""
        path = Path(path)
        return self._read(path, path.name)

    def _verified(self, cfg_or_key, full: bool, tables: tuple = TABLES):
        p = self.path(cfg_or_key)
        key = p.name
        for _ in range(5):
            if not os.path.lexists(p):
                return None
            try:
                if not full and self._sizes_match(p, key):
                    return True
                return self._read(p, key, upgrade=True, tables=tables)
            except CorruptRecord as e:
                if self._quarantine(p, key, e.reason):
                    return None
                # the record changed while we read it (a writer replaced it): read it again
        return None

    def _sizes_match(self, p: Path, key: str) -> bool:
        """True if the manifest's files are all there with their sizes; False if there is no manifest
        (an older record: the caller reads it fully). CorruptRecord otherwise."""
        try:
            manifest = self._parse_manifest(p, key, (p / MANIFEST).read_bytes())
        except FileNotFoundError:
            if not p.is_dir():
                raise CorruptRecord(key, p, "not a folder") from None
            return False
        except OSError as e:
            raise CorruptRecord(key, p, f"{MANIFEST} cannot be read ({e})") from None
        for name, entry in manifest.items():
            try:
                size = (p / name).stat().st_size
            except OSError:
                raise CorruptRecord(key, p, f"{name} is missing") from None
            if size != entry["size"]:
                raise CorruptRecord(key, p, f"{name} has {size} bytes, the manifest says {entry['size']}")
        return True

    @staticmethod
    def _parse_manifest(p: Path, key: str, data: bytes) -> dict:
        try:
            files = json.loads(data.decode())["files"]
            ok = (set(files) == set(FILES) and all(isinstance(e["size"], int) and isinstance(e["sha256"], str)
                                                    for e in files.values()))
        except (ValueError, KeyError, TypeError, AttributeError):
            ok = False
        if not ok:
            raise CorruptRecord(key, p, f"{MANIFEST} is not a valid manifest")
        return files

    def _read(self, p: Path, key: str, upgrade: bool = False, tables: tuple = TABLES) -> RunResult:
        """Read every file once, check it against the manifest, then parse the checked bytes: ``tables`` (the
        others, empty, matched their sha256), or all of a record without a manifest (parsing is its check)."""
        try:
            manifest = self._parse_manifest(p, key, (p / MANIFEST).read_bytes())
        except FileNotFoundError:
            manifest = None               # written before manifests: accepted if everything loads
        except OSError as e:
            raise CorruptRecord(key, p, f"{MANIFEST} cannot be read ({e})") from None
        blobs = {}
        for name in FILES:
            try:
                blobs[name] = (p / name).read_bytes()
            except FileNotFoundError:
                raise CorruptRecord(key, p, f"{name} is missing") from None
            except OSError as e:
                raise CorruptRecord(key, p, f"{name} cannot be read ({e})") from None
            if manifest is not None:
                want = manifest[name]
                if len(blobs[name]) != want["size"]:
                    raise CorruptRecord(key, p, f"{name} has {len(blobs[name])} bytes, the manifest says {want['size']}")
                if hashlib.sha256(blobs[name]).hexdigest() != want["sha256"]:
                    raise CorruptRecord(key, p, f"{name} does not match its sha256 in the manifest")
        result = self._parse(p, key, blobs, TABLES if manifest is None else tables)
        if manifest is None and upgrade:
            self._add_manifest(p, blobs)
        return result

    @staticmethod
    def _parse(p: Path, key: str, blobs: dict, wanted: tuple = TABLES) -> RunResult:
        def bad(name, e):
            return CorruptRecord(key, p, f"{name}: {type(e).__name__}: {e}")
        try:
            cfg = TrainConfig.from_dict(json.loads(blobs["config.json"].decode()))
        except Exception as e:  # noqa: BLE001 - any failure to parse means a damaged file
            raise bad("config.json", e) from None
        try:
            meta = json.loads(blobs["result.json"].decode())
            if not isinstance(meta, dict):
                raise ValueError(f"expected an object, got {type(meta).__name__}")
            if meta.get("status") not in STATUSES:
                raise ValueError(f"status {meta.get('status')!r} is not one of {STATUSES}")
            check_metrics(meta.get("metrics"))
            if meta.get("key", key) != key:
                raise ValueError(f"it is the record of key {meta.get('key')!r}")
            if not isinstance(meta.get("error"), (str, type(None))):
                raise ValueError(f"error {meta.get('error')!r} is not a string")
            wall = meta.get("wall_s", 0.0)
            if isinstance(wall, bool) or not isinstance(wall, (int, float)):
                raise ValueError(f"wall_s {wall!r} is not a number")
            step = meta.get("failed_step")
            if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
                raise ValueError(f"failed_step {step!r} is not an integer")
        except Exception as e:  # noqa: BLE001
            raise bad("result.json", e) from None
        tables = {t: pd.DataFrame() for t in TABLES}
        wanted = set(wanted) | ({"steps"} if meta["status"] == "failed" and step is None else set())
        for t in (t for t in TABLES if t in wanted):
            try:
                tables[t] = with_schema(pd.read_parquet(io.BytesIO(blobs[f"{t}.parquet"])), t, cfg)
            except Exception as e:  # noqa: BLE001
                raise bad(f"{t}.parquet", e) from None
        if meta["status"] == "failed" and step is None:
            step = failed_step_of(tables["steps"])
        return RunResult(cfg, meta["status"], meta["metrics"], tables["steps"], tables["tracked"], tables["evals"],
                         tables["test_norms"], tables["cosines"], tables["grad_scatter"], error=meta.get("error"),
                         wall_s=float(wall), key=key, failed_step=step)

    def _add_manifest(self, p: Path, blobs: dict) -> None:
        """Give an older record (checked by a full load) its manifest, atomically; best effort."""
        tmp = p / f"{temp_prefix()}{uuid.uuid4().hex[:8]}.json"
        try:
            _write(tmp, _manifest(blobs))
            os.replace(tmp, p / MANIFEST)
        except OSError:
            try:
                tmp.unlink()
            except OSError:
                pass

    def _quarantine(self, p: Path, key: str, reason: str) -> bool:
        """Move the record at ``p`` to ``<root>/.quarantine/<key>-<timestamp>/``. True when it was
        corrupt and moved; False when it had changed under the reader (gone, or complete once moved:
        then it is put back), so the caller reads it again."""
        qroot = self.root / QUARANTINE
        dest = qroot / f"{key}-{_timestamp()}-{uuid.uuid4().hex[:6]}"
        try:
            qroot.mkdir(parents=True, exist_ok=True)
            os.rename(p, dest)
        except FileNotFoundError:
            return False                  # another process moved it first
        except OSError as e:              # e.g. a read-only store: report it, leave it, count it as missing
            log.warning("stored run %s at %s is corrupt (%s) and cannot be moved to %s (%s); it is treated as "
                        "missing", key, p, reason, qroot, e)
            self.quarantined.append((key, p, reason, p))
            return True
        try:
            self._read(dest, key)          # complete after all: a writer replaced it mid-read
        except CorruptRecord:
            log.warning("stored run %s at %s is corrupt (%s); moved to %s, it will be trained again",
                        key, p, reason, dest)
            self.quarantined.append((key, p, reason, dest))
            return True
        try:
            os.rename(dest, p)
        except OSError:                    # a newer record took the place: this copy is redundant
            shutil.rmtree(dest, ignore_errors=True)
        return False

    # -- writing ------------------------------------------------------------------------------
    def save(self, result: RunResult, replace: bool = False, provenance_: dict | None = None) -> Path:
        """Write atomically and publish with one rename; never deletes a complete record under a reader.

        If the key already holds a complete record, it is kept and this copy discarded, unless
        ``replace`` (a retried failed run): then the stored record is renamed aside and this one
        published. A corrupt record in the way is quarantined first. ``provenance_`` (default:
        this machine, now) is where and when the run trained: a run restored from a committed
        tier keeps the provenance it was committed with.
        """
        key = run_key(result.config)
        check_metrics(result.metrics)
        final = self.root / key
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(key), dir=self.root))
        try:
            blobs = {"config.json": json.dumps(result.config.to_dict(), indent=1, sort_keys=True,
                                               default=str).encode()}
            for t in TABLES:
                buf = io.BytesIO()
                getattr(result, t).to_parquet(buf, index=False)
                blobs[f"{t}.parquet"] = buf.getvalue()
            meta = {"key": key, "status": result.status, "metrics": result.metrics, "error": result.error,
                    "failed_step": result.failed_step, "wall_s": result.wall_s,
                    "provenance": provenance_ if provenance_ is not None else provenance(result.config)}
            blobs["result.json"] = json.dumps(meta, indent=1, default=float).encode()
            for name in FILES:
                _write(tmp / name, blobs[name])
            _write(tmp / MANIFEST, _manifest(blobs))       # last: its presence means the rest is there
            self._publish(tmp, final, key, replace)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        result.key = key
        return final

    def _publish(self, tmp: Path, final: Path, key: str, replace: bool) -> None:
        for _ in range(20):
            try:
                os.rename(tmp, final)          # fails if ``final`` is a non-empty folder
                return
            except OSError as e:
                taken = isinstance(e, FileExistsError) or e.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR,
                                                                      errno.EACCES)
                if not taken:
                    raise
                if not os.path.lexists(final):
                    if e.errno == errno.EACCES:
                        raise                   # no record in the way: the store itself is not writable
                    continue                    # a replacing writer moved the record aside meanwhile: try again
            try:
                self._read(final, key, upgrade=True)
            except CorruptRecord as e:
                self._quarantine(final, key, e.reason)
                continue                        # the place is free (or holds a fresh record): try again
            if not replace:
                shutil.rmtree(tmp, ignore_errors=True)     # keep the complete record that is there
                return
            aside = self.root / f"{temp_prefix(key)}old_{uuid.uuid4().hex[:8]}"
            try:
                os.rename(final, aside)
            except FileNotFoundError:
                continue
            replace = False                     # replace one record at most, then publish or keep
            shutil.rmtree(aside, ignore_errors=True)
        raise OSError(f"could not publish run {key} into {final}: the folder kept changing")

    # -- running ------------------------------------------------------------------------------
    def run(self, cfg: TrainConfig, retry_failed: bool = False, progress=None) -> RunResult:
        """Return the stored result for ``cfg``, training (and storing) it first if needed (or if the
        stored record is corrupt: it is quarantined and trained again)."""
        cfg.validate()
        stored = self.get(cfg)
        if stored is not None and (stored.status == "done" or not retry_failed):
            return stored
        result = train(cfg, progress=progress)
        self.save(result, replace=stored is not None)
        return result

    def keys(self) -> list[str]:
        """Keys of the complete records (manifest sizes checked; corrupt ones are quarantined)."""
        if not self.root.exists():
            return []
        return sorted(p.name for p in self.root.iterdir() if _KEY.fullmatch(p.name) and self.has(p.name))

    def clean_partial(self) -> int:
        """Remove the temporary folders that interrupted writers left (:mod:`sec_lib.tempfiles`:
        never one a live process may still be writing); return how many."""
        return clear_partial_runs(self.root)


@dataclass
class Frames:
    """Tidy tables over many runs; every table carries the run ``key``."""
    runs: pd.DataFrame
    steps: pd.DataFrame
    tracked: pd.DataFrame
    evals: pd.DataFrame
    test_norms: pd.DataFrame
    cosines: pd.DataFrame
    grad_scatter: pd.DataFrame


RUN_COLUMNS = ("dataset", "model", "width", "head", "embed_dim", "loss", "optimizer", "lr", "eta", "mu",
               "momentum", "seed", "iterations", "batch_size", "image_size", "device")


def results_to_frames(results: Iterable[RunResult], tables: Iterable[str] = TABLES) -> Frames:
    """Tidy frames from RunResults (the order of ``results`` is kept)."""
    tables = tuple(tables)
    rows, parts = [], {t: [] for t in TABLES}
    for r in results:
        key = r.key or run_key(r.config)
        c = r.config
        row = {"key": key, "status": r.status, **{k: getattr(c, k) for k in RUN_COLUMNS},
               "mu": str(c.mu), "variant": c.variant, "wall_s": r.wall_s, "error": r.error, **r.metrics}
        rows.append(row)
        for t in tables:
            parts[t].append(with_schema(getattr(r, t), t, c).assign(key=key))
    runs = pd.DataFrame(rows)
    out = {t: _concat(parts[t]) for t in TABLES}
    return Frames(runs=runs, **out)


def _concat(frames: list) -> pd.DataFrame:
    """Stack the runs' tables; empty ones (failed runs) add their columns but no rows."""
    full = [f for f in frames if len(f)]
    if not full:
        cols = list(dict.fromkeys(c for f in frames for c in f.columns)) or ["key"]
        return pd.DataFrame({c: pd.Series(dtype=frames[0][c].dtype if frames and c in frames[0] else object)
                             for c in cols})
    out = pd.concat(full, ignore_index=True)
    extra = [c for f in frames for c in f.columns if c not in out.columns]
    for c in dict.fromkeys(extra):
        out[c] = pd.Series(index=out.index, dtype="float64")
    return out


def load_runs(configs: Iterable[TrainConfig] | None = None, root: str | Path | None = None,
              tables: Iterable[str] = TABLES, missing: str = "error", store=None) -> Frames:
    """Tidy frames of stored runs: the given configs (in order), or every run under ``root``.

    ``missing``: 'error' raises KeyError naming configs that are not in the store, 'skip' leaves them out.
    A corrupt record counts as missing (it is reported and quarantined). ``store``: any object with
    the store's ``get``/``keys``/``root`` (a committed tier, :class:`sec_lib.runs.tier.TierStore`);
    default ``ResultStore(root)``.
    """
    if missing not in ("error", "skip"):
        raise ValueError(f"missing = {missing!r} is not valid; valid values: 'error', 'skip'")
    store = store if store is not None else ResultStore(root)
    if configs is None:
        results = [r for r in (store.get(k) for k in store.keys()) if r is not None]
    else:
        results, absent = [], []
        tables = tuple(tables)
        for cfg in configs:
            r = store.get(cfg, tables=tables)
            (results.append(r) if r is not None else absent.append(cfg))
        if absent and missing == "error":
            raise KeyError(f"{len(absent)} run(s) not in the store {store.root}, e.g. {absent[0]}; "
                           "run them first (python -m sec_lib.book run) or pass missing='skip'")
    return results_to_frames(results, tables)
