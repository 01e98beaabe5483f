"""Reading the HTML report back: a small tree of its tags, for the tests."""

from __future__ import annotations

from html.parser import HTMLParser


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> _Collector:
    collector = _Collector()
    collector.feed(page)
    collector.close()
    return collector


_VOID = frozenset({"br", "meta", "line", "rect", "img", "hr", "input", "link"})


class _Tree(HTMLParser):
    """The page as nested elements: enough to check a table's rows or an SVG's ticks."""

    def __init__(self) -> None:
        super().__init__()
        self.root: dict[str, object] = {"tag": "root", "attrs": {}, "children": []}
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node: dict[str, object] = {"tag": tag, "attrs": dict(attrs), "children": []}
        children = self.stack[-1]["children"]
        assert isinstance(children, list)
        children.append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        children = self.stack[-1]["children"]
        assert isinstance(children, list)
        children.append({"tag": tag, "attrs": dict(attrs), "children": []})

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID:
            return
        # Misnested markup is a rendering bug: fail instead of guessing.
        assert self.stack[-1]["tag"] == tag, f"</{tag}> closes <{self.stack[-1]['tag']}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        children = self.stack[-1]["children"]
        assert isinstance(children, list)
        children.append(data)


Node = dict[str, object]


def tree(page: str) -> Node:
    parser = _Tree()
    parser.feed(page)
    parser.close()
    assert len(parser.stack) == 1, "unclosed elements"
    return parser.root


def find(node: Node, tag: str, css: str | None = None) -> list[Node]:
    found = []
    for child in node["children"]:  # type: ignore[attr-defined]
        if isinstance(child, dict):
            classes = (child["attrs"].get("class") or "").split()
            if child["tag"] == tag and (css is None or css in classes):
                found.append(child)
            found.extend(find(child, tag, css))
    return found


def text(node: Node) -> str:
    return "".join(c if isinstance(c, str) else text(c) for c in node["children"])  # type: ignore[attr-defined]


def rows(table: Node) -> list[list[str]]:
    return [[text(cell) for cell in row["children"] if isinstance(cell, dict)]  # type: ignore[attr-defined]
            for row in find(table, "tr")]
