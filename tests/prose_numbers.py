"""Find the measured-looking numbers of the book's prose and what they must match.

A number in the prose that a reader takes for a measurement (a decimal, a percentage,
a number with a thousands separator, a multiplier, a number in scientific notation, an
integer with a unit: "53 ms", "12 MiB", "400 steps") must be a number that the code or
outputs of its own ``##`` section show, up to the precision it is written with: "9.3"
matches a printed 9.29, "43,648" matches 43648. A number quoted from elsewhere names
where it is, in the same paragraph or table row: "§7.4 measured 8.4×", "(§5.3)", or
another chapter by name or link, whose sections then count too. A concept check
belongs to the section it closes; an exercise's code includes its checker's module
(``exercises/chNN_*.py``) and the code of its solution; the intro quotes the chapters
it names. The test (``tests/test_prose_numbers.py``) applies this to every Markdown
cell of every chapter, to the intro, and to the concept checks. A number that is a
constant of the
text rather than a measurement (a year, the paper's d_model = 512) goes on the
document's allowlist, ``tests/prose_allowlist/<document>.toml`` (``<document>`` is
the notebook's stem, ``concepts-chNN`` or ``intro``). An entry is either

    "0.58" = "1/sqrt(3), the radius of the circular law: a property of the formula"

or, for a number the prose derives by arithmetic,

    "0.46" = { expr = "0.953 ** 16", why = "the forget gate's product over 16 steps" }

where the test evaluates ``expr`` (Python, with ``math``) and checks that it rounds to
the number as written. An entry whose number no longer appears in the document, or
matches its section's outputs wherever it is written, fails, so the allowlist cannot
go stale.

``python tests/prose_numbers.py [document ...]`` prints every number that matches
nothing (for all documents, or the ones named).
"""

from __future__ import annotations

import importlib
import math
import re
import sys
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import nbformat
import tomllib

ROOT = Path(__file__).resolve().parent.parent
ALLOWLIST_DIR = Path(__file__).with_name("prose_allowlist")

# Text that is not prose: fenced code, inline code, math-free markup, links' targets,
# citation roles, HTML tags and entities. Math stays: "$0.06$" is a number a reader
# reads.
_NOT_PROSE = [
    re.compile(r"```.*?```", re.S),
    re.compile(r"`[^`\n]*`"),
    re.compile(r"\]\([^)]*\)"),  # [text](target): keep text, drop target
    re.compile(r"<[^>]+>"),
    re.compile(r"&\w+;"),
    re.compile(r"https?://\S+"),
]
# Numbers that name a place in a text, not a quantity: §5.6, Exercise 8.6, Chapter
# 1.2, concept check 1.5, Table 3, version 2.13.0, a heading's number.
_REFERENCE = re.compile(
    r"(?:§\s*|\b(?:[Ss]ections?|[Ee]xercises?|[Cc]hapters?|[Cc]hecks?|[Ff]igures?|"
    r"[Tt]ables?|[Aa]lgorithms?|[Ee]quations?|[Ee]q\.|[Vv]ersions?|[Aa]ppendix|"
    r"Python|PyTorch|torch|ipywidgets|numpy|matplotlib|IPython|ipykernel|"
    r"[Ss]teps?|[Ll]ines?|[Cc]ells?)\s+)"
    r"(\d+(?:\.\d+)+)(?:\s*(?:,|and|or|to|–|-)\s*(\d+(?:\.\d+)+))*"
)
_VERSION = re.compile(r"\b\d+\.\d+\.\d+(?:\.\w+)?\b")
_HEADING = re.compile(r"^#+\s+\d+(?:\.\d+)*\s", re.M)

