"""Small Sphinx fixes for the book's site (loaded through `sphinx.local_extensions` in _config.yml).

* sphinx-thebe 0.3.1 and sphinx-togglebutton register its inline configuration script once per docs read, so a page can carry, e.g.,
  ``const THEBE_JS_URL`` twice, which is a JavaScript error; keep one copy of each inline script.
"""

from __future__ import annotations


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


def setup(app):
    app.connect("html-page-context", _dedupe_scripts, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
