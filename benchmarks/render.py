"""The one table renderer: every table the harness writes is a :class:`Table` value written as
markdown (GitHub pipe tables), csv (title and caption as leading ``# `` lines) or LaTeX (a
booktabs tabular) here, so a cell is escaped, aligned and laid out the same way in every file;
producers choose rows and cell text, and nothing else writes ``|`` rows, csv lines or tabulars."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Markdown rule cell per alignment (``l`` is the plain rule: GitHub's default, left).
MARKDOWN_RULES = {"l": "---", "r": "---:", "c": ":---:"}

#: LaTeX's special characters (and the two non-ASCII marks the tables print), one pass.
LATEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "_": r"\_",
    "#": r"\#",
    "$": r"\$",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "—": "--",
    "†": r"\dag{}",
    "Δ": r"$\Delta$",
    "…": r"\ldots{}",
    **{mark: rf"\textsuperscript{{{digit}}}" for digit, mark in enumerate("⁰¹²³⁴⁵⁶⁷⁸⁹")},
}
#: Digits as superscript marks, for footnote markers.
SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def markdown_escape(value: Any) -> str:
    """A markdown cell's text: ``None`` blank, ``|`` escaped so it cannot split the cell."""
    return "" if value is None else str(value).replace("|", "\\|")


def latex_escape(value: Any) -> str:
    """A LaTeX cell's text with every special character escaped (``None`` blank)."""
    return "".join(LATEX_ESCAPES.get(char, char) for char in ("" if value is None else str(value)))


@dataclass(frozen=True)
class Table:
    """One table: its header, its rows (cells as shown; numbers are written as they are), the
    alignment of each column (``l``, ``r``, ``c``; empty: all left), and the text around it."""

    header: Sequence[str]
    rows: Sequence[Sequence[Any]]
    #: Markdown heading, LaTeX caption, first csv comment line.
    title: str = ""
    #: Lines that describe the table: markdown paragraphs, csv comment lines.
    caption: Sequence[str] = ()
    #: One letter per column; empty for all left.
    align: str = ""
    #: Lines after the table (markdown).
    notes: Sequence[str] = ()

    def __post_init__(self) -> None:
        width = len(self.header)
        if self.align and (len(self.align) != width or set(self.align) - set(MARKDOWN_RULES)):
            raise ValueError(f"align {self.align!r} must be one of l, r, c per column ({width})")
        for index, row in enumerate(self.rows):
            if len(row) != width:
                raise ValueError(f"row {index} has {len(row)} cells, the header {width}: {row}")

    @classmethod
    def from_records(
        cls, records: Sequence[Mapping[str, Any]], fields: Sequence[str] | None = None, **text: Any
    ) -> Table:
        """A table of mappings, one column per field (default: the first record's keys); a
        field a record lacks is blank, a key outside the fields is an error."""
        header = list(fields if fields is not None else records[0] if records else [])
        for record in records:
            if extra := [key for key in record if key not in header]:
                raise ValueError(f"record has fields outside the table: {extra}")
        rows = [[record.get(field, "") for field in header] for record in records]
        return cls(header, rows, **text)

    def markdown_lines(self, level: int = 2, *, marks: bool = True) -> list[str]:
        """The table's markdown lines: heading, caption paragraphs, table, notes. ``marks``
        off writes a plain ``---`` rule whatever the alignment."""
        lines = [f"{'#' * level} {self.title}", ""] if self.title else []
        for paragraph in self.caption:
            lines += [paragraph, ""]
        align = self.align if marks and self.align else "l" * len(self.header)
        lines += [
            markdown_row(self.header),
            "|" + "".join(f"{MARKDOWN_RULES[a]}|" for a in align),
            *(markdown_row(row) for row in self.rows),
        ]
        return lines + (["", *self.notes] if self.notes else [])

    def to_markdown(self, level: int = 2, *, marks: bool = True) -> str:
        """:meth:`markdown_lines` as text, ending in a newline."""
        return "\n".join(self.markdown_lines(level, marks=marks)) + "\n"

    def to_csv(self, *, line_end: str = "\n") -> str:
        """Title and caption as ``# `` lines, then the header and the rows."""
        buffer = io.StringIO()
        comments = [self.title, *self.caption] if self.title else self.caption
        buffer.writelines(f"# {line}\n" for line in comments)
        writer = csv.writer(buffer, lineterminator=line_end)
        writer.writerow(self.header)
        writer.writerows(self.rows)
        return buffer.getvalue()

    def latex_lines(self, caption: str | None = None) -> list[str]:
        """A booktabs ``table`` float captioned ``caption`` (default: the title), scaled to the
        line width, the alignment as its column spec."""
        spec = self.align or "l" * len(self.header)
        return [
            r"\begin{table}[t]",
            r"\centering",
            rf"\caption{{{latex_escape(self.title if caption is None else caption)}}}",
            r"\resizebox{\linewidth}{!}{%",
            rf"\begin{{tabular}}{{{spec}}}",
            r"\toprule",
            _latex_row(self.header),
            r"\midrule",
            *(_latex_row(row) for row in self.rows),
            r"\bottomrule",
            r"\end{tabular}}",
            r"\end{table}",
        ]

    def to_latex(self, caption: str | None = None) -> str:
        """:meth:`latex_lines` as text, ending in a newline."""
        return "\n".join(self.latex_lines(caption)) + "\n"