# A measured-looking number in prose. Groups: the number, then an optional % or ×.
_PROSE_NUMBER = re.compile(
    r"(?<![\w.,])(?<![A-Za-z]-)(?:×\s*)?"
    r"(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+)"
    r"(\s?\\?%|\s?×|\s?x\b)?(?![\w,]*\d)"
)
# The first end of a range whose unit is written once: "82–84%", "2–3×".
_RANGE_UNIT = re.compile(r"\s?(?:–|-|to)\s?\d+(?:\.\d+)?(\s?\\?%|\s?×)")
# A unit after a plain integer makes it a measurement: "53 ms", "319 s", "12 MiB".
_UNIT_AFTER = re.compile(
    r"\s?(?:ms|µs|s|seconds?|minutes?|MiB|GiB|KiB|MB|GB|kB|tokens/s|tok/s|steps?)\b"
)
# "3 × 6", "32 × 32": a shape, not a multiplier.
_SHAPE_AFTER = re.compile(r"^\s*\d")
_SHAPE_BEFORE = re.compile(r"\d\s*×\s*$")
_MULTIPLIER_BEFORE = re.compile(r"×\s*$")

# Any number in code or outputs.
_ANY_NUMBER = re.compile(
    r"(?<![\w.])-?(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\.\d+)"
)


@dataclass(frozen=True)
class ProseNumber:
    text: str  # as written, e.g. "4.1%", "43,648", "2.3×"
    value: Decimal  # the number, in the unit written (4.1 for "4.1%")
    decimals: int  # digits after the decimal point as written
    kind: str  # "decimal", "percent", "thousands", "multiplier", "scientific"
    context: str  # the sentence around it


def prose_of(markdown: str) -> str:
    """The Markdown with code, link targets and markup removed."""
    text = markdown
    for pattern in _NOT_PROSE:
        text = pattern.sub(lambda m: "]" if m.group(0).startswith("](") else " ", text)
    text = _HEADING.sub(lambda m: m.group(0).split()[0] + " ", text)
    text = _REFERENCE.sub(" ", text)
    text = _VERSION.sub(" ", text)
    return text


def _decimals(number: str) -> int:
    mantissa = re.split(r"[eE]", number)[0]
    return len(mantissa.split(".")[1]) if "." in mantissa else 0


def prose_numbers(markdown: str) -> list[ProseNumber]:
    """Every measured-looking number of a piece of prose.

    Plain integers without a thousands separator ("8 heads", "T = 128", "1997") are
    counts and constants, not measurements, and are not returned; with a %, a × or a
    unit ("53 ms", "12 MiB", "200 steps") they are.
    """
    text = prose_of(markdown)
    found = []
    for m in _PROSE_NUMBER.finditer(text):
        number, suffix = m.group(1), (m.group(2) or "").strip().lstrip("\\")
        if not suffix:
            ranged = _RANGE_UNIT.match(text, m.end())
            if ranged:
                suffix = ranged.group(1).strip().lstrip("\\")
        if suffix == "×" and _SHAPE_AFTER.match(text[m.end() :]):
            continue  # "3 × 6"
        if _SHAPE_BEFORE.search(text[max(0, m.start() - 12) : m.start(1)]):
            continue  # the "6" of "3 × 6"
        if suffix == "%":
            kind = "percent"
        elif suffix in ("×", "x") or _MULTIPLIER_BEFORE.search(
            text[max(0, m.start() - 3) : m.start(1)]
        ):
            kind = "multiplier"
        elif "," in number:
            kind = "thousands"
        elif re.search(r"[eE]", number):
            kind = "scientific"
        elif "." in number:
            kind = "decimal"
        elif _UNIT_AFTER.match(text, m.end()):
            kind = "unit"
        else:
            continue  # a plain integer
        if kind == "multiplier" and suffix == "x" and "." not in number:
            continue  # "2x" in prose is rare; "x" alone is usually a variable
        start = text.rfind("\n\n", 0, m.start())
        end = text.find("\n\n", m.end())
        context = " ".join(text[start + 1 : end if end != -1 else None].split())
        found.append(
            ProseNumber(
                text=m.group(0).strip().replace("\\%", "%"),
                value=Decimal(number.replace(",", "")),
                decimals=_decimals(number),
                kind=kind,
                context=context[:300],
            )
        )
    return found


