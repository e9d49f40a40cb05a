"""Which character separates a CSV landing file's fields (no Spark): the rule the README states."""

from __future__ import annotations

from pathlib import Path

import pytest

from ratui.engine.landing.formats.csv import csv_layout
from ratui.engine.landing.reader import ZoneFile


@pytest.mark.parametrize("text, delimiter", [
    ("id,name\n1,ann\n", ","),
    ("id;name;city\n1;ann;Paris\n2;bob;Lyon\n", ";"),
    ("\ufeffid;name\r\n1;ann\r\n", ";"),                     # a spreadsheet's export: BOM, CRLF
    ("id\tname\n1\tann\n", "\t"),
    ("id|name\n1|ann\n", "|"),
    ("id;name\n", ";"),                                      # a header alone
    ("id;name;city\n1;x;Paris\n2;y\n3;z;Nice\n", ";"),         # a short row is malformed, not a reason for commas
    ("id\n1\n2\n", ","),                                     # one column
    ("id,note\n1,a;b;c\n", ","),                             # a comma in the header decides
    ("note;remark\nfirst\nsecond\nthird\n", ","),            # no row splits like the header: one column
    ('name;note\nx;"a;b"\ny;c\n', ";"),                      # quoted delimiters are inside fields
    ("id;name;x|y\n1;a;b|c\n", ";"),                         # the character the header has most of
])
def test_the_delimiter_is_a_comma_unless_the_header_has_none_and_another_splits_the_rows(
        tmp_path: Path, text: str, delimiter: str):
    path = tmp_path / "f.csv"
    path.write_bytes(text.encode())
    assert csv_layout(ZoneFile(path, "f.csv"))[0] == delimiter


def test_the_header_is_split_with_the_files_delimiter(tmp_path: Path):
    path = tmp_path / "f.csv"
    path.write_text("id; name ;city\n1;a;b\n")
    assert csv_layout(ZoneFile(path, "f.csv")) == (";", ["id", "name", "city"])
