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
4. Link every page to the same page of the other edition (English at the site's
   root, zh-TW under ``zh-TW/``): a link at the top of the article and a
   ``<link rel="alternate" hreflang>`` in the head. ``tb_edition`` says which
   edition is being built.
5. Resolve the Chinese search's word list (``html_search_options["dict"]``)
   against the configuration's folder, wherever the build is started from.
6. Finish the themes' zh-TW labels. sphinx-book-theme's zh_TW catalogue lacks a
   few of its strings and hard-codes two; pydata-sphinx-theme has only a
   Simplified ``zh`` catalogue, which Sphinx falls back to for zh_TW. After the
   build, ``UI_ZH_TW`` replaces those labels (as whole attribute values or whole
   texts of an element) in every page of the zh-TW edition.
"""

import html
import json
import re
from pathlib import Path

# edition -> (its folder under the site's root, the link text that leads to it)
EDITIONS = {
    "en": ("", "Read this page in English"),
    "zh-TW": ("zh-TW/", "閱讀本頁的正體中文版"),
}

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


# The themes' labels that reach a zh-TW page in English or in Simplified characters
UI_ZH_TW = {
    "Color mode": "色彩模式",
    "System Settings": "系統設定",
    "Launch interactive content": "啟動互動內容",
    "Launch on Binder": "在 Binder 上啟動",
    "Launch on Colab": "在 Colab 上啟動",
    "Toggle primary sidebar": "切換主側欄",
    "Toggle secondary sidebar": "切換次側欄",
    "Source repositories": "原始碼儲存庫",
    "Repository": "儲存庫",
    "Open issue": "開啟議題",
    "Binder logo": "Binder 標誌",
    "Colab logo": "Colab 標誌",
    "Main": "主要導覽",
    "Page": "本頁",
    "当前页面": "目前頁面",
    "网页导航": "網站導覽",
    "上一页": "上一頁",
    "下一页": "下一頁",
    "回到顶部": "回到頂端",
    "跳转至主要内容": "跳至主要內容",
}
_UI_PATTERN = re.compile(
    r'(?P<attr>(?:title|aria-label|data-bs-title|alt)=")(?P<a>[^"<>]+)(?=")'
    r"|(?P<open>>\s*)(?P<t>[^<>]+?)(?=\s*<)"
)


def translate_ui(page: str, table: dict[str, str]) -> str:
    """``page`` with each label of ``table`` replaced, where it is a whole attribute
    value (title, aria-label, data-bs-title, alt) or the whole text of an element,
    outside the article (the page's content, code included, is left alone)."""

    def swap(match: re.Match) -> str:
        if match.group("attr"):
            value = match.group("a")
            return match.group("attr") + table.get(value, value)
        text = match.group("t")
        return match.group("open") + table.get(text, text)

    start = page.find('<article class="bd-article"')
    end = page.find("</article>", start)
    if start < 0 or end < 0:
        return _UI_PATTERN.sub(swap, page)
    return (
        _UI_PATTERN.sub(swap, page[:start])
        + page[start:end]
        + _UI_PATTERN.sub(swap, page[end:])
    )


def _finish_ui_labels(app, exception):
    if exception is not None or app.config.tb_edition != "zh-TW":
        return
    if app.builder.format != "html":
        return
    notice = f"© Copyright {app.config.copyright}."  # pydata's footer, untranslated
    table = {**UI_ZH_TW, notice: f"© {app.config.copyright} 版權所有。"}
    for path in Path(app.outdir).rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        new = translate_ui(text, table)
        if new != text:
            path.write_text(new, encoding="utf-8")


def other_edition(edition: str, pagename: str) -> tuple[str, str, str]:
    """(language, relative URL, link text) of ``pagename`` in the other edition."""
    if edition not in EDITIONS:
        raise ValueError(f"tb_edition must be one of {sorted(EDITIONS)}: {edition!r}")
    (other,) = (e for e in EDITIONS if e != edition)
    up = "../" * (pagename.count("/") + EDITIONS[edition][0].count("/"))
    folder, text = EDITIONS[other]
    return other, f"{up}{folder}{pagename}.html", text


def _edition_link(app, pagename, templatename, context, doctree):
    if doctree is None or "body" not in context:  # search, index: no counterpart
        return
    lang, href, text = other_edition(app.config.tb_edition, pagename)
    href = html.escape(href)
    context["body"] = (
        f'<p class="tb-edition-link" style="text-align:right;margin:0 0 0.5em">'
        f'<a href="{href}" hreflang="{lang}" lang="{lang}">{text}</a></p>\n'
        + context["body"]
    )
    context["metatags"] = (
        context.get("metatags", "")
        + f'\n<link rel="alternate" hreflang="{lang}" href="{href}">'
    )


def _search_dictionary(app, config):
    options = dict(config.html_search_options or {})
    if options.get("dict"):
        options["dict"] = str((Path(app.confdir) / options["dict"]).resolve())
        if not Path(options["dict"]).is_file():
            raise FileNotFoundError(f"html_search_options dict: {options['dict']}")
        config.html_search_options = options


def setup(app):
    app.add_config_value("tb_edition", "en", "html")
    app.connect("config-inited", _search_dictionary)
    app.connect("builder-inited", _add_widget_shim)
    app.connect("html-page-context", _dedupe, priority=100)
    app.connect("html-page-context", _edition_link)
    app.connect("build-finished", _finish_ui_labels)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
