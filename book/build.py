"""The book runner: execute notebooks with papermill, collect claims, generate the scoreboard, build the HTML.

Used by the Makefile::

    python book/build.py book [--quick] [--jobs N]          # everything: run, scoreboard, html, checks, table
    python book/build.py run NB [NB ...] [--quick] [--seed N] [--force]
    python book/build.py html [--quick] [--seed N]           # scoreboard + jupyter-book build of the stage
    python book/build.py check-html [--quick]                # the built site: pages, no errors, figures
    python book/build.py check-repo                          # jupytext pairs in sync, no committed outputs

The committed notebooks are never executed in place: papermill writes into a *stage*, a copy of the book
(``_build/executed`` at default parameters, ``_build/quick/executed`` in quick mode), and the stage is what
``jupyter-book build`` renders, with execution off. Each notebook's claims record lands in the stage's
``results/`` folder (``_build/results`` and ``_build/quick/results``). A run with ``--seed N`` has a stage of its
own (``_build/seed<N>``, ``_build/quick/seed<N>``), so it never overwrites the default stage's numbers.

A notebook whose ``.ipynb`` is out of sync with its reviewed ``.py`` twin is refused (``make sync`` fixes it). Each
run is timed in wall seconds and in CPU seconds of the kernel's process tree; over its budget (60 s quick, 300 s
default) is a warning in the summary table, and only past twice its budget in CPU seconds does a notebook fail (a
hang guard, which stops the kernel there). ``check-repo`` also reports visible code cells over 60 lines and decimal
numbers typed into markdown cells, per chapter, against allowances that may only go down (``book/repo_baseline.json``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from helpers.claims import VERDICTS  # noqa: E402  (the verdict categories: the tables show one column each)

NOTEBOOKS = ROOT / "notebooks"
BUILD = ROOT / "_build"
VENDOR = ROOT / "book" / "_vendor"

# Client-side libraries served from the site itself so that widgets and maths render offline.
NPM_PACKAGES = {
    "html-manager": "@jupyter-widgets/html-manager@1.0.15",
    "requirejs": "requirejs@2.3.8",
    "mathjax": "mathjax@3.2.2",
}

QUICK_TIMEOUT_S = 60  # the contract: quick mode runs in at most 60 s ...
DEFAULT_TIMEOUT_S = 300  # ... and the default in at most 5 minutes (on 2 cores, alone)
# Budgets report, they do not flake: a notebook over its budget in wall or CPU seconds is a warning in the summary
# table (a loaded machine stretches wall time); it fails only when its kernel's process tree has used more than
# HANG_FACTOR times its budget in CPU seconds (a hang guard: the kernel is stopped there).
HANG_FACTOR = 2
# A hung cell is killed after this long and the notebook retried once. (The known hang, papermill on an ipywidgets
# `interactive` cell, is gone: the runner sets HELPERS_NO_FRONTEND=1 and `plotting.live_controls` then creates no
# widget.) No cell of a 5-minute chapter may need 10 minutes.
CELL_TIMEOUT_S = {True: 180, False: 600}


# --------------------------------------------------------------------------------------------------------------
# Stages and the table of contents
# --------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stage:
    quick: bool
    seed: int | None = None

    @property
    def base(self) -> Path:
        base = BUILD / "quick" if self.quick else BUILD
        return base / f"seed{self.seed}" if self.seed is not None else base

    @property
    def executed(self) -> Path:
        return self.base / "executed"

    @property
    def results(self) -> Path:
        return self.base / "results"

    @property
    def cache(self) -> Path:
        return self.base / "cache"

    @property
    def html(self) -> Path:
        return self.base / "html"


def toc_entries(toc_path: Path = ROOT / "_toc.yml") -> list[str]:
    """Every ``file:`` of ``_toc.yml`` (root included), in reading order, without suffix."""
    import yaml

    toc = yaml.safe_load(toc_path.read_text())
    out: list[str] = [toc["root"]]

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "file" in node:
                out.append(node["file"])
            for key in ("parts", "chapters", "sections"):
                for child in node.get(key, []) or []:
                    walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(toc)
    return [re.sub(r"\.(md|ipynb)$", "", f) for f in out]


def toc_notebooks() -> list[str]:
    """Slugs of the notebooks listed in ``_toc.yml``."""
    return [Path(e).name for e in toc_entries() if e.startswith("notebooks/")]


# --------------------------------------------------------------------------------------------------------------
# Executing notebooks
# --------------------------------------------------------------------------------------------------------------
@dataclass
class RunResult:
    slug: str
    ok: bool
    seconds: float = 0.0
    cached: bool = False
    retried: bool = False
    checks: str = ""
    claims: str = ""
    error: str = ""
    over_budget: bool = False  # over the budget in wall or CPU seconds: a warning (see judge_budget)
    counts: dict | None = None
    cpu_seconds: float = 0.0  # CPU seconds of the kernel's process tree (both attempts, after a retry)
    warning: str = ""


def budget_s(quick: bool) -> int:
    """A notebook's time budget: 60 s in quick mode, 300 s at default parameters."""
    return QUICK_TIMEOUT_S if quick else DEFAULT_TIMEOUT_S


