"""The figures a reader sees on a report page, as lines of text: headings, paragraphs and list items, table rows
(cells joined by " | ", a cell marked good or bad by its colour says so), each plot's caption and axis labels, and
the values a plot shows on hover. Styles and plot geometry are left out, so two pages that show the same figures
give the same lines."""

from __future__ import annotations

from html.parser import HTMLParser

BLOCKS = frozenset(
    {"h1", "h2", "h3", "h4", "p", "li", "tr", "figure", "figcaption", "caption", "div", "section", "header", "nav",
     "table", "ul", "ol", "details", "summary", "svg", "footer", "pre"}
)  # fmt: skip
SKIPPED = frozenset({"style", "script", "head"})
MARKS = frozenset({"good", "bad"})  # cell classes the page colours


class _Figures(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self.parts: list[str] = []
        self.skipping = 0

    def flush(self) -> None:
        line = " ".join("".join(self.parts).split())
        if line:
            self.lines.append(line)
        self.parts = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in SKIPPED:
            self.skipping += 1
        elif tag in BLOCKS:
            self.flush()
        elif tag in ("td", "th"):
            if "".join(self.parts).strip():
                self.parts.append(" | ")
            marks = MARKS & set((dict(attrs).get("class") or "").split())
            self.parts.extend(f"[{m}] " for m in sorted(marks))
        elif tag in ("text", "br"):
            self.parts.append(" ")
        if tag == "title" and not self.skipping:  # an SVG element's hover text
            self.parts.append(" (hover: ")

    def handle_endtag(self, tag: str) -> None:
        if tag in SKIPPED:
            self.skipping -= 1
        elif tag in BLOCKS:
            self.flush()
        elif tag == "title" and not self.skipping:
            self.parts.append(")")

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.parts.append(data)


def page_figures(html: str) -> list[str]:
    """The lines of figures of one report page."""
    parser = _Figures()
    parser.feed(html)
    parser.close()
    parser.flush()
    return parser.lines
