"""Small fixes to the HTML that Jupyter Book 1.0.4 writes, so pages load cleanly.

1. Drop duplicated <script> tags. sphinx-thebe and sphinx-togglebutton register
   their inline scripts twice, and the second ``const THEBE_JS_URL = ...`` is a
   JavaScript error ("Identifier 'THEBE_JS_URL' has already been declared").
2. Let the ipywidgets HTML manager live with MathJax 3. The widget libraries
   typeset labels with MathJax 2's ``MathJax.Hub.Queue``, which MathJax 3 does not
   have ("Cannot read properties of undefined (reading 'Queue')"); a two-line
   ``Hub`` forwards to MathJax 3's ``typesetPromise``.
3. Point the HTML manager's fonts at the manager's own folder. Its style sheets
   name them with a path relative to the page (404s, and console errors); the
   folder is taken from the manager's URL in ``nb_ipywidgets_js``.
"""

import json

WIDGET_SHIM = """
(function () {
  var hub = {
    Queue: function (job) {
      var element = job && job[2];
      if (element && window.MathJax.typesetPromise) {
        window.MathJax.typesetPromise([element]).catch(function () {});
      }
    }
  };
  var config = (window.MathJax = window.MathJax || {});
  config.Hub = hub;  // for widgets that render before MathJax 3 has loaded
  config.startup = config.startup || {};
  config.startup.ready = function () {  // MathJax 3's documented start-up hook
    window.MathJax.startup.defaultReady();
    window.MathJax.Hub = hub;
  };
})();
"""

FONT_FIX = """
(function () {
  // The manager's style sheets name its hashed font files with a path relative to
  // the page, and it forces a style recalculation right after inserting them, so
  // the text is fixed as it is inserted: before the browser can fetch anything.
  var base = %s;
  var wrong = new RegExp(
    "url\\\\((['\\"]?)[^)'\\"]*@jupyter-widgets/(?:html-manager/dist/)?" +
      "([0-9a-f]{20}\\\\.(?:woff2?|ttf|eot|svg))",
    "g"
  );
  function fix(parent, node) {
    var isText = node && node.nodeType === 3;
    var isStyleText = isText && parent && parent.tagName === "STYLE";
    if (isStyleText && node.data.search(wrong) >= 0) {
      node.data = node.data.replace(wrong, "url($1" + base + "$2");
    }
    if (node && node.tagName === "STYLE" && node.textContent.search(wrong) >= 0) {
      node.textContent = node.textContent.replace(wrong, "url($1" + base + "$2");
    }
  }
  ["appendChild", "insertBefore"].forEach(function (name) {
    var original = Node.prototype[name];
    Node.prototype[name] = function (node) {
      fix(this, node);
      return original.apply(this, arguments);
    };
  });
})();
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


def _add_widget_shim(app):
    urls = [
        u for u in getattr(app.config, "nb_ipywidgets_js", {}) if "html-manager" in u
    ]
    if not urls:
        return
    assets = urls[0].rsplit("/", 1)[0] + "/"  # .../html-manager@X/dist/
    # Before the manager loads and injects its style sheets.
    app.add_js_file(None, body=FONT_FIX % json.dumps(assets), priority=400)
    # After the MathJax configuration (priority 500), which replaces window.MathJax.
    app.add_js_file(None, body=WIDGET_SHIM, priority=510)


def setup(app):
    app.connect("builder-inited", _add_widget_shim)
    app.connect("html-page-context", _dedupe, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
