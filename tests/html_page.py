"""A small reader of the web view's HTML for tests: the element tree, found by tag and data-* attributes.

    page = Page(html)
    for row in page.find("tr", {"class": "resource"}):
        row.attrs["data-flavor"], row.field("usage")       # the text of its [data-field=usage]
"""
from __future__ import annotations

from html.parser import HTMLParser

VOID = {"meta", "link", "br", "img", "input", "hr", "source", "wbr"}


class Element:
    def __init__(self, tag: str, attrs: dict[str, str], parent: "Element | None"):
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Element | str] = []

    @property
    def text(self) -> str:
        """All the text inside, whitespace collapsed."""
        parts: list[str] = []

        def walk(e: Element) -> None:
            for c in e.children:
                parts.append(c) if isinstance(c, str) else walk(c)
        walk(self)
        return " ".join("".join(parts).split())

    def find(self, tag: str | None = None, attrs: dict[str, str] | None = None) -> list["Element"]:
        """Every element below this one with that tag and those attribute values (a class matches one word)."""
        out = []
        for c in self.children:
            if isinstance(c, str):
                continue
            if (tag is None or c.tag == tag) and all(_matches(c, k, v) for k, v in (attrs or {}).items()):
                out.append(c)
            out.extend(c.find(tag, attrs))
        return out

    def one(self, tag: str | None = None, attrs: dict[str, str] | None = None) -> "Element":
        found = self.find(tag, attrs)
        assert len(found) == 1, f"{len(found)} <{tag} {attrs}> found"
        return found[0]

    def field(self, name: str) -> str:
        """The text of the first [data-field=name] inside."""
        found = self.find(None, {"data-field": name})
        assert found, f"no data-field {name!r}"
        return found[0].text

    def ancestors(self) -> list["Element"]:
        out, e = [], self.parent
        while e is not None:
            out.append(e)
            e = e.parent
        return out


def _matches(e: Element, key: str, value: str) -> bool:
    have = e.attrs.get(key)
    if have is None:
        return False
    return value in have.split() if key == "class" else have == value


class Page(Element, HTMLParser):
    def __init__(self, html: str):
        Element.__init__(self, "#document", {}, None)
        HTMLParser.__init__(self, convert_charrefs=True)
        self._open: Element = self
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        e = Element(tag, {k: v or "" for k, v in attrs}, self._open)
        self._open.children.append(e)
        if tag not in VOID:
            self._open = e

    def handle_startendtag(self, tag, attrs):
        self._open.children.append(Element(tag, {k: v or "" for k, v in attrs}, self._open))

    def handle_endtag(self, tag):
        e = self._open
        while e is not None and e.tag != tag:
            e = e.parent
        if e is not None and e.parent is not None:
            self._open = e.parent

    def handle_data(self, data):
        self._open.children.append(data)