def markdown_row(cells: Iterable[Any]) -> str:
    """One markdown table line; public for a producer that prints a table's rows as they come
    (after its :meth:`Table.markdown_lines` with no rows)."""
    return "| " + " | ".join(markdown_escape(cell) for cell in cells) + " |"


def superscript(number: int) -> str:
    """``12`` → ``¹²``: a footnote marker.

    >>> superscript(12)
    '¹²'
    """
    return str(number).translate(SUPERSCRIPT)


@dataclass(frozen=True)
class Footnotes:
    """Numbered notes, each under a key: :meth:`mark` gives a header its note's marker (nothing when
    the note is absent), :meth:`lines` the numbered texts."""

    entries: Sequence[tuple[str, str]] = ()

    def mark(self, key: str) -> str:
        """The marker of the note under ``key`` (``³``), or "" when there is none."""
        for number, (found, _) in enumerate(self.entries, 1):
            if found == key:
                return superscript(number)
        return ""

    def text(self, key: str) -> str | None:
        """The note under ``key``, or None."""
        return next((text for found, text in self.entries if found == key), None)

    def lines(self) -> list[str]:
        """``1. text`` per note: a markdown numbered list, and the csv's comment lines."""
        return [f"{n}. {text}" for n, (_, text) in enumerate(self.entries, 1)]

    def markdown_lines(self, title: str = "Notes", level: int = 2) -> list[str]:
        """A heading and the numbered notes (nothing without notes)."""
        return [f"{'#' * level} {title}", "", *self.lines()] if self.entries else []


def _latex_row(cells: Iterable[Any]) -> str:
    return " & ".join(latex_escape(cell) for cell in cells) + r" \\"


@dataclass(frozen=True)
class Document:
    """A document of tables, as every table file from runs is laid out: a ``#`` title, the setting
    paragraphs, its blocks (a :class:`Table` or markdown lines written as they are), then the
    numbered notes."""

    title: str
    setting: Sequence[str]
    blocks: Sequence[Table | Sequence[str]]
    notes: Footnotes = Footnotes()

    @property
    def tables(self) -> list[Table]:
        """The blocks that are tables."""
        return [block for block in self.blocks if isinstance(block, Table)]

    @property
    def header(self) -> list[str]:
        """The setting and the numbered notes: the csv's and the tex's comment lines."""
        return [*self.setting, *self.notes.lines()]

    def to_markdown(self) -> str:
        """Title, setting paragraphs, the blocks, the notes; blocks a blank line apart."""
        lines = [f"# {self.title}"]
        for paragraph in self.setting:
            lines += ["", paragraph]
        for block in self.blocks:
            shown = block.markdown_lines(marks=False) if isinstance(block, Table) else block
            lines += ["", *shown]
        lines += ["", *self.notes.markdown_lines()]
        return "\n".join(lines) + "\n"

    def to_latex(self) -> str:
        """One booktabs float per table, captioned with the title; setting and notes as
        comments."""
        lines = [
            f"% {self.title}",
            *(f"% {line}" for line in self.header),
            r"% needs \usepackage{booktabs,graphicx}",
        ]
        for table in self.tables:
            lines += ["", *table.latex_lines(caption=f"{self.title}: {table.title}")]
        return "\n".join(lines) + "\n"

    def records_csv(self, records: Sequence[Mapping[str, Any]], **options: Any) -> str:
        """``records`` as csv (the union of their fields, in order of appearance), under the
        title and :attr:`header` as comment lines."""
        fields = list(dict.fromkeys(key for record in records for key in record))
        table = Table.from_records(records, fields, title=self.title, caption=self.header)
        return table.to_csv(**options)
