"""Which JSON landing files are one document and which are JSON lines (no Spark): the rule the README states."""

from __future__ import annotations

import pytest

from ratui.engine.landing.formats.json import is_json_document, json_error_line


@pytest.mark.parametrize("text, document", [
    ('{"id": 1}\n{"id": 2}\n', False),                          # JSON lines
    ('{"id": 1}', False),                                       # one line, no newline
    ('\n\n  {"id": 1}\n', False),                               # blank lines first
    ('{"id": 1,\n{"id": 2}\n', False),                          # JSON lines with a broken first line stay lines
    ('[{"id": 1}, {"id": 2}]\n{"id": 3}\n', False),             # a whole array on one line is a line
    ('{\n  "id": 1\n}\n', True),                                # a pretty-printed object
    ('[\n  {"id": 1},\n  {"id": 2}\n]\n', True),                # a pretty-printed array
    ('  [  \n{"id": 1}]', True),                                # `[` alone, with spaces
    ('[{"id": 1},\n {"id": 2}]\n', True),                       # an array its first line does not finish
    ('\ufeff{\n"id": 1}\n', True),                              # a byte-order mark before the first line
    ('', False),
])
def test_a_json_file_is_a_document_when_its_first_line_opens_one(tmp_path, text, document):
    path = tmp_path / "f.json"
    path.write_text(text, encoding="utf-8")
    assert is_json_document(path) is document


def test_a_long_first_line_that_starts_an_array_is_read_as_a_document(tmp_path):
    path = tmp_path / "f.json"
    path.write_text("[" + ",".join(['{"id": 1}'] * 200_000) + "]")  # 2 MB on one line: read as one document
    assert is_json_document(path)


def test_the_line_a_broken_document_fails_at(tmp_path):
    path = tmp_path / "f.json"
    path.write_text('[\n  {"id": 1},\n  {"id": 2,}\n]\n')
    assert json_error_line(path) == (3, '{"id": 2,}')
    path.write_text('[\n  {"id": 1}\n]\n')  # Python reads it: no line to name, the first line to show
    assert json_error_line(path) == (None, "[")
    assert json_error_line(path, limit=4) == (None, "")
