"""The one table renderer (:mod:`benchmarks.render`): markdown escaping and alignment row,
csv, LaTeX escaping, the checks a :class:`Table` makes of itself, and numbered footnotes."""

from __future__ import annotations

import csv
import io

import pytest

from benchmarks.render import (
    Footnotes,
    Table,
    latex_escape,
    markdown_escape,
    markdown_row,
    superscript,
)

TABLE = Table(
    header=["Method", "Note", "Score"],
    rows=[["a|b", "", 0.5], ["c", None, 12]],
    title="Results",
    caption=["What the numbers are."],
    align="llr",
    notes=["* a footnote"],
)


def test_markdown_has_heading_caption_alignment_row_and_notes() -> None:
    assert TABLE.to_markdown(level=3) == (
        "### Results\n"
        "\n"
        "What the numbers are.\n"
        "\n"
        "| Method | Note | Score |\n"
        "|---|---|---:|\n"
        "| a\\|b |  | 0.5 |\n"
        "| c |  | 12 |\n"
        "\n"
        "* a footnote\n"
    )


def test_markdown_rule_marks_centre_and_can_leave_marks_out() -> None:
    table = Table(["x", "y", "z"], [[1, 2, 3]], align="lcr")
    assert table.markdown_lines()[1] == "|---|:---:|---:|"
    assert table.markdown_lines(marks=False)[1] == "|---|---|---|"
    assert Table(["x", "y"], []).markdown_lines() == ["| x | y |", "|---|---|"]


def test_markdown_escapes_pipes_in_every_cell() -> None:
    assert markdown_escape("p|q|r") == "p\\|q\\|r"
    assert markdown_escape(None) == ""
    assert markdown_row(["a|b", 3]) == "| a\\|b | 3 |"
    assert Table(["h|1"], [["v"]]).markdown_lines()[0] == "| h\\|1 |"


def test_csv_has_comment_lines_then_header_and_rows() -> None:
    text = TABLE.to_csv()
    assert text.splitlines()[:3] == ["# Results", "# What the numbers are.", "Method,Note,Score"]
    rows = list(csv.reader(io.StringIO(text.split("\n", 2)[2])))
    assert rows == [["Method", "Note", "Score"], ["a|b", "", "0.5"], ["c", "", "12"]]
    assert Table(["a"], [["x,y"]]).to_csv(line_end="\r\n") == 'a\r\n"x,y"\r\n'


def test_records_fill_missing_fields_and_refuse_unknown_ones() -> None:
    table = Table.from_records([{"a": 1, "b": 2}, {"a": 3}])
    assert table.header == ["a", "b"] and table.rows == [[1, 2], [3, ""]]
    assert Table.from_records([{"b": 1}], ["a", "b"]).rows == [["", 1]]
    with pytest.raises(ValueError, match="outside the table"):
        Table.from_records([{"a": 1}, {"c": 2}])


def test_latex_escapes_special_characters_in_one_pass() -> None:
    assert latex_escape(r"50% & $x_1 #2 {y} ~z^ \ ") == (
        r"50\% \& \$x\_1 \#2 \{y\} \textasciitilde{}z\textasciicircum{} \textbackslash{} "
    )
    assert latex_escape("— †") == r"-- \dag{}"
    assert latex_escape(None) == ""


def test_latex_is_a_booktabs_float_with_the_alignment_as_column_spec() -> None:
    lines = TABLE.latex_lines()
    assert lines[:6] == [
        r"\begin{table}[t]",
        r"\centering",
        r"\caption{Results}",
        r"\resizebox{\linewidth}{!}{%",
        r"\begin{tabular}{llr}",
        r"\toprule",
    ]
    assert lines[6:9] == [r"Method & Note & Score \\", r"\midrule", r"a|b &  & 0.5 \\"]
    assert lines[-3:] == [r"\bottomrule", r"\end{tabular}}", r"\end{table}"]
    assert r"\caption{A\_1: Results}" in TABLE.to_latex(caption="A_1: Results")
    assert r"\begin{tabular}{ll}" in Table(["x", "y"], []).to_latex()


def test_a_table_checks_its_shape() -> None:
    with pytest.raises(ValueError, match="row 0 has 1 cells"):
        Table(["a", "b"], [["x"]])
    with pytest.raises(ValueError, match="align"):
        Table(["a", "b"], [], align="lx")
    with pytest.raises(ValueError, match="align"):
        Table(["a", "b"], [], align="l")


def test_footnotes_number_their_notes_and_mark_headers() -> None:
    notes = Footnotes([("evidence", "Ev. recall: ..."), ("judge", "J: ...")])
    assert (notes.mark("evidence"), notes.mark("judge"), notes.mark("absent")) == ("¹", "²", "")
    assert notes.text("judge") == "J: ..." and notes.text("absent") is None
    assert notes.lines() == ["1. Ev. recall: ...", "2. J: ..."]
    assert notes.markdown_lines() == ["## Notes", "", *notes.lines()]
    assert Footnotes().markdown_lines() == [] and superscript(10) == "¹⁰"


def test_latex_escapes_markers_and_delta() -> None:
    assert latex_escape("Ev. recall¹²") == r"Ev. recall\textsuperscript{1}\textsuperscript{2}"
    assert latex_escape("Δ") == r"$\Delta$" and latex_escape("(dense, …)") == r"(dense, \ldots{})"