def judge_budget(cpu_s: float, wall_s: float, quick: bool) -> tuple[str | None, str]:
    """(why the run fails, or None; a warning, or "") for a notebook that used ``cpu_s`` CPU seconds (its kernel's
    process tree) and ``wall_s`` wall seconds. Only CPU past ``HANG_FACTOR`` x the budget fails (a hang guard);
    over the budget in wall or CPU seconds is a warning: a loaded machine stretches wall time, not the work."""
    budget = budget_s(quick)
    if cpu_s > HANG_FACTOR * budget:
        return (f"hang guard: the kernel used {cpu_s:.0f} CPU s, past {HANG_FACTOR}x the {budget} s budget "
                f"({HANG_FACTOR * budget} s)"), ""
    over = []
    if wall_s > budget:
        over.append(f"{wall_s:.0f} s wall")
    if cpu_s > budget:
        over.append(f"{cpu_s:.0f} s CPU")
    return None, (f"over the {budget} s budget: {', '.join(over)}" if over else "")


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's children that have ended and been waited for."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


class HangGuard:
    """Measures the CPU seconds of the processes a notebook run starts (the kernel and whatever it starts), and
    stops them once they pass ``limit_s``.

    Ended processes are counted through ``getrusage(RUSAGE_CHILDREN)`` (the kernel's own children roll up into it
    when the kernel ends); live ones through psutil, polled every ``every`` seconds. Processes that were already
    children of this process when the guard started are not counted.
    """

    def __init__(self, limit_s: float, every: float = 2.0):
        self.limit_s, self.every = limit_s, every
        self.tripped = False
        self._stop = threading.Event()

    def __enter__(self) -> HangGuard:
        self._cpu0 = _children_cpu()
        self._old = {p.pid for p in self._children()}
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @staticmethod
    def _children() -> list:
        try:
            import psutil
        except ImportError:  # pragma: no cover - psutil is pinned; without it only ended processes count
            return []
        try:
            return psutil.Process().children(recursive=True)
        except psutil.Error:  # pragma: no cover
            return []

    def _live(self) -> tuple[float, list]:
        total, procs = 0.0, []
        for p in self._children():
            if p.pid in self._old:
                continue
            try:
                t = p.cpu_times()
                total += t.user + t.system
                procs.append(p)
            except Exception:  # ended in between (then counted by RUSAGE_CHILDREN) or not ours to read
                continue
        return total, procs

    def cpu_seconds(self) -> float:
        """CPU seconds used so far by the processes started since the guard began (ended and live)."""
        return _children_cpu() - self._cpu0 + self._live()[0]

    def _watch(self) -> None:
        while not self._stop.wait(self.every):
            live, procs = self._live()
            if _children_cpu() - self._cpu0 + live > self.limit_s:
                self.tripped = True
                for p in procs:
                    try:
                        p.kill()
                    except Exception:
                        pass
                return


