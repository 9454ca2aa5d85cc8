"""The table of defences, read from service/model/defences.def.

The service compiles that table (the setting TICKETD_DEFENSES, its parser,
the log line each switched-off defence gets, `ticketd serve --help`); the
lab and scripts/check-docs.py read the same file as text here, so that no
third copy of the names exists to drift. A row is

    DEFENCE(id, bit, "name", "lesson", "anchor", "harm" "harm continued")

an identifier, a number and C string literals, adjacent literals joined;
comments are dropped first.
"""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEF_FILE = os.path.join(ROOT, "service", "model", "defences.def")

_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_ROW = re.compile(r"^DEFENCE\((.*?)\)\s*$", re.S | re.M)
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|,')
_FIELDS = ("name", "lesson", "anchor", "harm")


def _row(text):
    """One row's fields: id, bit, then the four strings."""
    head = re.match(r"\s*([A-Z][A-Z0-9_]*)\s*,\s*(\d+)\s*,", text)
    if not head:
        raise ValueError("defences.def: a row without its id and bit: %r" % text[:60])
    # Literals and the commas between them; adjacent literals of one field
    # ("a " "b") are joined as C joins them.
    strings = [""]
    for tok in _TOKEN.findall(text[head.end():]):
        if tok == ",":
            strings.append("")
        else:
            strings[-1] += tok[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    if len(strings) != len(_FIELDS):
        raise ValueError("defences.def: %s has %d strings, not %d" % (
            head.group(1), len(strings), len(_FIELDS)))
    row = dict(zip(_FIELDS, strings))
    row["id"] = head.group(1)
    row["bit"] = int(head.group(2))
    return row


def load(path=DEF_FILE):
    """The rows in the table's order, each a dict: id, bit, name, lesson,
    anchor, harm."""
    with open(path, encoding="utf-8") as f:
        text = _COMMENT.sub("", f.read())
    rows = [_row(m.group(1)) for m in _ROW.finditer(text)]
    if not rows:
        raise ValueError("%s holds no DEFENCE rows" % path)
    return rows


DEFENCES = load()
BY_NAME = {d["name"]: d for d in DEFENCES}


def names_of(spec):
    """The names a pass's comma list ("session-lock,token") switches off;
    ValueError for one the table lacks."""
    names = [d for d in spec.split(",") if d]
    unknown = [d for d in names if d not in BY_NAME]
    if unknown:
        raise ValueError("no defence is named %s (service/model/defences.def)" %
                         ", ".join(unknown))
    return names


def setting(off):
    """The TICKETD_DEFENSES value that switches off a pass's comma list
    ("session-lock,token" -> "-session-lock,-token"; nothing -> "all")."""
    return ",".join("-" + d for d in names_of(off)) or "all"
