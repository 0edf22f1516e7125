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
   folder is that of the manager's ``<script>`` (the local copy's, or the CDN's:
   book_offline.py).
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
   texts of an element) in every page of the zh-TW edition. myst-nb's hidden-cell
   toggles ("Show code cell output"), inside the article, are translated with 8.'s
   fixes (``translate_toggles``), before the English runs are marked.
7. Give every figure its text alternative. ``plot.show(fig, alt)`` stores the
   figure's finding in the output's metadata (``image/png``: ``alt``); myst-nb
   reads only ``width`` and ``height`` there, so its image renderer is wrapped to
   take ``alt`` too. Without it the ``<img>``'s alt would be the file's hash name.
8. WCAG 2.1 AA fixes to the themes' HTML (after the build, every page):
   - the search button's accessible name is its visible text ("Search Ctrl+K"):
     its ``aria-label`` ("Search") left out the shortcut (label-content-name-mismatch);
   - the same for myst-nb's "Show code cell source" toggles and for the colour-mode
     button, whose icons' titles ("Light") were read as its text;
   - the bibliography's entries are ``listitem``s of its ``role="list"``, not the
     deprecated ``doc-biblioentry`` (aria-required-children, aria-deprecated-role);
   - the language of every part (WCAG 3.1.2): in an English page each run of Chinese
     text is wrapped in ``<span lang="zh-Hant-TW">``, and in a zh-TW page each run of
     English words in ``<span lang="en">``, outside code, formulas and scripts;
   - a slider's handle is named by its widget's label (aria-input-field-name), by a
     script, since the widget library draws the handle in the browser;
   - reflow at 320 CSS pixels (WCAG 1.4.10): inline code wraps, widgets and images
     fit the column, display math scrolls in its own box (``A11Y_CSS``);
   - Chinese inside formulas (MathJax's output, drawn in the browser) is marked
     Chinese too, by the same script as the widgets' text (``WIDGET_A11Y``).
9. Chinese set as Chinese text (issue 41): emphasis in Chinese is upright, with
   emphasis dots, not slanted (``A11Y_CSS``); a zh-TW build has no smart quotes
   (Sphinx's zh_TW ones turned the English text's apostrophes into 』); the theme's
   author line takes no space after "作者：". The translations' own typesetting is
   scripts/i18n.py's ``typeset_chinese``; tests/rendered_text.py holds the rules.
10. The search page's result summaries show the pages' prose, not their source:
    formulas as plain text, no code (``SEARCH_JS``).
"""

import html
import re
from pathlib import Path

# edition -> the file name of its PDF (scripts/pdf.py, `make pdf`): in _build/pdf/,
# and in the folder pdf/ of the edition's site, where the download menu links to it
PDF_NAMES = {
    "en": "attention-step-by-step.pdf",
    "zh-TW": "attention-step-by-step.zh-TW.pdf",
}

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
  var base = null;  // the folder of the manager's script, local copy or CDN
  function managerFolder() {
    var script = document.querySelector("script[src*='/html-manager@']");
    return script ? script.src.split(/[?#]/)[0].replace(/[^\\/]*$/, "") : "";
  }
  var wrong = new RegExp(
    "url\\\\((['\\"]?)[^)'\\"]*@jupyter-widgets/(?:html-manager/dist/)?" +
      "([0-9a-f]{20}\\\\.(?:woff2?|ttf|eot|svg))",
    "g"
  );
  function fix(parent, node) {
    base = base || managerFolder();
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


def _image_alt_from_output_metadata() -> None:
    """Wrap myst-nb's image renderer so that it reads ``alt`` from the output's
    metadata, as it reads ``width`` and ``height`` (see 7. above)."""
    from myst_nb.core.render import NbElementRenderer

    original = NbElementRenderer.render_image
    if getattr(original, "_tb_alt", False):
        return

    def render_image(self, data):
        elements = original(self, data)
        alt = data.output_metadata.get(data.mime_type, {}).get("alt")
        if isinstance(alt, str):
            for element in elements:
                element["alt"] = alt
        return elements

    render_image._tb_alt = True
    NbElementRenderer.render_image = render_image


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
    # Before the manager loads and injects its style sheets.
    app.add_js_file(None, body=FONT_FIX, priority=400)
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
    "请启用 JavaScript 以启用搜索功能。": "請啟用 JavaScript 以使用搜尋功能。",
}
# sphinx-book-theme's author line, "{{ translate('By') }} {{ author }}": in zh-TW
# "作者：" and a space, which a full-width colon does not take
_AUTHOR_LINE = re.compile(r'(<p class="component-author">\s*[^<\s]*：)\s+')
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
        new = _AUTHOR_LINE.sub(r"\1", translate_ui(text, table))
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


def _no_smart_quotes_in_chinese(app, config):
    """Sphinx's smart quotes, in a zh_TW build, turn the straight quotes of the
    English text left on the page (code outputs, quoted titles) into 「」『』, and
    guess wrong ("weights' last bit" became "weights』 last bit"; ""O(1)..."" became
    」O(1)...」). The translations write their own 「」."""
    if config.tb_edition == "zh-TW":
        config.smartquotes = False


def _search_summaries(app, pagename, templatename, context, doctree):
    if pagename == "search":
        app.add_js_file(None, body=SEARCH_JS, priority=900)


def _search_dictionary(app, config):
    options = dict(config.html_search_options or {})
    if options.get("dict"):
        options["dict"] = str((Path(app.confdir) / options["dict"]).resolve())
        if not Path(options["dict"]).is_file():
            raise FileNotFoundError(f"html_search_options dict: {options['dict']}")
        config.html_search_options = options


def setup(app):
    _image_alt_from_output_metadata()
    app.add_config_value("tb_edition", "en", "html")
    app.connect("config-inited", _search_dictionary)
    app.connect("config-inited", _no_smart_quotes_in_chinese)
    app.connect("html-page-context", _search_summaries)
    app.connect("builder-inited", _add_widget_shim)
    app.connect("html-page-context", _dedupe, priority=100)
    app.connect("html-page-context", _edition_link)
    app.connect("builder-inited", _add_accessibility)
    app.connect("build-finished", _finish_ui_labels)
    app.connect("build-finished", _accessible_pages)
    app.connect("build-finished", _pdf_menu_items)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


# -- 8. WCAG 2.1 AA fixes to the built HTML ---------------------------------------

_HAN = "\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
# A run of Chinese text: Chinese characters and punctuation, and the short Latin,
# digit and space stretches between them ("從 GPT-3 的 175B 參數").
CHINESE_RUN = re.compile(rf"[{_HAN}](?:[ \w\-+.%/·]{{0,12}}?[{_HAN}])*")
# A run of English words: words of Latin letters, with the spaces and punctuation
# between them: two words or more, or one lower-case word (a name such as GPT or
# Colab, or a symbol such as T, is not English text).
ENGLISH_RUN = re.compile(
    r"[A-Za-z][A-Za-z'’\-]*(?:[ ,.:;!?'’\-]+[A-Za-z][A-Za-z'’\-]*)*"
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'’\-]*")
LANG_OF = {"en": "zh-Hant-TW", "zh-TW": "en"}  # edition -> language to mark
_TAG = re.compile(r"<!--.*?-->|<(?:[^>\"']|\"[^\"]*\"|'[^']*')*>", re.S)
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
         "source", "track", "wbr", "param"}  # fmt: skip
# Elements whose text is no place for a <span>: scripts, formulas (TeX source),
# the head; and code, whose English words are not English prose (in a zh-TW page),
# while its Chinese strings ("銀行") are Chinese (in an English page)
_SKIP = {"script", "style", "textarea", "title", "svg", "math", "head", "option"}
_SKIP_CLASS = re.compile(r"\bclass=\"[^\"]*\bmath\b")
_CODE = {"pre", "code", "kbd", "samp"}
_CODE_CLASS = re.compile(r"\bclass=\"[^\"]*\b(?:highlight|pre)\b")


def _runs(text: str, edition: str) -> str:
    """``text`` (HTML text between tags) with each run in the other language
    wrapped in a ``<span lang>``.

    The runs are found in the text as a reader sees it (``&amp;`` is "&"), so a
    span never starts or ends inside a character reference (``&<span>amp;``
    showed "&amp;" as text); what is copied is the HTML as it was.
    """
    if "&" not in text:
        return _wrap_runs(text, list(range(len(text) + 1)), text, edition)
    shown, starts = [], []  # the text with references decoded; where each came from
    for piece in _REFERENCE_OR_CHAR.finditer(text):
        value = piece.group(0)
        shown.append(html.unescape(value) if value.startswith("&") else value)
        starts.append(piece.start())
    starts.append(len(text))
    offsets = []  # where each decoded character is in the HTML
    for value, start in zip(shown, starts, strict=False):
        offsets += [start] * len(value)
    offsets.append(len(text))
    return _wrap_runs("".join(shown), offsets, text, edition)


def _wrap_runs(plain: str, offsets: list[int], text: str, edition: str) -> str:
    """``text`` with each run of the other language in ``plain`` (its decoded
    text, whose character i comes from ``text[offsets[i]]``) wrapped."""
    lang = LANG_OF[edition]
    pattern = CHINESE_RUN if edition == "en" else ENGLISH_RUN
    out, last = [], 0
    for match in pattern.finditer(plain):
        run = match.group(0)
        if edition == "zh-TW":
            words = _WORD.findall(run)
            if len(words) < 2 and not any(w.islower() and len(w) > 1 for w in words):
                continue  # a name (GPT, Colab) or a symbol (T), not English text
        start, end = offsets[match.start()], offsets[match.end()]
        out += [text[last:start], f'<span lang="{lang}">', text[start:end], "</span>"]
        last = end
    out.append(text[last:])
    return "".join(out)


# One character reference (&amp; &#8217; &#x2019;) or one other character
_REFERENCE_OR_CHAR = re.compile(
    r"&(?:[A-Za-z][A-Za-z0-9]*|#[0-9]+|#[xX][0-9A-Fa-f]+);|.", re.S
)


def _declares(tag: str, lang: str) -> bool:
    """Whether a start tag declares ``lang`` (or a variant of it) as its language."""
    declared = re.search(r"\slang=\"([^\"]*)\"", tag)
    if declared is None:
        return False
    return declared.group(1).split("-")[0].lower() == lang.split("-")[0].lower()


def mark_languages(page: str, edition: str) -> str:
    """``page`` with every run of text in the other edition's language marked with
    its ``lang`` (WCAG 3.1.2), outside code, formulas, scripts and elements that
    already declare a language."""
    if edition not in LANG_OF:
        raise ValueError(f"edition must be one of {sorted(LANG_OF)}: {edition!r}")
    out, stack, last = [], [], 0  # stack: (tag name, leaves its text alone)
    for match in _TAG.finditer(page):
        if match.start() < last:  # inside a script's raw text, already copied
            continue
        text = page[last : match.start()]
        if text.strip() and not any(skip for _, skip in stack):
            text = _runs(text, edition)
        out.append(text)
        tag = match.group(0)
        out.append(tag)
        last = match.end()
        if tag.startswith("<!") or tag.startswith("<?"):
            continue
        name = re.match(r"</?\s*([A-Za-z][\w:-]*)", tag)
        if name is None:
            continue
        name = name.group(1).lower()
        if tag.startswith("</"):
            for i in range(len(stack) - 1, -1, -1):
                if stack[i][0] == name:
                    del stack[i:]
                    break
        elif name not in _VOID and not tag.endswith("/>"):
            code = name in _CODE or bool(_CODE_CLASS.search(tag))
            skip = (
                name in _SKIP
                or name.startswith("mjx-")
                or bool(_SKIP_CLASS.search(tag))
                or _declares(tag, LANG_OF[edition])
                or (code and edition == "zh-TW")
            )
            stack.append((name, skip))
            if name in {"script", "style", "textarea"}:  # raw text up to the end tag
                end = page.lower().find(f"</{name}", last)
                end = len(page) if end < 0 else end
                out.append(page[last:end])
                last = end
    out.append(page[last:])
    return "".join(out)


# The search button: its visible text ("Search", then the Ctrl+K shortcut) names it
_SEARCH_BUTTON = re.compile(
    r'(<button class="btn search-button-field[^"]*"[^>]*?) aria-label="[^"]*"'
)


# The colour-mode button's icons, whose titles ("Light") the icon font's script turns
# into the button's visible text
_THEME_ICON = re.compile(
    r'(<i class="theme-switch [^"]*"[^>]*?)\s+title="[^"]*"([^>]*>)'
)


# myst-nb's hidden-cell toggles ("Show code cell source"), in the zh-TW edition: its
# prompt is one setting for both editions, and it names the part in English ({type})
TOGGLE_VERBS_ZH_TW = {"Show": "顯示", "Hide": "隱藏"}
TOGGLE_PARTS_ZH_TW = {
    "source": "程式碼",
    "output": "程式碼輸出",
    "outputs": "程式碼輸出",
    "content": "整個儲存格",
}
_TOGGLE = re.compile(
    r'(<p class="(?:collapsed|expanded) admonition-title">)\s*'
    r"(Show|Hide) code cell (source|outputs|output|content)\s*(</p>)"
)


def translate_toggles(page: str) -> str:
    """``page`` with myst-nb's hidden-cell toggles in zh-TW ("顯示程式碼輸出")."""
    return _TOGGLE.sub(
        lambda m: m[1] + TOGGLE_VERBS_ZH_TW[m[2]] + TOGGLE_PARTS_ZH_TW[m[3]] + m[4],
        page,
    )


def accessible_page(page: str, edition: str) -> str:
    """``page`` with the WCAG fixes of 8. above that are made in the HTML, and, in
    the zh-TW edition, its hidden-cell toggles in zh-TW (before the English runs
    are marked: a toggle's text is the page's language, not an English part)."""
    if edition == "zh-TW":
        page = translate_toggles(page)
    page = _SEARCH_BUTTON.sub(r"\1", page)
    # The colour-mode button is named by its aria-label; its icons' titles ("Light")
    # would be read as its visible text, which the label does not contain
    # myst-nb's hidden-cell toggles: "Show code cell source" names them, not the
    # aria-label "Toggle hidden content" that leaves the visible text out
    page = page.replace('<summary aria-label="Toggle hidden content">', "<summary>")
    page = _THEME_ICON.sub(r'\1 aria-hidden="true"\2', page)
    page = page.replace(
        'class="citation" id=', 'class="citation" role="listitem" id='
    ).replace(' role="doc-biblioentry"', "")
    return mark_languages(page, edition)


def _accessible_pages(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    for path in Path(app.outdir).rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        new = accessible_page(text, app.config.tb_edition)
        if new != text:
            path.write_text(new, encoding="utf-8")


# What the widget library and MathJax draw in the browser, after the build: each
# slider handle takes its widget's label as its accessible name, and, in an English
# page, each text with Chinese characters (a token in a dropdown, a label, a
# \text{} in a formula) is marked Chinese: the element itself when the text is all
# it holds, else a <span> around the text.
WIDGET_A11Y = """
(function () {
  var han = /[\\u3400-\\u4dbf\\u4e00-\\u9fff\\uf900-\\ufaff]/;
  function nameSliders(root) {
    root.querySelectorAll(".widget-hslider .noUi-handle:not([aria-label])")
      .forEach(function (handle) {
        var slider = handle.closest(".widget-hslider");
        var label = slider && slider.querySelector(".widget-label");
        var text = label && label.textContent.trim();
        if (text) handle.setAttribute("aria-label", text);
      });
  }
  function markChinese(root) {
    if (!/^en/i.test(document.documentElement.lang)) return;
    var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    var found = [];
    for (var node = walker.nextNode(); node; node = walker.nextNode()) {
      var parent = node.parentElement;
      if (!han.test(node.data) || parent.closest("[lang^=zh], script, style")) continue;
      found.push(node);
    }
    found.forEach(function (node) {
      var parent = node.parentElement;
      if (parent.childNodes.length === 1 || parent.tagName === "OPTION") {
        parent.setAttribute("lang", "zh-Hant-TW");
      } else {
        var span = document.createElement("span");
        span.setAttribute("lang", "zh-Hant-TW");
        parent.replaceChild(span, node);
        span.appendChild(node);
      }
    });
  }
  function fix() {
    document.querySelectorAll(".jupyter-widgets").forEach(function (w) {
      nameSliders(w);
      markChinese(w);
    });
    // MathJax's output: a \\text{餘額} (mjx-utext) and its MathML for screen
    // readers (mi, mtext), once each formula is typeset
    document.querySelectorAll("mjx-container:not([data-tb-lang])")
      .forEach(function (formula) {
        formula.setAttribute("data-tb-lang", "");
        if (han.test(formula.textContent)) markChinese(formula);
      });
  }
  var pending = false;
  new MutationObserver(function () {
    if (pending) return;
    pending = true;
    setTimeout(function () { pending = false; fix(); }, 0);
  }).observe(document.documentElement, { childList: true, subtree: true });
})();
"""

# Reflow at 320 CSS pixels: nothing but code blocks, tables and display math may
# need a horizontal scroll bar, and those scroll inside their own box.
A11Y_CSS = """
code.literal, code.literal span.pre { white-space: normal; overflow-wrap: anywhere; }
.cell_output .widget-subarea, .jupyter-widgets, .widget-box, .widget-hslider,
.widget-dropdown, .widget-toggle-buttons, .widget-html, .widget-html-content {
  max-width: 100% !important; min-width: 0 !important; box-sizing: border-box;
}
.widget-hslider, .widget-dropdown, .widget-toggle-buttons { flex-wrap: wrap; }
.widget-toggle-buttons .widget-toggle-button { width: auto !important; }
.bd-article img, .cell_output img { max-width: 100%; height: auto; }
div.math, mjx-container[display="true"], .math-wrapper { overflow-x: auto; }
.cell_output table { display: block; max-width: 100%; overflow-x: auto; }
/* Code cells and their text outputs in 0.75rem (12 px, GitHub's size for code): at
   1280 px the text column, 656 px inside a cell's padding, then holds 90 characters
   of a 0.6 em monospace (DejaVu Sans Mono, Menlo), so no listing (ruff's 88 columns)
   or text output (tests/test_output_width.py's 90) scrolls sideways on a laptop;
   14 px held 77; inside a hidden output's box (9.6 px narrower each side) the code
   box's own padding is smaller. The browser test measures it. The PDF sets its own
   (print.css). */
@media screen {
  div.cell div.highlight pre { font-size: 0.75rem; }
  div.cell details div.highlight pre { padding-left: 0.4rem; padding-right: 0.4rem; }
}
/* Chinese is not set in italics (a slanted Han character is a distorted one):
   emphasis in Chinese text is shown with emphasis dots under the characters, as
   Taiwan's Ministry of Education prescribes; English inside it stays italic */
:is(em, i:not([class]), cite, dfn, var):lang(zh) {
  font-style: normal; text-emphasis: filled dot; text-emphasis-position: under right;
}
:is(em, i:not([class]), cite, dfn, var) :lang(zh) { font-style: normal; }
:is(em, i:not([class]), cite, dfn, var) :lang(en) {
  font-style: italic; text-emphasis: none;
}
:is(em, i:not([class]), cite, dfn, var) :is(mjx-container, code) {
  text-emphasis: none;
}
"""


def _add_accessibility(app):
    app.add_js_file(None, body=WIDGET_A11Y, priority=520)
    static = Path(app.outdir) / "_static"
    static.mkdir(parents=True, exist_ok=True)
    (static / "tb-a11y.css").write_text(A11Y_CSS, encoding="utf-8")
    app.add_css_file("tb-a11y.css", priority=900)


# -- 9. The search page's result summaries ------------------------------------------

# Sphinx's search shows, under each result, 240 characters of the page's text
# (``Search.htmlToText``: the main part's textContent). That text is what a reader
# of the page never sees: the TeX source of every formula ("\(QK^\top\)"), code
# cells, and blocks run together ("zero✘ Not quite"). This replaces it with the
# page's prose: each formula in plain text ("QKᵀ"), no code, a space between blocks
# (but none after full-width punctuation); in an English page, each run of Chinese
# in the results is marked Chinese, as the pages' own are.
SEARCH_JS = r"""
(function () {
  var SYMBOLS = {
    cdot: "·", times: "×", le: "≤", leq: "≤", ge: "≥", geq: "≥", ne: "≠",
    neq: "≠", approx: "≈", sim: "∼", to: "→", rightarrow: "→", leftarrow: "←",
    mapsto: "↦", in: "∈", sum: "∑", prod: "∏", infty: "∞", top: "ᵀ", ldots: "…",
    dots: "…", cdots: "⋯", sqrt: "√", lVert: "‖", rVert: "‖", Vert: "‖",
    mid: "|", pm: "±", partial: "∂", nabla: "∇", propto: "∝", ll: "≪", gg: "≫",
    odot: "⊙", otimes: "⊗", oplus: "⊕", alpha: "α", beta: "β", gamma: "γ",
    delta: "δ", epsilon: "ε", varepsilon: "ε", zeta: "ζ", eta: "η", theta: "θ",
    lambda: "λ", mu: "μ", nu: "ν", xi: "ξ", pi: "π", rho: "ρ", sigma: "σ",
    tau: "τ", phi: "φ", varphi: "φ", chi: "χ", psi: "ψ", omega: "ω",
    Gamma: "Γ", Delta: "Δ", Theta: "Θ", Lambda: "Λ", Pi: "Π", Sigma: "Σ",
    Phi: "Φ", Psi: "Ψ", Omega: "Ω"
  };
  var SPACING = /^(left|right|big|Big|bigg|Bigg|quad|qquad|displaystyle|limits)$/;
  var FONTS = new RegExp("\\\\(?:text|textbf|mathrm|mathbf|mathit|mathcal|" +
    "operatorname|boldsymbol)\\s*\\{([^{}]*)\\}", "g");
  function texToText(tex) {
    return tex
      .replace(/^\s*(\\\(|\\\[|\$\$?)|(\\\)|\\\]|\$\$?)\s*$/g, "")
      .replace(/\\\\|&/g, " ")
      .replace(/\\(?:begin|end)\s*\{[^{}]*\}/g, " ")
      .replace(/\^\s*\{?\\top\}?/g, "ᵀ")
      .replace(/\\[td]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}/g, "($1)/($2)")
      .replace(/\\[td]?frac\s*(\w)(\w)/g, "$1/$2")
      .replace(FONTS, "$1")
      .replace(/\\([A-Za-z]+)\s*/g, function (all, name) {
        if (SYMBOLS.hasOwnProperty(name)) return SYMBOLS[name];
        return SPACING.test(name) ? "" : name;
      })
      .replace(/\\[,;:! ]/g, " ")
      .replace(/\\(.)/g, "$1")
      .replace(/[{}]/g, "")
      .replace(/\s+/g, " ")
      .trim();
  }
  var BLOCKS = "p, li, dt, dd, td, th, h1, h2, h3, h4, h5, h6, caption, " +
    "figcaption, summary, div";
  var FULL_WIDTH_THEN_SPACE = /([\u3000-\u303f\uff00-\uff65])\s+/g;
  function pageText(htmlString, anchor) {
    var doc = new DOMParser().parseFromString(htmlString, "text/html");
    doc.querySelectorAll(
      ".headerlink, script, style, pre, .highlight, .cell_input, .tb-edition-link"
    ).forEach(function (el) { el.remove(); });
    doc.querySelectorAll(".math").forEach(function (el) {
      el.textContent = texToText(el.textContent);
    });
    doc.querySelectorAll(BLOCKS).forEach(function (el) { el.append(" "); });
    var main = doc.querySelector('[role="main"]');
    var part = main && anchor ? main.querySelector(anchor) : null;
    return ((part || main || doc.body).textContent || "")
      .replace(/\s+/g, " ")
      .replace(FULL_WIDTH_THEN_SPACE, "$1");
  }
  var HAN = /[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]/;
  // a run of Chinese, with the short Latin stretches inside it (CHINESE_RUN)
  var CJK = "\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef";
  var RUN = new RegExp("[" + CJK + "](?:[ \\w\\-+.%/·]{0,12}?[" + CJK + "])*", "g");
  function markChinese(root) {
    var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    var found = [];
    for (var node = walker.nextNode(); node; node = walker.nextNode()) {
      if (HAN.test(node.data) && !node.parentElement.closest("[lang^=zh]")) {
        found.push(node);
      }
    }
    found.forEach(function (node) {
      var text = node.data, last = 0, parts = document.createDocumentFragment();
      text.replace(RUN, function (run, at) {
        parts.append(text.slice(last, at));
        var span = document.createElement("span");
        span.lang = "zh-Hant-TW";
        span.textContent = run;
        parts.append(span);
        last = at + run.length;
      });
      parts.append(text.slice(last));
      node.replaceWith(parts);
    });
  }
  function start() {
    if (typeof Search === "undefined") return;
    Search.htmlToText = pageText;
    var results = document.getElementById("search-results");
    if (!results || !/^en/i.test(document.documentElement.lang)) return;
    new MutationObserver(function () { markChinese(results); })
      .observe(results, { childList: true, subtree: true });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
"""


# -- the download menu offers the edition's PDF (`make pdf`, scripts/pdf.py) ------

_DOWNLOAD_MENU = re.compile(
    r'(<div class="dropdown dropdown-download-buttons">.*?<ul class="dropdown-menu">)',
    re.S,
)
PDF_LABELS = {"en": "PDF of the book", "zh-TW": "全書 PDF"}


def pdf_menu_item(page: str, edition: str, depth: int) -> str:
    """``page`` with its download menu's first item the edition's PDF, which is
    ``pdf/<PDF_NAMES[edition]>`` under the edition's root (``depth`` folders up)."""
    href = "../" * depth + "pdf/" + PDF_NAMES[edition]
    if f'href="{href}"' in page:  # an unchanged page of an incremental build
        return page
    item = (
        f'\n<li><a href="{href}" class="btn btn-sm dropdown-item" download'
        f' title="{PDF_LABELS[edition]}"><span class="btn__icon-container">'
        f'<i class="fas fa-file-pdf"></i></span><span class="btn__text-container">'
        f"{PDF_LABELS[edition]}</span></a></li>"
    )
    return _DOWNLOAD_MENU.sub(lambda m: m.group(1) + item, page, count=1)


def _pdf_menu_items(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    for path in outdir.rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        depth = len(path.relative_to(outdir).parts) - 1
        new = pdf_menu_item(text, app.config.tb_edition, depth)
        if new != text:
            path.write_text(new, encoding="utf-8")