def _hash_tree(h: hashlib._Hash, path: Path) -> None:
    if not path.exists():
        return
    for p in sorted(path.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc"):
            h.update(str(p.relative_to(ROOT)).encode())
            h.update(p.read_bytes())


def _hash_entries(h: hashlib._Hash, folder: Path, skip) -> None:
    """Hash the files and subfolders directly in ``folder``, leaving out those for which ``skip(path)`` is true."""
    for p in sorted(folder.iterdir()) if folder.exists() else []:
        if skip(p):
            continue
        if p.is_dir():
            _hash_tree(h, p)
        else:
            h.update(p.name.encode())
            h.update(p.read_bytes())


def _chapter_module(slug: str) -> str:
    """The helpers module of a chapter: ``02_tree_training`` -> ``tree_training``."""
    return slug.split("_", 1)[1] if re.match(r"^\d+_", slug) else slug


def input_key(slug: str, params: dict) -> str:
    """A hash of everything a notebook's output depends on: its source, helpers/, data/, parameters and pins.

    A paper module never imports another paper's module, so the other chapters' modules are left out: editing one
    chapter does not re-execute the others. Everything else in helpers/ (the shared core) is in.
    """
    h = hashlib.sha256()
    h.update((NOTEBOOKS / f"{slug}.ipynb").read_bytes())
    slugs = {p.stem for p in NOTEBOOKS.glob("*.ipynb")}
    other_modules = {_chapter_module(s) for s in slugs} - {_chapter_module(slug)}
    _hash_entries(h, ROOT / "helpers", skip=lambda p: p.name == "__pycache__" or p.stem in other_modules)
    # data/<slug>/ is that chapter's; data/README.md documents the files and feeds no notebook
    _hash_entries(h, ROOT / "data", skip=lambda p: p.name in (slugs - {slug}) | {"README.md"})
    h.update(json.dumps(params, sort_keys=True).encode())
    h.update(f"threads={os.environ.get('BOOK_THREADS', '1')}".encode())  # reduction order depends on threads
    h.update(f"data={os.environ.get('HELPERS_DATA', '')}".encode())  # checkpoints from another data root
    for pins in ("requirements.txt", "requirements-data.txt"):
        if (ROOT / pins).exists():
            h.update((ROOT / pins).read_bytes())
    return h.hexdigest()




def _summarise_record(path: Path) -> tuple[str, dict[str, int], list[str]]:
    """(checks passed, claim counts by verdict, failed check ids) of a record; a bad record raises SystemExit."""
    rec = json.loads(path.read_text())
    problems = record_problems(rec)
    if problems:
        raise SystemExit(f"{path}: " + "; ".join(problems))
    checks, claims = rec.get("checks", []), rec.get("claims", [])
    failed = [c["id"] for c in checks if not c.get("ok")]
    counts = {v: sum(1 for c in claims if c.get("verdict") == v) for v in VERDICTS}
    return f"{len(checks) - len(failed)}/{len(checks)}", counts, failed


def record_problems(rec: dict) -> list[str]:
    """Why a claims record cannot be shown: not schema 3, malformed, or a verdict its numbers (and conditions) do
    not give; the logic lives in :func:`helpers.claims.record_problems`."""
    sys.path.insert(0, str(ROOT))
    from helpers.claims import record_problems as problems_of

    return problems_of(rec)


def _file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _format_counts(counts: dict[str, int] | None) -> str:
    if not counts:
        return "-"
    return " / ".join(str(counts[v]) for v in VERDICTS)


def sync_problem(slug: str) -> str | None:
    """Why ``notebooks/<slug>.ipynb`` may not be run: it differs from its reviewed ``.py`` twin (else None)."""
    py, ipynb = NOTEBOOKS / f"{slug}.py", NOTEBOOKS / f"{slug}.ipynb"
    if not py.exists():
        return None  # a notebook without a .py twin: check-repo reports it
    jupytext = Path(sys.executable).parent / "jupytext"
    proc = subprocess.run(
        [str(jupytext), "--to", "py:percent", "--opt", f"notebook_metadata_filter={NB_META_FILTER}",
         "--opt", f"cell_metadata_filter={CELL_META_FILTER}", "-o", "-", str(ipynb)],
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        return f"notebooks/{slug}.ipynb: jupytext cannot read it: {proc.stderr.strip()[:300]}"
    if proc.stdout.strip() != py.read_text().strip():
        return (f"notebooks/{slug}.ipynb is out of sync with notebooks/{slug}.py (the reviewed source): "
                "run `make sync` to regenerate the .ipynb")
    return None


def _execute(slug: str, quick: bool, seed: int | None, threads: int, force: bool) -> RunResult:
    """Run one notebook into the stage (called in a worker process)."""
    import papermill as pm

    stage = Stage(quick, seed)
    src = NOTEBOOKS / f"{slug}.ipynb"
    out = stage.executed / "notebooks" / f"{slug}.ipynb"
    record = stage.results / f"{slug}.json"
    params: dict = {"quick": quick}
    if seed is not None:
        params["seed"] = seed
    key = input_key(slug, params)
    cache_file = stage.cache / f"{slug}.json"
    if not force and cache_file.exists() and out.exists() and record.exists():
        cached = json.loads(cache_file.read_text())
        # the cache serves a result only if the record and executed notebook are the very files it stored
        if (cached.get("key") == key and cached.get("record_sha256") == _file_hash(record)
                and cached.get("notebook_sha256") == _file_hash(out)):
            checks, counts, _ = _summarise_record(record)
            return RunResult(slug, True, cached.get("seconds", 0.0), cached=True, checks=checks,
                             claims=_format_counts(counts), counts=counts,
                             cpu_seconds=cached.get("cpu_seconds", 0.0))

    out.parent.mkdir(parents=True, exist_ok=True)
    stage.results.mkdir(parents=True, exist_ok=True)
    record.unlink(missing_ok=True)
    cache_file.unlink(missing_ok=True)
    os.environ.update({
        "HELPERS_RESULTS_DIR": str(stage.results),
        "HELPERS_THREADS": str(threads),
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "TQDM_MININTERVAL": "1",
        "HELPERS_NO_FRONTEND": "1",  # papermill has no front end: live controls become a static note
    })
    res = RunResult(slug, False)
    t0 = time.perf_counter()
    guard = HangGuard(HANG_FACTOR * budget_s(quick))
    with guard:
        for attempt in (1, 2):
            try:
                pm.execute_notebook(
                    str(src), str(out), parameters=params, cwd=str(NOTEBOOKS), kernel_name="python3",
                    execution_timeout=CELL_TIMEOUT_S[quick], progress_bar=False, log_output=False,
                )
            except pm.PapermillExecutionError as e:
                res.error = f"cell {e.exec_count}: {e.ename}: {e.evalue}".strip()[:800]
                break
            except Exception as e:  # a timeout (nbclient CellTimeoutError) or a dead kernel: retry once
                res.error = f"{type(e).__name__}: {e}".strip()[:800]
                if attempt == 1 and not guard.tripped:
                    res.retried = True
                    continue
                break
            else:
                res.ok, res.error = True, ""
                break
            finally:
                res.seconds = round(time.perf_counter() - t0, 1)  # both attempts, after a retry
                res.cpu_seconds = round(guard.cpu_seconds(), 1)
    fail, res.warning = judge_budget(res.cpu_seconds, res.seconds, quick)
    if fail or guard.tripped:
        res.ok, res.error = False, fail or f"hang guard: the kernel passed {guard.limit_s:.0f} CPU s and was stopped"
    if res.ok:
        _tag_injected_cell(out)
        if not record.exists():
            res.ok, res.error = False, "the notebook did not save its claims record (rec.save())"
        else:
            try:
                res.checks, res.counts, failed = _summarise_record(record)
            except SystemExit as e:
                res.ok, res.error, failed = False, str(e), []
            res.claims = _format_counts(res.counts)
            if failed:
                res.ok, res.error = False, f"checks failed: {', '.join(failed)}"
    res.over_budget = res.ok and bool(res.warning)
    if res.ok:
        stage.cache.mkdir(parents=True, exist_ok=True)
        cache_file.write_text(json.dumps({
            "key": key, "seconds": res.seconds, "cpu_seconds": res.cpu_seconds, "retried": res.retried,
            "record_sha256": _file_hash(record), "notebook_sha256": _file_hash(out),
        }))
    return res


def _tag_injected_cell(path: Path) -> None:
    """Hide papermill's ``injected-parameters`` cell on the page (the ``parameters`` cell above it stays)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
    nbformat.write(nb, path)


def run_notebooks(slugs: list[str], quick: bool, seed: int | None = None, jobs: int | None = None,
                  force: bool = False) -> list[RunResult]:
    missing = [s for s in slugs if not (NOTEBOOKS / f"{s}.ipynb").exists()]
    if missing:
        raise SystemExit(f"no such notebook: {', '.join(f'notebooks/{m}.ipynb' for m in missing)}")
    stale = [p for p in (sync_problem(s) for s in slugs) if p]
    if stale:
        raise SystemExit("refusing to run a stale notebook:\n  " + "\n  ".join(stale))
    cores = os.cpu_count() or 1
    jobs = max(1, min(jobs or cores, len(slugs) or 1))
    # One torch thread per notebook by default: notebooks run side by side across the cores, the same seed gives
    # the same numbers whatever the number of jobs (reduction order depends on threads), and small models lose
    # nothing. Oversubscribed OpenMP threads are catastrophically slow on a loaded machine (seen here: >50x).
    threads = int(os.environ.get("BOOK_THREADS", "1"))
    print(f"running {len(slugs)} notebook(s), {'quick' if quick else 'default'} parameters, "
          f"{jobs} at a time, {threads} torch thread(s) each", flush=True)
    results: dict[str, RunResult] = {}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futs = {pool.submit(_execute, s, quick, seed, threads, force): s for s in slugs}
        for fut in as_completed(futs):
            s = futs[fut]
            try:
                r = fut.result()
            except Exception as e:  # the worker itself died
                r = RunResult(s, False, error=f"{type(e).__name__}: {e}")
            results[s] = r
            state = "cached" if r.cached else ("ok" if r.ok else "FAILED")
            print(f"  {s}: {state} ({r.seconds:.0f} s){' after a retry' if r.retried else ''}", flush=True)
    return [results[s] for s in slugs]


def print_table(results: list[RunResult], quick: bool) -> None:
    """The summary table, in book order: wall and CPU seconds, checks, claims by verdict, status and warnings."""
    order = {s: i for i, s in enumerate(toc_notebooks())}
    results = sorted(results, key=lambda r: order.get(r.slug, len(order)))  # stable: others keep their order
    rows = [("notebook", "wall s", "CPU s", "checks passed", " / ".join(VERDICTS), "status")]
    for r in results:
        status = "cached" if r.cached else ("ok" if r.ok else "FAILED")
        if r.retried:
            status += " (needed a retry)"
        if r.warning:
            status += f" (WARNING: {r.warning})"
        rows.append((r.slug, f"{r.seconds:.1f}", f"{r.cpu_seconds:.1f}", r.checks or "-", r.claims or "-", status))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for i, row in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    totals = {v: sum((r.counts or {}).get(v, 0) for r in results) for v in VERDICTS}
    print("claims: " + ", ".join(f"{n} {v}" for v, n in totals.items()))
    warned = [r.slug for r in results if r.warning]
    if warned:
        print(f"{len(warned)} over the {budget_s(quick)} s budget (a warning, not a failure; "
              f"{HANG_FACTOR}x the budget in CPU seconds fails): {', '.join(warned)}")
    for r in results:
        if not r.ok:
            print(f"FAILED {r.slug}: {r.error}")


# --------------------------------------------------------------------------------------------------------------
# Scoreboard and HTML
# --------------------------------------------------------------------------------------------------------------
def _title_of(slug: str) -> str:
    nb = json.loads((NOTEBOOKS / f"{slug}.ipynb").read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return slug


def _chapter_label(slug: str) -> str:
    return "score-" + re.sub(r"[^a-z0-9-]", "-", slug.lower())


def scoreboard_markdown(slugs: list[str], results_dir: Path, quick: bool) -> str:
    """The scoreboard page, generated from the claims records (never hand-written).

    A summary table first (one row per chapter), then each chapter's claims. Every verdict is recomputed from the
    record's numbers; a record that is not schema 2 or whose verdict disagrees stops the build.
    """
    sys.path.insert(0, str(ROOT))
    from helpers.claims import render_markdown, summary_text

    lines = ["# Scoreboard", ""]
    if quick:
        lines += [":::{warning}", "This build ran every notebook in **quick mode** (tiny sizes, a smoke test). "
                  "The numbers below are not results; `make book` produces the real scoreboard.", ":::", ""]
    lines += ["Every number on this page comes from a chapter's claims record, written when the notebook ran. "
              "A *claim* is a finding of the paper measured at our scale, with the comparison that decides it "
              "(the *rule*: measured `op` target) and the *conditions* its verdict rests on (the model fits its "
              "training data, its curve is flat, a model-free baseline does not already solve the task). Over the "
              "seeds where its conditions hold, it is **held** if the rule holds at every such seed, **mixed** if "
              "at some, **not held** if at none; unless such seeds are more than half (2 of 3) it is "
              "**inconclusive**: the experiment could "
              "not have shown the effect, which says nothing for or against the paper. *Untested* claims say why. "
              "A *check* is a property asserted at any size: a notebook whose check fails does not build.", ""]
    totals = dict.fromkeys(VERDICTS, 0)
    summary = ["| chapter | run time | checks passed | " + " | ".join(VERDICTS) + " |",
               "|---|---:|---:|" + "---:|" * len(VERDICTS)]
    body: list[str] = []
    bad: list[str] = []
    order = {s: i for i, s in enumerate(toc_notebooks())}
    for slug in sorted(slugs, key=lambda s: order.get(s, len(order))):  # book order, whatever the caller's
        path = results_dir / f"{slug}.json"
        title = _title_of(slug)
        body += [f"({_chapter_label(slug)})=", f"## {title}", "", f"Chapter: [{slug}](../notebooks/{slug}.ipynb)",
                 ""]
        if not path.exists():
            body += ["*No record: the notebook did not run successfully in this build.*", ""]
            summary.append(f"| {{ref}}`{slug} <{_chapter_label(slug)}>` | – | – |" + " – |" * len(VERDICTS))
            continue
        rec = json.loads(path.read_text())
        problems = record_problems(rec)
        if problems:
            bad += [f"{slug}: {p}" for p in problems]
            continue
        counts = {v: sum(1 for c in rec.get("claims", []) if c.get("verdict") == v) for v in VERDICTS}
        for v in VERDICTS:
            totals[v] += counts[v]
        checks = rec.get("checks", [])
        n_ok = sum(1 for c in checks if c.get("ok"))
        summary.append(f"| {{ref}}`{slug} <{_chapter_label(slug)}>` | {rec.get('seconds', 0):.0f} s "
                       f"| {n_ok}/{len(checks)} | " + " | ".join(str(counts[v]) for v in VERDICTS) + " |")
        mode = "quick mode, not a result" if rec.get("quick") else "default parameters"
        body += [f"Run time: {rec.get('seconds', 0):.0f} s ({mode}), seed {rec.get('params', {}).get('seed')}.",
                 "", render_markdown(rec), "", summary_text(rec), ""]
    if bad:
        raise SystemExit("claims records that cannot be shown:\n  " + "\n  ".join(bad))
    n = sum(totals.values())
    summary.append(f"| **all {len(slugs)} chapters** | | | " + " | ".join(f"**{totals[v]}**" for v in VERDICTS) + " |")
    lines += [f"**{n} claims**: " + ", ".join(f"{totals[v]} {v}" for v in VERDICTS)
              + f", across {len(slugs)} chapter(s).", "", "## Summary", ""]
    lines += summary + [""] + body
    return "\n".join(lines) + "\n"


def stage_problems(stage: Stage, slugs: list[str]) -> list[str]:
    """Executed notebooks and records of a stage that disagree on their parameters (quick, seed)."""
    problems = []
    for slug in slugs:
        nb_path, rec_path = stage.executed / "notebooks" / f"{slug}.ipynb", stage.results / f"{slug}.json"
        if not (nb_path.exists() and rec_path.exists()):
            continue
        injected = json.loads(nb_path.read_text()).get("metadata", {}).get("papermill", {}).get("parameters", {})
        rec = json.loads(rec_path.read_text())
        rec_params = dict(rec.get("params", {}), quick=rec.get("quick"))
        if bool(injected.get("quick", False)) != bool(stage.quick) or bool(rec.get("quick")) != bool(stage.quick):
            problems.append(f"{slug}: quick mode of the notebook ({injected.get('quick')}) or record "
                            f"({rec.get('quick')}) is not the stage's ({stage.quick})")
        for k, v in injected.items():
            if k in rec_params and rec_params[k] != v:
                problems.append(f"{slug}: executed notebook has {k}={v!r} but its record has {k}={rec_params[k]!r}")
        if stage.seed is not None and rec_params.get("seed") != stage.seed:
            problems.append(f"{slug}: the seed{stage.seed} stage holds a record of seed {rec_params.get('seed')}")
    return problems


def vendor_js() -> Path:
    """Fetch the widget manager, RequireJS and MathJax from the npm registry once (git-ignored ``book/_vendor``)."""
    marker = VENDOR / ".complete"
    if marker.exists():
        shutil.copy(ROOT / "book" / "_ext" / "widgets_path.js", VENDOR / "widgets_path.js")  # our glue, kept fresh
        return VENDOR
    if shutil.which("npm") is None:
        raise SystemExit("npm is needed once to vendor the site's JavaScript (widgets, MathJax) for offline use")
    shutil.rmtree(VENDOR, ignore_errors=True)
    VENDOR.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        for spec in NPM_PACKAGES.values():
            subprocess.run(["npm", "pack", spec, "--silent"], cwd=tmp, check=True, stdout=subprocess.DEVNULL)
        for name, spec in NPM_PACKAGES.items():
            tgz = _find_tgz(Path(tmp), spec)
            with tarfile.open(tgz) as tar:
                tar.extractall(Path(tmp) / name, filter="data")
        pkg = Path(tmp)
        shutil.copytree(pkg / "html-manager/package/dist", VENDOR / "html-manager",
                        ignore=shutil.ignore_patterns("*.map", "embed.js", "libembed-amd.js", "*.txt"))
        (VENDOR / "requirejs").mkdir()
        shutil.copy(pkg / "requirejs/package/require.js", VENDOR / "requirejs/require.js")
        shutil.copytree(pkg / "mathjax/package/es5", VENDOR / "mathjax")
    marker.write_text("\n".join(NPM_PACKAGES.values()) + "\n")
    shutil.copy(ROOT / "book" / "_ext" / "widgets_path.js", VENDOR / "widgets_path.js")
    return VENDOR


def _find_tgz(tmp: Path, spec: str) -> Path:
    name = spec.rsplit("@", 1)[0].lstrip("@").replace("/", "-")
    return next(tmp.glob(f"{name}-*.tgz"))


def build_html(quick: bool, slugs: list[str] | None = None, seed: int | None = None) -> Path:
    """Assemble the stage (config, toc, book pages, scoreboard) and build it with jupyter-book, execution off."""
    stage = Stage(quick, seed)
    slugs = slugs if slugs is not None else toc_notebooks()
    disagree = stage_problems(stage, slugs)
    if disagree:
        raise SystemExit("the stage's executed notebooks and records disagree (re-run them):\n  "
                         + "\n  ".join(disagree))
    vendor_js()
    stage.executed.mkdir(parents=True, exist_ok=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, stage.executed / name)
    shutil.rmtree(stage.executed / "book", ignore_errors=True)
    shutil.copytree(ROOT / "book", stage.executed / "book",
                    ignore=shutil.ignore_patterns("__pycache__", "build.py", "check_*.py"))
    missing = [s for s in slugs if not (stage.executed / "notebooks" / f"{s}.ipynb").exists()]
    if missing:
        raise SystemExit(f"not executed yet, cannot build the site: {', '.join(missing)}")
    (stage.executed / "book" / "scoreboard.md").write_text(scoreboard_markdown(slugs, stage.results, quick))
    jb = Path(sys.executable).parent / "jupyter-book"
    out_dir = stage.executed / "_build"
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = [str(jb), "build", str(stage.executed), "--builder", "html", "-W", "-n", "--keep-going", "--quiet"]
    print("building the site:", " ".join(cmd[1:]), flush=True)
    proc = subprocess.run(cmd, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"jupyter-book build failed (exit {proc.returncode}); see the warnings above")
    shutil.rmtree(stage.html, ignore_errors=True)
    shutil.copytree(out_dir / "html", stage.html)
    return stage.html / "index.html"


# --------------------------------------------------------------------------------------------------------------
# Checks of the built site and of the repository
# --------------------------------------------------------------------------------------------------------------
ERROR_MARKERS = ("Traceback (most recent call last)", 'class="output traceback', "output error")


def check_html(quick: bool, seed: int | None = None) -> list[str]:
    """Problems with the built site: a missing page, an error output or traceback, a chapter without a figure."""
    html_dir = Stage(quick, seed).html
    problems: list[str] = []
    for entry in toc_entries():
        page = html_dir / f"{entry}.html"
        if not page.exists():
            problems.append(f"{entry}: no page {page.name} in {html_dir}")
            continue
        text = page.read_text(errors="replace")
        for marker in ERROR_MARKERS:
            if marker in text:
                problems.append(f"{entry}: the page shows an error output ({marker!r})")
                break
        if entry.startswith("notebooks/") and not re.search(r"<img[^>]+src=", text):
            problems.append(f"{entry}: a chapter page without a figure")
    return problems


NB_META_FILTER = "kernelspec,-jupytext"
CELL_META_FILTER = "-papermill,-execution,-ExecuteTime,-collapsed,-scrolled"


CODE_WIDTH = 88  # columns a code cell shows at 1280 px without scrolling (tests/test_site.py measures it)

# Reading-flow checks, counted per chapter against allowances that may only go down (book/repo_baseline.json):
# a count over its chapter's allowance is a problem; `check-repo --tighten` lowers allowances to today's counts.
# Once every allowance is zero, any visible long cell or typed result fails the check.
MAX_CELL_LINES = 60  # a visible code cell (not tagged hide-input/remove-input/hide-cell/remove-cell) at most
HIDDEN_INPUT_TAGS = {"hide-input", "remove-input", "hide-cell", "remove-cell"}
PAPER_MARKER = "<!-- paper -->"  # a markdown line carrying it holds the paper's figures (invisible in the page)
BASELINE = ROOT / "book" / "repo_baseline.json"
REPO_COUNTS = {"long_cells": f"visible code cells over {MAX_CELL_LINES} lines",
               "prose_numbers": "decimal numbers typed into markdown cells (not the paper's)"}
_DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.]*\d)")  # 0.83, 6.2 (not 2.13.0, not v1.5 or x1.5)
_NOT_PROSE = re.compile(r"`[^`]*`|<!--.*?-->|\]\([^)]*\)|https?://\S+")  # code spans, comments, link targets, URLs


def _cell_source(cell: dict) -> str:
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def long_visible_cells(cells: list[dict], max_lines: int = MAX_CELL_LINES) -> list[tuple[int, int]]:
    """(cell index, lines) of each code cell a reader sees (no hide/remove tag) that is over ``max_lines`` lines."""
    out = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code" or HIDDEN_INPUT_TAGS & set(cell.get("metadata", {}).get("tags", [])):
            continue
        n = len(_cell_source(cell).rstrip().splitlines())
        if n > max_lines:
            out.append((i, n))
    return out


def prose_numbers(markdown: str) -> list[str]:
    """The decimal numbers typed into a markdown cell that are not marked as the paper's.

    Exempt: every row of the "paper vs this notebook" table (a header row naming both), a line
    that carries the marker ``<!-- paper -->`` (at its end, by convention), and what is not prose (code spans, HTML comments, link targets, URLs).
    """
    found: list[str] = []
    in_table = in_paper_table = False
    for line in markdown.splitlines():
        stripped = line.strip()
        if stripped.startswith("|"):
            if not in_table:  # the header row decides: "| | the paper | this notebook |"
                in_paper_table = bool(re.search(r"\bpaper\b", stripped, re.I)
                                      and re.search(r"\bthis (notebook|guide)\b", stripped, re.I))
            in_table = True
            if in_paper_table:
                continue
        else:
            in_table = in_paper_table = False
        if PAPER_MARKER in line:
            continue
        found += _DECIMAL.findall(_NOT_PROSE.sub(" ", line))
    return found


def repo_counts(notebooks: Path | None = None) -> dict[str, dict[str, int]]:
    """Per chapter (``.ipynb`` in ``notebooks/``): ``{"long_cells": n, "prose_numbers": n}``."""
    folder = notebooks or NOTEBOOKS
    out = {}
    for path in sorted(folder.glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        out[path.stem] = {
            "long_cells": len(long_visible_cells(cells)),
            "prose_numbers": sum(len(prose_numbers(_cell_source(c))) for c in cells if c["cell_type"] == "markdown"),
        }
    return out


def read_baseline(path: Path | None = None) -> dict[str, dict[str, int]]:
    """The allowances ``{kind: {slug: n}}`` (a chapter not listed is allowed 0)."""
    path = path or BASELINE
    if not path.exists():
        return {k: {} for k in REPO_COUNTS}
    data = json.loads(path.read_text())
    return {k: {s: int(n) for s, n in data.get(k, {}).items()} for k in REPO_COUNTS}


def count_problems(counts: dict[str, dict[str, int]], allowed: dict[str, dict[str, int]]) -> list[str]:
    """A chapter whose count is over its allowance (an allowance only goes down: new long cells or typed results
    in a chapter fail the check)."""
    problems = []
    for kind, what in REPO_COUNTS.items():
        for slug, c in sorted(counts.items()):
            cap = allowed.get(kind, {}).get(slug, 0)
            if c[kind] > cap:
                fix = ("move machinery into the chapter's helpers module, or tag the cell hide-input"
                       if kind == "long_cells" else
                       f"generate it from the run (a remove-input Markdown cell) or, for the paper's figure, end "
                       f"its line with {PAPER_MARKER}")
                problems.append(f"notebooks/{slug}: {c[kind]} {what}, over its allowance of {cap} "
                                f"({BASELINE.relative_to(ROOT)}): {fix}")
    return problems


def tightened(counts: dict[str, dict[str, int]], allowed: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Allowances lowered to today's counts where a chapter is under them (never raised; zeros left out)."""
    out = {}
    for kind in REPO_COUNTS:
        have = allowed.get(kind, {})
        out[kind] = {s: min(n, counts[s][kind]) if s in counts else n for s, n in sorted(have.items())}
        out[kind] = {s: n for s, n in out[kind].items() if n > 0}
    return out


def report_counts(counts: dict[str, dict[str, int]], allowed: dict[str, dict[str, int]]) -> None:
    """Print each chapter's counts next to its allowance (the reporting mode of the reading-flow checks)."""
    for kind, what in REPO_COUNTS.items():
        total = sum(c[kind] for c in counts.values())
        print(f"{what}: {total} in all")
        for slug, c in sorted(counts.items()):
            cap = allowed.get(kind, {}).get(slug, 0)
            if c[kind] or cap:
                note = "" if c[kind] == cap else (" (over!)" if c[kind] > cap else " (can be lowered: --tighten)")
                print(f"  {slug:<32} {c[kind]:>4}   allowed {cap}{note}")


def check_repo() -> list[str]:
    """Problems with the committed notebooks: unpaired, out of sync, carrying outputs, no parameters cell."""
    problems: list[str] = []
    pys = {p.stem for p in NOTEBOOKS.glob("*.py")}
    nbs = {p.stem for p in NOTEBOOKS.glob("*.ipynb")}
    for s in sorted(pys ^ nbs):
        problems.append(f"notebooks/{s}: only one half of the jupytext pair exists")
    jupytext = Path(sys.executable).parent / "jupytext"
    for s in sorted(pys & nbs):
        nb = json.loads((NOTEBOOKS / f"{s}.ipynb").read_text())
        for i, cell in enumerate(nb["cells"]):
            if cell["cell_type"] == "code" and (cell.get("outputs") or cell.get("execution_count")):
                problems.append(f"notebooks/{s}.ipynb: cell {i} carries outputs (commit notebooks without outputs)")
                break
        if not any("parameters" in c.get("metadata", {}).get("tags", []) for c in nb["cells"]):
            problems.append(f"notebooks/{s}.ipynb: no cell tagged 'parameters'")
        for i, cell in enumerate(nb["cells"]):
            src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            long = [n for n, line in enumerate(src.splitlines(), 1) if len(line) > CODE_WIDTH]
            removed = {"remove-input", "remove-cell"} & set(cell.get("metadata", {}).get("tags", []))
            if cell["cell_type"] == "code" and long and not removed:  # a removed input is never shown
                problems.append(
                    f"notebooks/{s}.py: code cell {i} has lines longer than {CODE_WIDTH} columns (line "
                    f"{', '.join(map(str, long[:5]))} of the cell): they scroll sideways in the book; "
                    f"split them (`ruff format --config notebooks/ruff.toml` does most)"
                )
        proc = subprocess.run(
            [str(jupytext), "--to", "py:percent", "--opt", f"notebook_metadata_filter={NB_META_FILTER}",
             "--opt", f"cell_metadata_filter={CELL_META_FILTER}", "-o", "-", str(NOTEBOOKS / f"{s}.ipynb")],
            capture_output=True, text=True,
        )
        if proc.returncode != 0:
            problems.append(f"notebooks/{s}.ipynb: jupytext failed: {proc.stderr.strip()[:300]}")
        elif proc.stdout.strip() != (NOTEBOOKS / f"{s}.py").read_text().strip():
            problems.append(f"notebooks/{s}: .py and .ipynb are out of sync (run `make sync`)")
    problems += count_problems(repo_counts(), read_baseline())
    return problems


# --------------------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("book", "run", "html", "check-html"):
        p = sub.add_parser(name)
        p.add_argument("--quick", action="store_true", help="tiny sizes (quick = True), a smoke test")
        p.add_argument("--seed", type=int, default=None, help="override the notebooks' seed (a stage of its own)")
        if name in ("book", "run"):
            p.add_argument("--jobs", type=int, default=None, help="notebooks run in parallel (default: cores)")
            p.add_argument("--force", action="store_true", help="re-execute even if nothing changed")
        if name == "run":
            p.add_argument("notebooks", nargs="+", help="slugs, e.g. 02_tree_training")
    cr = sub.add_parser("check-repo")
    cr.add_argument("--tighten", action="store_true",
                    help=f"lower the allowances in {BASELINE.relative_to(ROOT)} to today's counts (never raises them)")
    args = ap.parse_args(argv)

    if args.cmd == "check-repo":
        counts, allowed = repo_counts(), read_baseline()
        if args.tighten:
            allowed = tightened(counts, allowed)
            BASELINE.write_text(json.dumps(allowed, indent=1, sort_keys=True) + "\n")
            print(f"wrote {BASELINE.relative_to(ROOT)}")
        report_counts(counts, allowed)
        problems = check_repo()
        for p in problems:
            print("PROBLEM", p)
        print(f"checked {len(list(NOTEBOOKS.glob('*.ipynb')))} notebook pair(s): "
              f"{'ok' if not problems else f'{len(problems)} problem(s)'}")
        return 1 if problems else 0
    if args.cmd == "check-html":
        problems = check_html(args.quick, args.seed)
        for p in problems:
            print("PROBLEM", p)
        print(f"checked {len(toc_entries())} page(s): {'ok' if not problems else f'{len(problems)} problem(s)'}")
        return 1 if problems else 0
    if args.cmd == "html":
        print("site:", build_html(args.quick, seed=args.seed))
        return 0
    if args.cmd == "run":
        slugs = [Path(s).stem for s in args.notebooks]
        results = run_notebooks(slugs, args.quick, args.seed, args.jobs, args.force)
        print_table(results, args.quick)
        stage = Stage(args.quick, args.seed)
        for r in results:
            if r.ok:
                print(f"{r.slug}: {stage.executed.relative_to(ROOT)}/notebooks/{r.slug}.ipynb, "
                      f"{stage.results.relative_to(ROOT)}/{r.slug}.json")
        return 0 if all(r.ok for r in results) else 1
    # book
    slugs = toc_notebooks()
    results = run_notebooks(slugs, args.quick, args.seed, args.jobs, args.force)
    failed = [r for r in results if not r.ok]  # over budget is a warning; past the hang guard, a failure
    index = None
    if all(r.ok for r in results):
        index = build_html(args.quick, slugs, args.seed)
        problems = check_html(args.quick, args.seed)
        for p in problems:
            print("PROBLEM", p)
        if problems:
            failed.append(RunResult("site", False, error=f"{len(problems)} problem(s) in the built site"))
    print()
    print_table(results, args.quick)
    if failed:
        print(f"\n{len(failed)} failure(s): {', '.join(r.slug for r in failed)}")
        return 1
    print(f"\nthe book: {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