def numbers_in(text: str) -> set[Decimal]:
    """Every number that a piece of code or output shows."""
    values = set()
    for m in _ANY_NUMBER.finditer(text):
        raw = m.group(0).replace(",", "")
        try:
            values.add(Decimal(raw))
        except ArithmeticError:
            continue
    return values


def matches(number: ProseNumber, haystack: set[Decimal]) -> bool:
    """Whether a number the chapter shows rounds to ``number`` as written.

    Written with k decimals, "x" stands for any value within half a unit of its last
    digit; a percentage may also be shown as a fraction (4.1% as 0.041).
    """
    if number.kind == "scientific":
        exponent = number.value.adjusted()
        tolerance = Decimal(5) * Decimal(10) ** (exponent - number.decimals - 1)
    else:
        tolerance = Decimal(5) * Decimal(10) ** (-number.decimals - 1)
    tolerance += Decimal("1e-12")
    targets = [number.value]
    if number.kind == "percent":
        targets.append(number.value / 100)
    for target in targets:
        tol = tolerance if target == number.value else tolerance / 100
        if any(abs(h - target) <= tol for h in haystack):
            return True
    return False


def _output_text(output) -> str:
    if output.output_type == "stream":
        return output.text
    data = output.get("data", {})
    return "\n".join(
        data[kind] for kind in ("text/plain", "text/markdown") if kind in data
    )


# A place the prose names for a number it quotes: "§7.4", "Section 5.3", "§A.4" (a
# section of the book, in any chapter), "Chapter 4" or a link to a chapter's notebook
# (the whole chapter). "lesson §3" and "article §7.4" are the seed documents' sections.
_SECTION_REF = re.compile(
    r"(?<!lesson )(?<!article )(?<!lesson's )(?<!article's )"
    r"(?:§\s*|\b[Ss]ections?\s+)([A-Z1-9]\.\d+)"
)
_CHAPTER_REF = re.compile(r"\b(?:[Cc]hapters?|Ch\.)\s+(\d)\b|\]\((0\d)_\w+\.ipynb")
_EXERCISE = re.compile(r"^###\s+Exercise\s", re.M)
_FENCE = re.compile(r"```.*?```", re.S)
_SECTION_HEADING = re.compile(r"^##\s+(.*)$", re.M)
_SECTION_NUMBER = re.compile(r"^([A-Z1-9]\.\d+)\s")


def paragraphs(markdown: str) -> list[str]:
    """The units a reference covers: paragraphs, and each row of a table."""
    units = []
    for block in re.split(r"\n\s*\n", _FENCE.sub(" ", markdown)):
        lines = block.splitlines()
        if lines and all(line.lstrip().startswith("|") for line in lines if line):
            units.extend(lines)
        else:
            units.append(block)
    return [u for u in units if u.strip()]


def references(paragraph: str, chapter: str | None) -> tuple[set[str], set[str]]:
    """The sections ({"7.4", "A.4"}) and other chapters ({"04"}) a paragraph names."""
    sections = set(_SECTION_REF.findall(paragraph))
    chapters = {f"{int(a or b):02d}" for a, b in _CHAPTER_REF.findall(paragraph)}
    return sections, chapters - {chapter}


