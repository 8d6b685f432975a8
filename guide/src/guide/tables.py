"""The tables of the guide's pages: site-only, no stability promise."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["Table"]


class Table:
    """A small table that shows itself as HTML in notebooks and gallery pages, Markdown as text.

    The last expression of a gallery cell (or notebook cell) is rendered through
    ``_repr_html_``; ``str()`` and ``repr()`` give a Markdown table with aligned columns.

    Parameters
    ----------
    headers : Sequence[str]
        Column names.
    rows : Sequence[Sequence[object]]
        One sequence per row, as long as ``headers``; cells are converted with ``str``.
    links : Mapping[str, Sequence[str]], optional
        Per column header, one link target per row: that column's cells become links.

    Raises
    ------
    ValueError
        If a row's length differs from the number of headers, or ``links`` names an
        unknown column or has the wrong number of targets.

    Examples
    --------
    >>> from guide.tables import Table
    >>> print(Table(["a", "b"], [[1, 2]]))
    | a | b |
    |---|---|
    | 1 | 2 |
    """

    def __init__(
        self,
        headers: Sequence[str],
        rows: Sequence[Sequence[object]],
        *,
        links: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.headers = [str(h) for h in headers]
        self.rows = [[str(c) for c in row] for row in rows]
        for i, row in enumerate(self.rows):
            if len(row) != len(self.headers):
                raise ValueError(
                    f"rows[{i}] has {len(row)} cells, but there are {len(self.headers)} headers"
                )
        self.links: dict[int, list[str]] = {}
        for header, targets in (links or {}).items():
            if header not in self.headers or len(targets) != len(self.rows):
                raise ValueError(
                    f"links must map a column header to one target per row; got {header!r} "
                    f"with {len(targets)} targets for {len(self.rows)} rows"
                )
            self.links[self.headers.index(header)] = [str(t) for t in targets]

    def __str__(self) -> str:
        # Pipes inside cells are escaped so the Markdown stays a table.
        headers = [h.replace("|", "\\|") for h in self.headers]
        rows = [[c.replace("|", "\\|") for c in row] for row in self.rows]
        widths = [max([len(h)] + [len(r[j]) for r in rows]) for j, h in enumerate(headers)]

        def line(cells: Sequence[str]) -> str:
            return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

        rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
        return "\n".join([line(headers), rule, *(line(r) for r in rows)])

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        from html import escape

        head = "".join(f"<th>{escape(h)}</th>" for h in self.headers)

        def cell(i: int, j: int, text: str) -> str:
            if j in self.links:
                return f'<td><a href="{escape(self.links[j][i])}">{escape(text)}</a></td>'
            return f"<td>{escape(text)}</td>"

        body = "".join(
            "<tr>" + "".join(cell(i, j, c) for j, c in enumerate(row)) + "</tr>"
            for i, row in enumerate(self.rows)
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
