"""Tests of the book tooling (book/build.py) and of the committed notebooks' contract."""

import json
import re
import sys
from pathlib import Path

import nbformat
import pytest
import yaml
from _loader import load_module

ROOT = Path(__file__).resolve().parent.parent
build = load_module(ROOT / "book" / "build.py", "book_build", register=True)

NOTEBOOK_PYS = sorted((ROOT / "notebooks").glob("*.py"))
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())


# ---- the committed notebooks -----------------------------------------------------------------------------------
def test_every_notebook_is_in_the_toc_and_every_toc_entry_exists():
    toc = build.toc_entries()
    for entry in toc:
        assert any((ROOT / f"{entry}{ext}").exists() for ext in (".md", ".ipynb")) or entry == "book/scoreboard", entry
    listed = set(build.toc_notebooks())
    on_disk = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert on_disk == listed, f"notebooks not in _toc.yml: {on_disk - listed}; missing: {listed - on_disk}"


@pytest.mark.parametrize("py", NOTEBOOK_PYS, ids=[p.stem for p in NOTEBOOK_PYS])
def test_notebook_contract(py):
    nb = nbformat.read(py.with_suffix(".ipynb"), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    # 1. a title first
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    # 2. the bootstrap installs from the one URL of _config.yml, only in Colab
    url = f"git+{CONFIG['repository']['url']}@{CONFIG['repository']['branch']}"
    boot = [c for c in code if "google.colab" in c.source]
    assert boot, "no Colab bootstrap cell"
    assert url in boot[0].source and "find_spec" in boot[0].source
    assert all(u == url for u in re.findall(r"git\+https?://[^\s\"']+", "\n".join(c.source for c in code)))
    # 3. a parameters cell with quick = False and seed = 0
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1
    assert re.search(r"^quick\s*=\s*False\b", params[0].source, re.M)
    assert re.search(r"^seed\s*=\s*0\b", params[0].source, re.M)
    # 6. the claims record is saved last; only reading text generated from it (remove-input cells) may follow
    assert "ClaimsRecord(" in "\n".join(c.source for c in code)
    saved = [i for i, c in enumerate(code) if "rec.save()" in c.source]
    assert saved, "the claims record is never saved (rec.save())"
    after = [c for c in code[saved[-1] + 1:] if "remove-input" not in c.metadata.get("tags", [])]
    assert not after, f"a visible code cell after rec.save(): {after[0].source[:80]!r}"
    # the record is named after the notebook
    joined = "\n".join(c.source for c in code)
    assert re.search(rf'ClaimsRecord\(\s*"{py.stem}"', joined) or (
        re.search(rf'^SLUG\s*=\s*"{py.stem}"', joined, re.M) and re.search(r"ClaimsRecord\(\s*SLUG\b", joined)
    ), "the claims record must be named after the notebook"

    # 5. a static interactive element and live controls
    src = "\n".join(c.source for c in code)
    assert "static_slider" in src or "to_jshtml" in src
    assert "live_controls" in src or "interact" in src


COLLAPSE_TAGS = {"hide-input", "hide-cell"}  # rendered collapsed by the book, still in the notebook


def collapse_problems(nb: nbformat.NotebookNode) -> list[str]:
    """The Colab bootstrap cell(s) before the parameters cell and the setup cell right after it must carry a
    collapse tag (``hide-input`` or ``hide-cell``); nothing may be removed, and the parameters stay visible."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    params = [i for i, c in enumerate(code) if "parameters" in c.metadata.get("tags", [])]
    if len(params) != 1:
        return [f"expected one parameters cell, found {len(params)}"]
    p = params[0]
    problems = []
    if p == 0:
        problems.append("no Colab bootstrap cell before the parameters cell")
    if p + 1 >= len(code):
        problems.append("no setup cell after the parameters cell")
    for i, c in enumerate(code):
        tags = set(c.metadata.get("tags", []))
        name = "parameters" if i == p else "bootstrap" if i < p else "setup" if i == p + 1 else None
        if any(t.startswith("remove") for t in tags) and name:
            problems.append(f"{name} cell {i} is removed from the page ({sorted(tags)}), not collapsed")
        if name in ("bootstrap", "setup") and not tags & COLLAPSE_TAGS:
            problems.append(f"{name} cell {i} ({c.source.splitlines()[0][:50] if c.source else ''!r}) "
                            f"has no collapse tag ({' or '.join(sorted(COLLAPSE_TAGS))})")
        if name == "parameters" and tags & COLLAPSE_TAGS:
            problems.append("the parameters cell is collapsed: readers should see what they can change")
    return problems


@pytest.mark.parametrize("py", NOTEBOOK_PYS, ids=[p.stem for p in NOTEBOOK_PYS])
def test_bootstrap_and_setup_cells_render_collapsed(py):
    # the .ipynb is what the book renders (check_repo keeps it in sync with the .py)
    assert collapse_problems(nbformat.read(py.with_suffix(".ipynb"), as_version=4)) == []


def _tagged_nb(tags: list[list[str]]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    sources = ["# Colab bootstrap\nimport sys", "quick = False\nseed = 0", "import numpy as np\nrec = 1", "x = 1"]
    nb.cells = [nbformat.v4.new_markdown_cell("# Title")]
    for src, t in zip(sources, tags, strict=True):
        cell = nbformat.v4.new_code_cell(src)
        cell.metadata["tags"] = t
        nb.cells.append(cell)
    return nb


def test_collapse_checker_passes_a_tagged_notebook_and_fails_untagged_ones():
    ok = [["hide-input"], ["parameters"], ["hide-cell"], []]
    assert collapse_problems(_tagged_nb(ok)) == []
    # the setup cell without a tag
    p = collapse_problems(_tagged_nb([["hide-input"], ["parameters"], [], []]))
    assert len(p) == 1 and "setup cell 2" in p[0]
    # the bootstrap without a tag
    p = collapse_problems(_tagged_nb([[], ["parameters"], ["hide-input"], []]))
    assert len(p) == 1 and "bootstrap cell 0" in p[0]
    # removed instead of collapsed
    p = collapse_problems(_tagged_nb([["remove-cell"], ["parameters"], ["hide-input"], []]))
    assert any("removed" in x for x in p) and any("bootstrap" in x for x in p)
    # the parameters cell hidden, or missing
    assert collapse_problems(_tagged_nb([["hide-input"], ["parameters", "hide-input"], ["hide-input"], []]))
    assert collapse_problems(_tagged_nb([["hide-input"], [], ["hide-input"], []]))
    # an untagged committed notebook, written to disk and read back the way the test above reads it
    src = (ROOT / "notebooks" / "00_reading_guide.py").read_text().replace('# %% tags=["hide-input"]', "# %%")
    jupytext = pytest.importorskip("jupytext")
    assert len(collapse_problems(jupytext.reads(src, fmt="py:percent"))) == 2


def test_committed_notebooks_are_in_sync_and_without_outputs():
    assert build.check_repo() == []


# ---- the runner ------------------------------------------------------------------------------------------------
def test_toc_entries_walks_parts_chapters_sections(tmp_path):
    toc = tmp_path / "_toc.yml"
    toc.write_text("format: jb-book\nroot: book/intro\nparts:\n  - caption: A\n    chapters:\n"
                   "      - file: notebooks/01_a\n        sections:\n          - file: notebooks/02_b.ipynb\n"
                   "  - caption: B\n    chapters:\n      - file: book/x.md\n")
    assert build.toc_entries(toc) == ["book/intro", "notebooks/01_a", "notebooks/02_b", "book/x"]


def _write_nb(path: Path, cells: list[str]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("quick = False\nseed = 0")]
    nb.cells[0].metadata["tags"] = ["parameters"]
    nb.cells += [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    nbdir = tmp_path / "notebooks"
    nbdir.mkdir()
    monkeypatch.setattr(build, "NOTEBOOKS", nbdir)
    monkeypatch.setattr(build, "BUILD", tmp_path / "_build")
    return nbdir


def _claims(**n):
    """The table's claims column: counts in the order of helpers.claims.VERDICTS."""
    return " / ".join(str(n.get(v, 0)) for v in build.VERDICTS)


SAVE = ("from helpers.claims import ClaimsRecord\nrec = ClaimsRecord('ok_nb', dict(quick=quick, seed=seed))\n"
        "rec.check('one', 1, 1)\nrec.claim('c', 's', paper=1, measured=seed, op='==', target=1)\nrec.save()")


def test_runner_executes_records_caches_and_reruns_on_change(sandbox):
    _write_nb(sandbox / "ok_nb.ipynb", [SAVE])
    r = build._execute("ok_nb", quick=True, seed=None, threads=1, force=False)
    assert r.ok and not r.cached and (r.checks, r.claims) == ("1/1", _claims(**{"not held": 1})), r.error
    assert r.cpu_seconds > 0 and not r.warning
    stage = build.Stage(True)
    out = nbformat.read(stage.executed / "notebooks" / "ok_nb.ipynb", as_version=4)
    injected = [c for c in out.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and "remove-cell" in injected[0].metadata.tags and "quick = True" in injected[0].source
    rec = json.loads((stage.results / "ok_nb.json").read_text())
    assert rec["quick"] is True
    # nothing changed: skipped
    assert build._execute("ok_nb", True, None, 1, False).cached
    # another seed is another input, in a stage of its own: the default stage's record is untouched
    before = (stage.results / "ok_nb.json").read_text()
    r2 = build._execute("ok_nb", True, 1, 1, False)
    assert not r2.cached and r2.claims == _claims(held=1)
    seed_stage = build.Stage(True, 1)
    assert seed_stage.base == build.BUILD / "quick" / "seed1"
    assert json.loads((seed_stage.results / "ok_nb.json").read_text())["params"]["seed"] == 1
    assert (stage.results / "ok_nb.json").read_text() == before
    assert build.stage_problems(stage, ["ok_nb"]) == [] and build.stage_problems(seed_stage, ["ok_nb"]) == []
    # a record edited behind the cache's back is not served: the notebook runs again
    rec_path = stage.results / "ok_nb.json"
    rec_path.write_text(rec_path.read_text().replace('"seconds"', '"seconds" ', 1))
    assert not build._execute("ok_nb", True, None, 1, False).cached
    # the threads are part of the key
    assert build.input_key("ok_nb", {"quick": True}) != _key_with_threads("ok_nb", "2")


def _key_with_threads(slug, n):
    import os

    old = os.environ.get("BOOK_THREADS")
    os.environ["BOOK_THREADS"] = n
    try:
        return build.input_key(slug, {"quick": True})
    finally:
        if old is None:
            del os.environ["BOOK_THREADS"]
        else:
            os.environ["BOOK_THREADS"] = old


def test_html_refuses_a_stage_whose_record_and_notebook_disagree(sandbox):
    _write_nb(sandbox / "ok_nb.ipynb", [SAVE])
    assert build._execute("ok_nb", True, None, 1, False).ok
    stage = build.Stage(True)
    rec_path = stage.results / "ok_nb.json"
    rec = json.loads(rec_path.read_text())
    rec["params"]["seed"], rec["quick"] = 3, False  # e.g. a record left by another run
    rec_path.write_text(json.dumps(rec))
    problems = build.stage_problems(stage, ["ok_nb"])
    assert any("quick" in p for p in problems)
    with pytest.raises(SystemExit, match="disagree"):
        build.build_html(True, ["ok_nb"])


def test_runner_refuses_a_stale_ipynb(sandbox):
    (sandbox / "st.py").write_text("# %% tags=[\"parameters\"]\nquick = False\nseed = 0\n\n# %%\nx = 2\n")
    _write_nb(sandbox / "st.ipynb", ["x = 1"])
    problem = build.sync_problem("st")
    assert problem and "out of sync" in problem and "make sync" in problem and "st.py" in problem
    with pytest.raises(SystemExit, match="make sync"):
        build.run_notebooks(["st"], quick=True)


def test_a_retry_counts_both_attempts(sandbox, monkeypatch):
    import papermill as pm

    calls = []

    def flaky(*a, **k):
        import time as _t

        calls.append(1)
        _t.sleep(0.3)
        if len(calls) == 1:
            raise TimeoutError("cell timed out")
        return build._real_execute(*a, **k)

    build._real_execute = pm.execute_notebook
    monkeypatch.setattr(pm, "execute_notebook", flaky)
    _write_nb(sandbox / "ok_nb.ipynb", [SAVE])
    r = build._execute("ok_nb", True, None, 1, True)
    assert r.ok and r.retried and r.seconds >= 0.6 and len(calls) == 2


def test_runner_names_the_failing_cell_and_error(sandbox):
    _write_nb(sandbox / "bad_nb.ipynb", ["x = 1", "raise RuntimeError('boom here')"])
    r = build._execute("bad_nb", True, None, 1, False)
    assert not r.ok and "RuntimeError" in r.error and "boom here" in r.error and "cell" in r.error


def test_runner_fails_a_notebook_without_a_record(sandbox):
    _write_nb(sandbox / "norec.ipynb", ["x = 1"])
    r = build._execute("norec", True, None, 1, False)
    assert not r.ok and "claims record" in r.error


def test_input_key_changes_with_params_and_source(sandbox):
    _write_nb(sandbox / "k.ipynb", ["x = 1"])
    a = build.input_key("k", {"quick": True})
    assert a == build.input_key("k", {"quick": True})
    assert a != build.input_key("k", {"quick": False})
    _write_nb(sandbox / "k.ipynb", ["x = 2"])
    assert a != build.input_key("k", {"quick": True})


def test_input_key_ignores_other_chapters_modules_but_not_the_core(sandbox, monkeypatch, tmp_path):
    root = tmp_path / "root"
    (root / "helpers").mkdir(parents=True)
    (root / "requirements.txt").write_text("x==1\n")
    monkeypatch.setattr(build, "ROOT", root)
    for slug in ("01_alpha", "02_beta"):
        _write_nb(sandbox / f"{slug}.ipynb", ["x = 1"])
    (root / "helpers" / "alpha.py").write_text("a = 1\n")
    (root / "helpers" / "beta.py").write_text("b = 1\n")
    (root / "helpers" / "core.py").write_text("c = 1\n")
    key = build.input_key("01_alpha", {})
    (root / "helpers" / "beta.py").write_text("b = 2\n")  # another chapter's module
    assert build.input_key("01_alpha", {}) == key
    (root / "helpers" / "alpha.py").write_text("a = 2\n")  # its own module
    key2 = build.input_key("01_alpha", {})
    assert key2 != key
    (root / "helpers" / "core.py").write_text("c = 2\n")  # the shared core
    assert build.input_key("01_alpha", {}) != key2


def test_input_key_covers_own_data_but_not_the_data_readme(sandbox, monkeypatch, tmp_path):
    root = tmp_path / "root"
    (root / "helpers").mkdir(parents=True)
    for slug in ("01_alpha", "02_beta"):
        (root / "data" / slug).mkdir(parents=True)
        _write_nb(sandbox / f"{slug}.ipynb", ["x = 1"])
    monkeypatch.setattr(build, "ROOT", root)
    (root / "data" / "README.md").write_text("| row |\n")
    (root / "data" / "01_alpha" / "w.json").write_text("{}")
    key = build.input_key("01_alpha", {})
    (root / "data" / "README.md").write_text("| row |\n| another row |\n")  # documentation only
    (root / "data" / "02_beta" / "w.json").write_text("{}")  # another chapter's data
    assert build.input_key("01_alpha", {}) == key
    (root / "data" / "01_alpha" / "w.json").write_text('{"a": 1}')  # its own checkpoint
    assert build.input_key("01_alpha", {}) != key


def test_scoreboard_is_generated_from_records(sandbox, tmp_path):
    _write_nb(sandbox / "s.ipynb", ["x = 1"])
    nb = nbformat.read(sandbox / "s.ipynb", as_version=4)
    nb.cells.insert(0, nbformat.v4.new_markdown_cell("# A title here"))
    nbformat.write(nb, sandbox / "s.ipynb")
    res = tmp_path / "res"
    res.mkdir()
    from helpers.claims import ClaimsRecord

    rec = ClaimsRecord("s", {"seed": 0, "quick": True})
    rec.check("k", 1, 1)
    rec.claim("c1", "faster", paper="6.2x", measured=[2.0, 7.0, 1.0], op=">=", target=6.2, unit="x",
              baseline=[1.0, 1.0, 1.0])
    rec.claim("c2", "exact", paper="exact", measured=0.0, op="<=", target=1e-9)
    path = rec.save(res, display=False)
    md = build.scoreboard_markdown(["s"], res, quick=True)
    assert "\n## A title here\n" in md
    assert "quick mode" in md and "6.2" in md and "mixed" in md and "n=3" in md
    assert "2 claims**: 1 held, 1 mixed, 0 not held, 0 inconclusive, 0 untested" in md
    summary_at, detail_at = md.index("## Summary"), md.index("## A title here")
    assert summary_at < detail_at and "{ref}`s <score-s>`" in md[summary_at:detail_at]
    assert "No record" in build.scoreboard_markdown(["s"], tmp_path, quick=False)
    # a verdict that its numbers do not give stops the build, and so does an old (schema 1) record
    data = json.loads(path.read_text())
    data["claims"][0]["verdict"] = "held"
    path.write_text(json.dumps(data))
    with pytest.raises(SystemExit, match="c1.*mixed"):
        build.scoreboard_markdown(["s"], res, quick=True)
    data["schema"] = 1
    path.write_text(json.dumps(data))
    with pytest.raises(SystemExit, match="schema"):
        build.scoreboard_markdown(["s"], res, quick=True)


def test_check_html_finds_missing_pages_errors_and_chapters_without_figures(tmp_path, monkeypatch):
    html = tmp_path / "_build" / "html"
    (html / "book").mkdir(parents=True)
    (html / "notebooks").mkdir()
    monkeypatch.setattr(build, "BUILD", tmp_path / "_build")
    monkeypatch.setattr(build, "toc_entries",
                        lambda: ["book/intro", "book/gone", "notebooks/a", "notebooks/b", "notebooks/c"])
    (html / "book/intro.html").write_text("<p>hi</p>")
    (html / "notebooks/a.html").write_text('<img src="x.png"><p>fine</p>')
    (html / "notebooks/b.html").write_text('<img src="x.png"><div class="output traceback">Traceback (most recent '
                                           "call last)</div>")
    (html / "notebooks/c.html").write_text("<p>no figure</p>")
    problems = build.check_html(quick=False)
    assert len(problems) == 3
    assert any("book/gone" in p for p in problems)
    assert any("notebooks/b" in p and "error" in p for p in problems)
    assert any("notebooks/c" in p and "figure" in p for p in problems)


def test_check_repo_finds_outputs_and_drift(sandbox):
    py = sandbox / "x.py"
    py.write_text("# %% tags=[\"parameters\"]\nquick = False\nseed = 0\n")
    _write_nb(sandbox / "x.ipynb", [])
    problems = build.check_repo()
    assert any("out of sync" in p for p in problems)
    nb = nbformat.read(sandbox / "x.ipynb", as_version=4)
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", text="hi")]
    nb.cells[0].execution_count = 1
    nbformat.write(nb, sandbox / "x.ipynb")
    assert any("carries outputs" in p for p in build.check_repo())
    long = "x = " + " + ".join(["1"] * 40) + "\n"
    py.write_text("# %% tags=[\"parameters\"]\nquick = False\nseed = 0\n\n# %%\n" + long)
    _write_nb(sandbox / "x.ipynb", [long.strip()])
    assert any("longer than 88 columns" in p and "cell 1" in p for p in build.check_repo())
    (sandbox / "lonely.py").write_text("x = 1\n")
    assert any("lonely" in p and "pair" in p for p in build.check_repo())


def test_a_chapter_over_its_budget_is_a_warning_not_a_failure(monkeypatch, capsys):
    slow = build.RunResult("slow_nb", True, seconds=75.0, checks="1/1", claims="1 / 0 / 0 / 0 / 0",
                           over_budget=True, counts={v: int(v == "held") for v in build.VERDICTS},
                           cpu_seconds=58.0, warning="over the 60 s budget: 75 s wall")
    monkeypatch.setattr(build, "toc_notebooks", lambda: ["slow_nb"])
    monkeypatch.setattr(build, "run_notebooks", lambda *a, **k: [slow])
    monkeypatch.setattr(build, "build_html", lambda *a, **k: "index.html")
    monkeypatch.setattr(build, "check_html", lambda *a, **k: [])
    assert build.main(["book", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "WARNING: over the 60 s budget: 75 s wall" in out and "1 held, 0 mixed" in out and "58.0" in out
    assert "1 over the 60 s budget (a warning, not a failure" in out
    hung = build.RunResult("slow_nb", False, seconds=130.0, cpu_seconds=121.0,
                           error="hang guard: the kernel used 121 CPU s, past 2x the 60 s budget (120 s)")
    monkeypatch.setattr(build, "run_notebooks", lambda *a, **k: [hung])
    assert build.main(["book", "--quick"]) == 1
    assert "FAILED slow_nb: hang guard" in capsys.readouterr().out


@pytest.mark.parametrize("cpu, wall, quick, fails, warns", [
    (10, 30, True, False, ""),            # within budget
    (50, 300, True, False, "300 s wall"),  # a loaded machine: wall time stretches, the work does not
    (70, 70, True, False, "70 s CPU"),     # over in CPU too, still under the hang guard
    (120, 400, True, False, "120 s CPU"),  # exactly 2x: not past it
    (121, 121, True, True, ""),           # past 2x the quick budget in CPU: fails
    (590, 590, False, False, "590 s wall, 590 s CPU"),
    (601, 200, False, True, ""),          # past 2x the default budget
])
def test_judge_budget(cpu, wall, quick, fails, warns):
    fail, warning = build.judge_budget(cpu, wall, quick)
    assert (fail is not None) == fails
    if fails:
        assert "hang guard" in fail and f"{build.budget_s(quick)} s budget" in fail
        assert warning == ""
    else:
        assert warns in warning and (warning == "") == (warns == "")
        if warning:
            assert f"over the {build.budget_s(quick)} s budget" in warning


def test_hang_guard_counts_the_cpu_of_child_processes_and_stops_them():
    import subprocess
    import time as _t

    busy = [sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0: pass"]
    with build.HangGuard(limit_s=100, every=0.2) as g:
        subprocess.run(busy, check=True)  # ended and waited for: counted through RUSAGE_CHILDREN
    assert not g.tripped and 0.8 < g.cpu_seconds() < 5
    spin = [sys.executable, "-c", "while True: pass"]
    with build.HangGuard(limit_s=0.5, every=0.1) as g:
        p = subprocess.Popen(spin)
        t0 = _t.monotonic()
        while p.poll() is None and _t.monotonic() - t0 < 20:
            _t.sleep(0.1)
    assert g.tripped and p.returncode is not None and p.returncode != 0, "the guard did not stop a spinning child"


def test_scoreboard_and_table_list_chapters_in_book_order(sandbox, tmp_path, monkeypatch, capsys):
    res = tmp_path / "res"
    res.mkdir()
    from helpers.claims import ClaimsRecord

    for slug in ("b_nb", "a_nb"):
        _write_nb(sandbox / f"{slug}.ipynb", ["x = 1"])
        rec = ClaimsRecord(slug, {"seed": 0, "quick": True})
        rec.claim("c", "s", paper=1, measured=1.0, op="==", target=1)
        rec.save(res, display=False)
    monkeypatch.setattr(build, "toc_notebooks", lambda: ["b_nb", "a_nb"])  # the book puts b before a
    md = build.scoreboard_markdown(["a_nb", "b_nb"], res, quick=True)  # e.g. the order they finished
    summary = md[md.index("## Summary"):]
    assert summary.index("`b_nb <") < summary.index("`a_nb <")
    assert "| " + " | ".join(build.VERDICTS) + " |" in md  # one column per verdict of helpers.claims
    build.print_table([build.RunResult("a_nb", True), build.RunResult("b_nb", True)], quick=True)
    out = capsys.readouterr().out
    assert out.index("b_nb") < out.index("a_nb")


def _md(text):
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def _code(n_lines, tags=()):
    return {"cell_type": "code", "metadata": {"tags": list(tags)}, "source": "\n".join(["x = 1"] * n_lines),
            "outputs": [], "execution_count": None}


def test_long_visible_cells():
    cells = [_md("# t"), _code(60), _code(61), _code(200, ["hide-input"]), _code(90, ["remove-input"]),
             _code(70, ["remove-cell"]), _code(75, ["parameters"])]
    assert build.long_visible_cells(cells) == [(2, 61), (6, 75)]
    assert build.long_visible_cells([_code(61) | {"source": "x = 1\n" * 60 + "\n\n"}]) == []  # trailing blanks


def test_prose_numbers_counts_typed_results_not_the_papers():
    text = "\n".join([
        "# A title",
        "| | the paper | this notebook |",
        "|---|---|---|",
        "| speed-up | 6.2x on 64 GPUs | 2.5x on 2 cores, lr 1e-3 |",
        "",
        "The paper reports 0.95 of the ideal. <!-- paper -->",
        "We measured 0.83 here, and 1.5x at seed 1; version 2.13.0, `lr=0.001`, see [ref](http://x.org/2406.1).",
        "| method | ours |",
        "|---|---|",
        "| EIT | 0.047 |",
    ])
    assert build.prose_numbers(text) == ["0.83", "1.5", "0.047"]
    assert build.prose_numbers("integers 3, 5 and 100% are fine; so is v1.5 and x1.5") == []


def test_repo_counts_allowances_only_go_down(sandbox, tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("It ran 0.5 s faster, then 0.7."),
                nbformat.v4.new_code_cell("\n".join(["x = 1"] * 61))]
    nbformat.write(nb, sandbox / "c_nb.ipynb")
    counts = build.repo_counts(sandbox)
    assert counts == {"c_nb": {"long_cells": 1, "prose_numbers": 2}}
    # at its allowance: reported, not a problem; over it (or not listed: allowance 0): a problem
    at = {"long_cells": {"c_nb": 1}, "prose_numbers": {"c_nb": 2}}
    assert build.count_problems(counts, at) == []
    problems = build.count_problems(counts, {"long_cells": {"c_nb": 1}, "prose_numbers": {}})
    assert len(problems) == 1 and "2 decimal numbers" in problems[0] and "allowance of 0" in problems[0]
    # tightening lowers to today's counts, never raises, and drops zeros
    loose = {"long_cells": {"c_nb": 3, "gone_nb": 2}, "prose_numbers": {"c_nb": 1}}
    assert build.tightened(counts, loose) == {"long_cells": {"c_nb": 1, "gone_nb": 2}, "prose_numbers": {"c_nb": 1}}
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(at))
    assert build.read_baseline(path) == at
    assert build.read_baseline(tmp_path / "missing.json") == {"long_cells": {}, "prose_numbers": {}}


def test_committed_notebooks_are_within_their_allowances():
    """Over an allowance fails check-repo; under it, `python book/build.py check-repo --tighten` lowers it."""
    assert build.count_problems(build.repo_counts(), build.read_baseline()) == []
