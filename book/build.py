"""The book runner: execute notebooks with papermill, collect claims, generate the scoreboard, build the HTML.

Used by the Makefile::

    python book/build.py book [--quick] [--jobs N]          # everything: run, scoreboard, html, checks, table
    python book/build.py run NB [NB ...] [--quick] [--seed N] [--force]
    python book/build.py html [--quick]                      # scoreboard + jupyter-book build of the stage
    python book/build.py check-html [--quick]                # the built site: pages, no errors, figures
    python book/build.py check-repo                          # jupytext pairs in sync, no committed outputs

The committed notebooks are never executed in place: papermill writes into a *stage*, a copy of the book
(``_build/executed`` at default parameters, ``_build/quick/executed`` in quick mode), and the stage is what
``jupyter-book build`` renders, with execution off. Each notebook's claims record lands in the stage's
``results/`` folder (``_build/results`` and ``_build/quick/results``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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
# A hung cell is killed after this long and the notebook retried once. Papermill still hangs now and then on an
# ipywidgets `interactive` cell (seen here with ipykernel 6.31 too), so quick mode, where no cell needs more than a
# minute, gives up after 3 minutes rather than 10.
CELL_TIMEOUT_S = {True: 180, False: 1200}


# --------------------------------------------------------------------------------------------------------------
# Stages and the table of contents
# --------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stage:
    quick: bool

    @property
    def base(self) -> Path:
        return BUILD / "quick" if self.quick else BUILD

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
    over_budget: bool = False


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
    _hash_entries(h, ROOT / "data", skip=lambda p: p.name in slugs - {slug})  # data/<slug>/ is that chapter's
    h.update(json.dumps(params, sort_keys=True).encode())
    for pins in ("requirements.txt", "requirements-data.txt"):
        if (ROOT / pins).exists():
            h.update((ROOT / pins).read_bytes())
    return h.hexdigest()


def _summarise_record(path: Path) -> tuple[str, str, list[str]]:
    rec = json.loads(path.read_text())
    checks, claims = rec.get("checks", []), rec.get("claims", [])
    failed = [c["id"] for c in checks if not c.get("ok")]
    n_held = sum(1 for c in claims if c.get("holds") is True)
    return f"{len(checks) - len(failed)}/{len(checks)}", f"{n_held}/{len(claims)}", failed


def _execute(slug: str, quick: bool, seed: int | None, threads: int, force: bool) -> RunResult:
    """Run one notebook into the stage (called in a worker process)."""
    import papermill as pm

    stage = Stage(quick)
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
        if cached.get("key") == key:
            checks, claims, _ = _summarise_record(record)
            return RunResult(slug, True, cached.get("seconds", 0.0), cached=True, checks=checks, claims=claims)

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
    })
    res = RunResult(slug, False)
    for attempt in (1, 2):
        t0 = time.perf_counter()
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
            if attempt == 1:
                res.retried = True
                continue
            break
        else:
            res.ok, res.error = True, ""
            break
        finally:
            res.seconds = round(time.perf_counter() - t0, 1)
    if res.ok:
        _tag_injected_cell(out)
        if not record.exists():
            res.ok, res.error = False, "the notebook did not save its claims record (rec.save())"
        else:
            res.checks, res.claims, failed = _summarise_record(record)
            if failed:
                res.ok, res.error = False, f"checks failed: {', '.join(failed)}"
    res.over_budget = res.ok and res.seconds > (QUICK_TIMEOUT_S if quick else DEFAULT_TIMEOUT_S)
    if res.ok:
        stage.cache.mkdir(parents=True, exist_ok=True)
        cache_file.write_text(json.dumps({"key": key, "seconds": res.seconds, "retried": res.retried}))
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
    budget = QUICK_TIMEOUT_S if quick else DEFAULT_TIMEOUT_S
    rows = [("notebook", "seconds", "checks passed", "claims held", "status")]
    for r in results:
        status = "cached" if r.cached else ("ok" if r.ok else "FAILED")
        if r.retried:
            status += " (needed a retry)"
        if r.over_budget:
            status += f" (over the {budget} s budget)"
        rows.append((r.slug, f"{r.seconds:.1f}", r.checks or "-", r.claims or "-", status))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for i, row in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
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


def scoreboard_markdown(slugs: list[str], results_dir: Path, quick: bool) -> str:
    """The scoreboard page, generated from the claims records (never hand-written)."""
    sys.path.insert(0, str(ROOT))
    from helpers.claims import render_markdown

    lines = ["# Scoreboard", ""]
    if quick:
        lines += [":::{warning}", "This build ran every notebook in **quick mode** (tiny sizes, a smoke test). "
                  "The numbers below are not results; `make book` produces the real scoreboard.", ":::", ""]
    lines += ["Every number on this page comes from a chapter's claims record, written when the notebook ran. "
              "A *claim* is a finding of the paper measured at our scale; *held* says whether it held here. "
              "A *check* is a property asserted at any size: a notebook whose check fails does not build.", ""]
    total_claims = held = 0
    body: list[str] = []
    for slug in slugs:
        path = results_dir / f"{slug}.json"
        body += [f"## {_title_of(slug)}", "", f"Chapter: [{slug}](../notebooks/{slug}.ipynb)", ""]
        if not path.exists():
            body += ["*No record: the notebook did not run successfully in this build.*", ""]
            continue
        rec = json.loads(path.read_text())
        total_claims += len(rec.get("claims", []))
        held += sum(1 for c in rec.get("claims", []) if c.get("holds") is True)
        mode = "quick mode, not a result" if rec.get("quick") else "default parameters"
        body += [f"Run time: {rec.get('seconds', 0):.0f} s ({mode}), seed {rec.get('params', {}).get('seed')}.",
                 "", render_markdown(rec), ""]
    lines += [f"**{held} of {total_claims} claims held** across {len(slugs)} chapter(s).", ""] + body
    return "\n".join(lines) + "\n"


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


def build_html(quick: bool, slugs: list[str] | None = None) -> Path:
    """Assemble the stage (config, toc, book pages, scoreboard) and build it with jupyter-book, execution off."""
    stage = Stage(quick)
    slugs = slugs if slugs is not None else toc_notebooks()
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


def check_html(quick: bool) -> list[str]:
    """Problems with the built site: a missing page, an error output or traceback, a chapter without a figure."""
    html_dir = Stage(quick).html
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
        proc = subprocess.run(
            [str(jupytext), "--to", "py:percent", "--opt", f"notebook_metadata_filter={NB_META_FILTER}",
             "--opt", f"cell_metadata_filter={CELL_META_FILTER}", "-o", "-", str(NOTEBOOKS / f"{s}.ipynb")],
            capture_output=True, text=True,
        )
        if proc.returncode != 0:
            problems.append(f"notebooks/{s}.ipynb: jupytext failed: {proc.stderr.strip()[:300]}")
        elif proc.stdout.strip() != (NOTEBOOKS / f"{s}.py").read_text().strip():
            problems.append(f"notebooks/{s}: .py and .ipynb are out of sync (run `make sync`)")
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
        if name in ("book", "run"):
            p.add_argument("--seed", type=int, default=None, help="override the notebooks' seed")
            p.add_argument("--jobs", type=int, default=None, help="notebooks run in parallel (default: cores)")
            p.add_argument("--force", action="store_true", help="re-execute even if nothing changed")
        if name == "run":
            p.add_argument("notebooks", nargs="+", help="slugs, e.g. 02_tree_training")
    sub.add_parser("check-repo")
    args = ap.parse_args(argv)

    if args.cmd == "check-repo":
        problems = check_repo()
        for p in problems:
            print("PROBLEM", p)
        print(f"checked {len(list(NOTEBOOKS.glob('*.ipynb')))} notebook pair(s): "
              f"{'ok' if not problems else f'{len(problems)} problem(s)'}")
        return 1 if problems else 0
    if args.cmd == "check-html":
        problems = check_html(args.quick)
        for p in problems:
            print("PROBLEM", p)
        print(f"checked {len(toc_entries())} page(s): {'ok' if not problems else f'{len(problems)} problem(s)'}")
        return 1 if problems else 0
    if args.cmd == "html":
        print("site:", build_html(args.quick))
        return 0
    if args.cmd == "run":
        slugs = [Path(s).stem for s in args.notebooks]
        results = run_notebooks(slugs, args.quick, args.seed, args.jobs, args.force)
        print_table(results, args.quick)
        stage = Stage(args.quick)
        for r in results:
            if r.ok:
                print(f"{r.slug}: {stage.executed.relative_to(ROOT)}/notebooks/{r.slug}.ipynb, "
                      f"{stage.results.relative_to(ROOT)}/{r.slug}.json")
        return 0 if all(r.ok for r in results) else 1
    # book
    slugs = toc_notebooks()
    results = run_notebooks(slugs, args.quick, args.seed, args.jobs, args.force)
    failed = [r for r in results if not r.ok]
    index = None
    if not failed:
        index = build_html(args.quick, slugs)
        problems = check_html(args.quick)
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