@dataclass
class Document:
    """One piece of prose to check and the numbers it may quote.

    ``prose`` holds (where, section, markdown): a number in it must be one that its
    own section shows (``book[section]``), or one that a section or another chapter
    named in the same paragraph or table row shows. ``book`` maps every section of
    the book ("5.3", "05_transformer Summary") to the numbers of its code and
    outputs; ``chapters`` maps a chapter ("05") to its sections.
    """

    name: str  # allowlist section: the notebook's stem, "intro", "concepts-ch01"
    prose: list[tuple[str, str, str]]
    book: dict[str, set[Decimal]]
    chapters: dict[str, list[str]] = field(default_factory=dict)
    # numbers a piece of prose may use besides its section's, by its ``where``: a
    # concept check's options and explanations may restate what its question gives
    givens: dict[str, set[Decimal]] = field(default_factory=dict)

    @property
    def chapter(self) -> str | None:
        """ "05" for 05_transformer and concepts-ch05."""
        m = re.fullmatch(r"(\d\d)_\w+|concepts-ch(\d\d)", self.name)
        return (m.group(1) or m.group(2)) if m else None

    def numbers(self):
        """(where, number, the numbers it may match) for each number of the prose."""
        for where, section, markdown in self.prose:
            # an exercise names the sections it builds on once, for all its paragraphs
            exercise = references(markdown, self.chapter) if _EXERCISE.search(
                markdown) else (set(), set())  # fmt: skip
            for paragraph in paragraphs(markdown):
                named, chapters = references(paragraph, self.chapter)
                named, chapters = named | exercise[0], chapters | exercise[1]
                keys = {section, *named}
                for chapter in chapters:
                    keys.update(self.chapters.get(chapter, []))
                haystack = set().union(
                    self.givens.get(where, set()),
                    *(self.book.get(k, set()) for k in keys),
                )
                for number in prose_numbers(paragraph):
                    yield where, number, haystack


def _section_key(heading: str, stem: str) -> str:
    m = _SECTION_NUMBER.match(heading.strip())
    return m.group(1) if m else f"{stem} {heading.strip()}"


def chapter_sections(path: Path):
    """(prose, {section: numbers shown}) of a notebook, split at its ## headings."""
    nb = nbformat.read(path, as_version=4)
    section = f"{path.stem} opening"
    prose, shown = [], {section: []}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            pieces = _SECTION_HEADING.split(cell.source)
            # [before the first heading, heading, text, heading, text, ...]
            if pieces[0].strip():
                prose.append((f"{path.stem} cell {index}", section, pieces[0]))
            shown[section] += _FENCE.findall(pieces[0])  # a solution's code
            for heading, text in zip(pieces[1::2], pieces[2::2], strict=True):
                section = _section_key(heading, path.stem)
                shown.setdefault(section, []).extend(_FENCE.findall(text))
                prose.append(
                    (f"{path.stem} cell {index}", section, "## " + heading + text)
                )
            continue
        if "concept_check(" in cell.source:
            continue  # its output is the concept checks' prose, checked on its own
        shown[section].append(cell.source)
        shown[section].extend(_output_text(o) for o in cell.outputs)
    # an exercise's code is the checker its cell calls: the package's exercise modules
    # of the chapter (exercises/ch05_*.py), which set its sizes, steps and seeds
    exercises = f"{path.stem} Exercises"
    if exercises in shown:
        modules = ROOT / "src" / "transformer_book" / "exercises"
        shown[exercises] += [
            m.read_text() for m in sorted(modules.glob(f"ch{path.stem[:2]}_*.py"))
        ]
    return prose, {k: numbers_in("\n".join(v)) for k, v in shown.items()}


def concepts_document(number: int, book, chapters) -> Document:
    """A chapter's concept checks, each checked against the section it follows; a
    question's options and explanations may also use the numbers its prompt gives."""
    module = importlib.import_module(f"transformer_book.concepts.ch{number:02d}")
    prose, givens = [], {}
    for section, questions in module.CHECKS.items():
        for q_index, q in enumerate(questions):
            where = f"concept check {section} question {q_index + 1}"
            prose.append((f"{where} (prompt)", section, q.prompt))
            prose.extend((where, section, t) for t in [*q.options, *q.why])
            givens[where] = numbers_in(prose_of(q.prompt))
    return Document(f"concepts-ch{number:02d}", prose, book, chapters, givens)


