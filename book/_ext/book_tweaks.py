"""Small Sphinx fixes for the book's site (loaded through `sphinx.local_extensions` in _config.yml).

* sphinx-thebe 0.3.1 and sphinx-togglebutton register its inline configuration script once per docs read, so a page can carry, e.g.,
  ``const THEBE_JS_URL`` twice, which is a JavaScript error; keep one copy of each inline script.
* ``static/book_tweaks.css``: code cells fit the notebooks' 88 columns in the theme's text column.
"""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).resolve().parent / "static"


def _dedupe_scripts(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, out = set(), []
    for js in scripts:
        # the same file or inline body, whatever the priority it was registered with
        key = (str(getattr(js, "filename", js) or ""), tuple(sorted(getattr(js, "attributes", {}).items())))
        if key in seen:
            continue
        seen.add(key)
        out.append(js)
    scripts[:] = out  # in place: later handlers add page scripts to this same list


def _add_static(app, config) -> None:
    if str(STATIC) not in map(str, config.html_static_path):
        config.html_static_path.append(str(STATIC))


def setup(app):
    app.connect("config-inited", _add_static)
    app.add_css_file("book_tweaks.css")
    app.connect("html-page-context", _dedupe_scripts, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
