"""Drop duplicated <script> tags from every page of the book.

With Jupyter Book 1.0.4 (Sphinx 7.4), sphinx-thebe and sphinx-togglebutton register
their inline scripts twice, and the second ``const THEBE_JS_URL = ...`` is a
JavaScript error in the browser ("Identifier 'THEBE_JS_URL' has already been
declared"). Removing exact duplicates leaves every page as intended.
"""


def _dedupe(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        attributes = getattr(script, "attributes", {}) or {}
        name = getattr(script, "filename", script) or ""  # None and "" are the same
        key = (str(name), tuple(sorted(attributes.items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique


def setup(app):
    app.connect("html-page-context", _dedupe, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