def book_documents() -> list[Document]:
    sys.path.insert(0, str(ROOT / "scripts"))
    from toc_notebooks import chapter_number, toc_notebooks

    book, chapters, documents, numbered = {}, {}, [], []
    for path in toc_notebooks():  # the chapters and the appendix
        prose, sections = chapter_sections(path)
        book.update(sections)
        chapters[path.stem[:2]] = list(sections)
        documents.append(Document(path.stem, prose, book, chapters))
        if chapter_number(path) is not None:  # the appendix has no concept checks
            numbered.append(chapter_number(path))
    documents += [concepts_document(n, book, chapters) for n in numbered]
    # the intro quotes the chapters: each number is checked against the chapters
    # its paragraph or table row names
    intro = (ROOT / "book" / "intro.md").read_text()
    documents.append(Document("intro", [("intro", "intro", intro)], book, chapters))
    return documents


def load_allowlist() -> dict[str, dict[str, object]]:
    """{document: {number as written: reason or {"expr": ..., "why": ...}}}."""
    return {
        path.stem: tomllib.loads(path.read_text())
        for path in sorted(ALLOWLIST_DIR.glob("*.toml"))
    }


def allowlist_problems(documents, allowlist) -> list[str]:
    """Entries without a reason, whose arithmetic is wrong, or that nothing uses."""
    problems = []
    by_name = {d.name: d for d in documents}
    for name, entries in allowlist.items():
        if name not in by_name:
            problems.append(f"{name}.toml: no document of that name")
            continue
        written, needed = {}, set()
        for _, number, haystack in by_name[name].numbers():
            written[number.text] = number
            if not matches(number, haystack):
                needed.add(number.text)
        for text, entry in entries.items():
            if text not in written:
                problems.append(f"{name}.toml: {text!r} is not in the prose (stale)")
                continue
            if text not in needed:
                problems.append(
                    f"{name}.toml: {text!r} matches its section's outputs wherever "
                    "it is written (unneeded)"
                )
            if isinstance(entry, str):
                if len(entry.split()) < 3:
                    problems.append(f"{name}.toml: {text!r} needs a reason")
                continue
            if not isinstance(entry, dict) or set(entry) != {"expr", "why"}:
                problems.append(
                    f"{name}.toml: {text!r} must be a reason or {{expr, why}}"
                )
                continue
            value = Decimal(repr(float(eval(entry["expr"], {"math": math}))))
            if not matches(written[text], {value}):
                problems.append(f"{name}.toml: {text!r} but {entry['expr']} = {value}")
    return problems


def unmatched(document: Document, allowlist):
    """(where, number) for every number of the document that matches nothing."""
    allowed = allowlist.get(document.name, {})
    misses = []
    for where, number, haystack in document.numbers():
        if number.text not in allowed and not matches(number, haystack):
            misses.append((where, number))
    return misses


def counts(documents, allowlist) -> dict[str, int]:
    """How many numbers were checked, matched nothing in their section but are
    allowlisted (of them, ``excused``: by a reason alone, not by arithmetic the test
    evaluates), and matched nothing at all."""
    checked = allowed = excused = missed = 0
    for document in documents:
        names = allowlist.get(document.name, {})
        for _, number, haystack in document.numbers():
            checked += 1
            if matches(number, haystack):
                continue
            if number.text in names:
                allowed += 1
                excused += isinstance(names[number.text], str)
            else:
                missed += 1
    return {
        "checked": checked,
        "allowlisted": allowed,
        "excused": excused,
        "unmatched": missed,
    }


if __name__ == "__main__":
    allowlist = load_allowlist()
    documents = book_documents()
    chosen = set(sys.argv[1:])
    for document in documents:
        if chosen and document.name not in chosen:
            continue
        for where, number in unmatched(document, allowlist):
            print(f"{where}: {number.text!r} ({number.kind})\n    {number.context}\n")
    for problem in allowlist_problems(documents, allowlist):
        print(problem)
    print(counts(documents, allowlist))
