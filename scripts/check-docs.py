#!/usr/bin/env python3
"""Checks that README.md and docs/*.md point only at things that exist.

  scripts/check-docs.py            every check; one "ok"/"FAIL" line each,
                                   then "docs: N passed, N failed"
                                   (scripts/run-tests.sh counts them)

A page a newcomer follows must not send them nowhere, so for each page:

  - every relative link ([text](path), [text](path#anchor), [text](#anchor),
    [ref]: path) names a file or folder that exists, and every #anchor a
    heading of the page it points at (GitHub's anchors: lower case, spaces
    to hyphens, punctuation dropped, -1, -2 ... for repeated headings);
  - every file path named in `code` exists: a path whose first folder is
    one of the checkout's (service/x.c, docs/, the
    `service/orders.c:orders_create` form too) relative to the checkout, a
    bare file name (orders.c) somewhere in it; in fenced blocks (commands,
    trees), every word that starts with one of the checkout's folders.
    Generated places (build/, .state/, report/) and placeholders (<name>,
    $VAR) are not claims;
  - every name of code in `code` exists in the code (service/, tests/,
    scripts/, lab/, loadtest/, sql/, fuzz/, tools/, config/, .ci/, the
    Makefile, Dockerfile, compose.yaml and the docs' own files that are not
    pages, such as docs/openapi.yaml): a word with an underscore inside
    (`orders_create`, `ORDER_STOCK`, `TICKETD_LOOPS`), `struct name`, and
    `file.c:name`, whose file must define it (a function, a macro, a
    constant, a struct; `def` in Python, a function in shell). C comments
    are not code: a name that lives on only in a comment is gone. Not names
    of code, and so not claims: a word without an underscore (an English
    word, a command, an HTTP header, a SQL or Redis keyword), a fragment
    that starts or ends with one (`_PORTS`, `whsec_`), and, of the rest,
    what is another program's (see Names.foreign): a name the system's
    headers hold (libmicrohttpd's, libc's, a system call), MariaDB's status
    counters, and a very few words of the kernel and nginx; and a name the
    page's own fenced example writes (a guide to code not yet written).

And once, the generated figures: every page lab/record.py rewrites holds
its lessons-run block, rewriting it on a copy changes nothing else, and no
page holds a block record.py would never rewrite (its table would go
stale). And docs/configuration.md, which lists every setting, names each
one config.c reads. And the defences (service/model/defences.def, read by
lab/defences.py): each is named (`name`, or in a TICKETD_DEFENSES= list)
under the heading its row's anchor points at, and no page switches off
(TICKETD_DEFENSES=...) a name the table lacks; a sample row that is
documented nowhere must fail that check.

Before any of that, the checker runs on a sample with two dead links (one
wrapped over two lines), one dead anchor, two missing paths (one in a
fenced command), a made-up name and a function named in a file that does
not define it, and must find exactly those seven: a check that cannot fail
proves nothing (tests/docs/test_check_docs.py tries more on the checkout).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Not part of a checkout: what builds, runs and reports leave behind.
GENERATED = {".git", "build", ".state", "report"}
# A bare name with one of these endings is a claim that the file exists.
# (Not .conf or .js: `containers.conf` or `libjs-chart.js` names no file here.)
FILE_ENDINGS = (".c", ".h", ".sh", ".py", ".sql", ".md", ".yaml", ".lua", ".mk", ".supp",
                ".Dockerfile")

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def slug(text):
    """GitHub's anchor for a heading's text."""
    text = CODE_SPAN.sub(lambda m: m.group(2), text)
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


class Page:
    """A markdown file read once: its prose lines (fenced blocks left out,
    with their line numbers) and its anchors."""

    def __init__(self, path):
        self.path = path
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        self.prose, self.code = [], []
        fenced = False
        for no, line in enumerate(lines, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            (self.code if fenced else self.prose).append((no, line))
        # Paragraphs (runs of prose lines): a code span or a link may wrap.
        self.paragraphs = []
        for no, line in self.prose:
            last = self.paragraphs[-1] if self.paragraphs else None
            if line.strip() and last and last[0] + last[1].count("\n") == no - 1:
                self.paragraphs[-1] = (last[0], last[1] + "\n" + line)
            elif line.strip():
                self.paragraphs.append((no, line))
        self.anchors = set()
        # Each heading's anchor, by its place in the prose (for sections).
        self.headings = {}
        seen = {}
        for i, (_, line) in enumerate(self.prose):
            m = HEADING.match(line)
            if m:
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                self.headings[i] = base if n == 0 else "%s-%d" % (base, n)
                self.anchors.add(self.headings[i])
            for a in HTML_ANCHOR.findall(line):
                self.anchors.add(a)


# The places whose files hold the code a page may name.
CODE_PLACES = ("service", "tests", "scripts", "lab", "loadtest", "sql", "fuzz", "tools", "config",
               ".ci", "Makefile", "Dockerfile", "compose.yaml")
# Inside them, data and what a build fetched, not code.
NOT_CODE_DIRS = {"corpus", "node_modules", "__pycache__"}
# A name in `code`: file.c:name, struct name, name().
NAME_SPAN = re.compile(r"(?:(?P<file>[\w./-]+\.[A-Za-z]+):)?(?P<kind>(?:struct|enum|union)\s+)?"
                       r"(?P<name>[A-Za-z_]\w*)(?:\(\))?")
C_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
WORD = re.compile(r"[A-Za-z_]\w*")


SQL_COMMENT = re.compile(r"/\*.*?\*/|--[^\n]*", re.S)
HASH_COMMENT = re.compile(r"(?:^|(?<=\s))#[^\n]*", re.M)


def strip_c_comments(text):
    return C_COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def strip_comments(path, text):
    """The file's text without its comments, in its language (C, SQL and
    Lua, or # for scripts, Python, YAML and make): a name that lives on
    only in a comment is gone from the code."""
    if path.endswith((".c", ".h", ".def")):
        return strip_c_comments(text)
    if path.endswith((".sql", ".lua")):
        return SQL_COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    if path.endswith((".py", ".sh", ".yaml", ".yml", ".mk", ".conf", ".env", ".toml")) or \
            "." not in os.path.basename(path):
        return HASH_COMMENT.sub("", text)
    return text


def defines(path, text, name):
    """Does the file at path define name (as its language defines things)?"""
    n = re.escape(name)
    text = strip_comments(path, text)
    if path.endswith((".c", ".h", ".def")):
        if re.search(r"^\s*#\s*define\s+%s\b" % n, text, re.M) or \
                re.search(r"\b(?:struct|enum|union)\s+%s\s*\{" % n, text):
            return True
        # A function (its body follows its parameters) or a constant, at
        # the start of a line after its type.
        for m in re.finditer(r"^(?:[\w*]+[ \t*]+)+%s\s*([(\[=])" % n, text, re.M):
            if m.group(1) != "(":
                return True
            rest = re.search(r"[;{]", text[m.end():])
            if rest and rest.group(0) == "{":
                return True
        return False
    if path.endswith(".py"):
        return re.search(r"^\s*(?:def|class)\s+%s\b|^%s\s*=" % (n, n), text, re.M) is not None
    if path.endswith(".sh") or "." not in os.path.basename(path):
        return re.search(r"^\s*(?:function\s+)?%s\s*\(\)" % n, text, re.M) is not None
    if path.endswith(".sql"):
        return re.search(r"\b(?:PROCEDURE|FUNCTION|TABLE|VIEW|TRIGGER)\s+(?:IF\s+NOT\s+EXISTS\s+)?`?%s\b"
                         % n, text, re.I) is not None
    return re.search(r"\b%s\b" % n, text) is not None


class Names:
    """The names the code holds: every word of the code's files (C
    comments left out) and every file's name without its ending (a test
    binary, itest_orders, is named after its file)."""

    # MariaDB's status counters (SHOW GLOBAL STATUS), which no header holds.
    MARIADB_STATUS = re.compile(r"(?:Com|Handler|Innodb)_[a-z_]+")
    # Other programs' words that no header holds, each with its owner.
    OTHER_PROGRAMS = {
        "finish_task_switch": "the kernel's, as perf shows it",
        "non_idempotent": "nginx's, a value of proxy_next_upstream",
    }

    def __init__(self, root, system_headers="/usr/include"):
        self.root = root
        self.system_headers = system_headers
        self.words = set()
        self.files = {}  # path relative to root -> text
        for place in CODE_PLACES:
            full = os.path.join(root, place)
            if os.path.isfile(full):
                self.add(place)
            for d, dirs, files in os.walk(full):
                dirs[:] = [x for x in dirs if x not in NOT_CODE_DIRS]
                for f in files:
                    self.add(os.path.relpath(os.path.join(d, f), root))
        docs = os.path.join(root, "docs")
        if os.path.isdir(docs):
            for f in os.listdir(docs):
                if not f.endswith(".md") and os.path.isfile(os.path.join(docs, f)):
                    self.add(os.path.join("docs", f))
        self.header_words = None

    def add(self, rel):
        try:
            with open(os.path.join(self.root, rel), encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            return
        self.files[rel] = text
        self.words.update(WORD.findall(strip_comments(rel, text)))
        self.words.add(os.path.basename(rel).split(".")[0])

    def in_headers(self, names):
        """Which of names the system's headers hold, as a name or as a
        system call's number (__NR_name): one grep for them all."""
        if not names or not os.path.isdir(self.system_headers):
            return set()
        want = sorted(set(names) | {"__NR_" + n for n in names})
        try:
            out = subprocess.run(["grep", "-rhowF", "--include=*.h"] +
                                 [a for w in want for a in ("-e", w)] + [self.system_headers],
                                 capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            return set()
        found = set(out.split())
        return {n for n in names if n in found or "__NR_" + n in found}

    def foreign(self, name):
        return self.MARIADB_STATUS.fullmatch(name) is not None or name in self.OTHER_PROGRAMS

    def files_named(self, file):
        if "/" in file:
            return [file] if file in self.files else []
        return [p for p in self.files if os.path.basename(p) == file]


def claims(page):
    """(line, span, file, name) of every name of code in the page's prose."""
    for start, para in page.paragraphs:
        for m in CODE_SPAN.finditer(para):
            span = m.group(2).strip()
            n = NAME_SPAN.fullmatch(span)
            if not n:
                continue
            name = n.group("name")
            if name.startswith("_") or name.endswith("_"):
                continue  # a fragment: TICKETD_CLUSTER_<X>_PORTS's tail
            if n.group("file") or n.group("kind") or "_" in name:
                yield start + para.count("\n", 0, m.start()), span, n.group("file"), name


def example_words(page):
    """The words of the page's fenced blocks: a guide's example may name
    what the reader is to write."""
    words = set()
    for _, line in page.code:
        words.update(WORD.findall(line))
    return words


class Checker:
    def __init__(self, root):
        self.root = root
        self.pages = {}
        self.top = {e for e in os.listdir(root) if e not in GENERATED}
        self.names = set()
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if not (d == root and x in GENERATED)]
            self.names.update(files)
        self.code = None  # Names, read on first use

    def page(self, path):
        path = os.path.normpath(path)
        if path not in self.pages:
            self.pages[path] = Page(path)
        return self.pages[path]

    def links(self, page):
        """(line, target) of every link on the page, code spans left out."""
        for first, para in page.paragraphs:
            # Blank out code spans, keeping their line breaks for the count.
            text = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), para)
            for m in INLINE_LINK.finditer(text):
                yield first + text.count("\n", 0, m.start()), m.group(1)
            for i, line in enumerate(text.split("\n")):
                m = REF_DEF.match(line)
                if m:
                    yield first + i, m.group(1)

    def check_link(self, page, target):
        if not target or SCHEME.match(target) or target.startswith("//"):
            return None
        path, _, anchor = target.partition("#")
        if path:
            full = os.path.normpath(os.path.join(os.path.dirname(page.path), path))
            if not full.startswith(self.root) or not os.path.exists(full):
                return "dead link %s" % target
        else:
            full = page.path
        if anchor and full.endswith(".md"):
            if anchor not in self.page(full).anchors:
                return "dead anchor %s" % target
        return None

    def paths(self, page):
        """(line, path) of every file path named in code on the page."""
        for start, para in page.paragraphs:
            for m in CODE_SPAN.finditer(para):
                no = start + para.count("\n", 0, m.start())
                word = m.group(2).strip()
                if not word or re.search(r"[\s<>$=|\"']", word):
                    continue
                if word.startswith(("/", "~", ".")) and not word.startswith((".ci/", ".clang")):
                    continue
                # fuzz/corpus/NAME: a capitalised segment is a placeholder.
                if any(re.fullmatch(r"[A-Z][A-Z_]+", s) for s in word.split("/")):
                    continue
                # service/orders.c:orders_create names a function in a file.
                word = re.sub(r"(\.[A-Za-z]+):[A-Za-z_][\w.]*$", r"\1", word)
                first = word.split("/", 1)[0]
                if "/" in word and first in self.top:
                    yield no, word
                elif "/" not in word and word.endswith(FILE_ENDINGS) and "*" not in word:
                    yield no, word
        # In a command or a tree, a word that starts with one of the
        # checkout's folders (scripts/pay.sh, config/ticketd.env) is a path.
        for no, line in page.code:
            for word in re.split(r"[\s\"'(),;=`|]+", line):
                word = word.strip(".:")
                if "/" in word and word.split("/", 1)[0] in self.top and \
                        not re.search(r"[<>$\\]", word):
                    yield no, word

    def check_path(self, word):
        if "/" not in word:
            return None if word in self.names else "no file named %s" % word
        if "*" in word or "{" in word:
            import glob
            found = glob.glob(os.path.join(self.root, word))
        else:
            found = os.path.exists(os.path.join(self.root, word))
        return None if found else "no such path %s" % word

    def check_names(self, page):
        """(line, problem) for each name of code on the page that the code
        does not hold, or that its file does not define."""
        if self.code is None:
            self.code = Names(self.root)
        code = self.code
        found = list(claims(page))
        missing = {name for _, _, file, name in found if not file and name not in code.words}
        headers = code.in_headers(missing)
        examples = example_words(page) if missing else set()
        out = []
        for no, span, file, name in found:
            if file:
                paths = code.files_named(file)
                if not paths:
                    continue  # the path check says the file is missing
                if not any(defines(p, code.files[p], name) for p in paths):
                    out.append((no, "%s does not define %s" % (file, name)))
            elif name in missing and name not in headers and name not in examples and \
                    not code.foreign(name):
                out.append((no, "no name %s in the code" % span))
        return out, len(found)

    def problems(self, path):
        page = self.page(path)
        name = os.path.relpath(path, self.root)
        out, counts = [], [0, 0, 0]
        for no, target in self.links(page):
            counts[0] += 1
            p = self.check_link(page, target)
            if p:
                out.append("%s:%d: %s" % (name, no, p))
        for no, word in self.paths(page):
            counts[1] += 1
            p = self.check_path(word)
            if p:
                out.append("%s:%d: %s" % (name, no, p))
        found, counts[2] = self.check_names(page)
        out += ["%s:%d: %s" % (name, no, p) for no, p in found]
        return out, counts


def doc_pages(root):
    docs = os.path.join(root, "docs")
    return [os.path.join(root, "README.md")] + sorted(
        os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))


def self_test():
    """The checker on a sample it must fault seven times, no more."""
    tmp = tempfile.mkdtemp(prefix="check-docs-")
    try:
        os.makedirs(os.path.join(tmp, "docs"))
        os.makedirs(os.path.join(tmp, "service"))
        os.makedirs(os.path.join(tmp, "scripts"))
        with open(os.path.join(tmp, "service", "orders.c"), "w") as f:
            f.write("/* orders_vanish() is gone */\n"
                    "int orders_create(int n)\n{\n    return n;\n}\n")
        with open(os.path.join(tmp, "service", "token.c"), "w") as f:
            f.write("int orders_create(int n);\n")
        open(os.path.join(tmp, "scripts", "pay.sh"), "w").close()
        with open(os.path.join(tmp, "docs", "b.md"), "w") as f:
            f.write("# Page b\n\n## The `make lab` page: two\n")
        with open(os.path.join(tmp, "README.md"), "w") as f:
            f.write("# Sample\n\n## Here\n\n"
                    "[good](docs/b.md#the-make-lab-page-two), [here](#here), `service/orders.c`,\n"
                    "`orders.c:orders_create`, `build/x.o`, `[skip](nowhere.md)`\n"
                    "[dead](docs/none.md) [gone](docs/b.md#no-such-heading)\n"
                    "`service/none.c` and [a link that\nwraps](docs/gone.md)\n"
                    "`orders_create()`, `orders_vanish`, `service/token.c:orders_create`\n\n"
                    "```\n[fenced](nowhere.md) scripts/pay.sh; scripts/gone.sh --flag $x/y\n```\n")
        c = Checker(tmp)
        found, _ = c.problems(os.path.join(tmp, "README.md"))
        want = ["dead link docs/none.md", "dead anchor docs/b.md#no-such-heading",
                "dead link docs/gone.md", "no such path service/none.c",
                "no such path scripts/gone.sh", "no name orders_vanish in the code",
                "service/token.c does not define orders_create"]
        got = [p.split(": ", 1)[1] for p in found]
        return got == want, got
    finally:
        shutil.rmtree(tmp)


def check_lessons_run(root, pages):
    """The pages lab/record.py rewrites, and only those, hold the block."""
    sys.path.insert(0, os.path.join(root, "lab"))
    import record
    out = []
    rewritten = [os.path.normpath(d) for d in record.DOCS]
    for doc in rewritten:
        name = os.path.relpath(doc, root)
        try:
            with open(doc) as f:
                text = f.read()
        except OSError:
            out.append("lab/record.py rewrites %s, which does not exist" % name)
            continue
        if text.count(record.BEGIN) != 1 or text.count(record.END) != 1 or \
                text.find(record.END) < text.find(record.BEGIN):
            out.append("%s: not one lessons-run block (begin, then end)" % name)
            continue
        tmp = tempfile.NamedTemporaryFile("w", suffix=".md", delete=False)
        tmp.write(text)
        tmp.close()
        try:
            record.rewrite_block(tmp.name, ["(a table)"])
            with open(tmp.name) as f:
                after = f.read()
        finally:
            os.unlink(tmp.name)
        start, end = text.find(record.BEGIN), text.find(record.END)
        want = text[:start] + record.BEGIN + "\n(a table)\n" + text[end:]
        if after != want:
            out.append("%s: rewriting its lessons-run block changed more than the block" % name)
    for p in pages:
        with open(p) as f:
            if record.BEGIN in f.read() and os.path.normpath(p) not in rewritten:
                out.append("%s holds a lessons-run block that lab/record.py never rewrites (DOCS)"
                           % os.path.relpath(p, root))
    return out, [os.path.relpath(d, root) for d in rewritten]


def check_settings(root):
    """Every setting ticketd reads (the table in config.c) has its row in
    docs/configuration.md, which promises every setting."""
    import glob
    sources = glob.glob(os.path.join(root, "service", "**", "config.c"), recursive=True)
    if not sources:
        return ["no service/.../config.c to read the settings from"], 0
    with open(sources[0]) as f:
        names = sorted(set(re.findall(r'\{"(TICKETD_[A-Z0-9_]+)", T_', f.read())))
    with open(os.path.join(root, "docs", "configuration.md")) as f:
        page = f.read()
    missing = [n for n in names if "`%s`" % n not in page]
    return ["docs/configuration.md has no row for %s" % n for n in missing], len(names)


DEFENSES_LIST = re.compile(r"TICKETD_DEFENSES=([-a-z,]+)")


def section(path, anchor):
    """The text under the heading whose anchor this is, to the next
    heading; None when the page has no such heading."""
    page = Page(path)
    start = [i for i, a in page.headings.items() if a == anchor]
    if not start:
        return None
    ends = [i for i in page.headings if i > start[0]] + [len(page.prose)]
    return "\n".join(line for _, line in page.prose[start[0] + 1:min(ends)])


def names_switched_off(text):
    """The names in the TICKETD_DEFENSES= lists of a text."""
    for m in DEFENSES_LIST.finditer(text):
        for item in m.group(1).split(","):
            item = item.lstrip("-")
            if item and item not in ("all", "none"):
                yield item


def check_defences(root, pages, table):
    """Each defence of the table is written under its anchor, and every
    TICKETD_DEFENSES= list of the pages names only defences of the table."""
    out = []
    for d in table:
        path, _, anchor = d["anchor"].partition("#")
        full = os.path.join(root, path)
        text = section(full, anchor) if os.path.exists(full) and anchor else None
        if text is None:
            out.append("defences.def: %s's anchor %s is no heading" % (d["name"], d["anchor"]))
        elif "`%s`" % d["name"] not in text and d["name"] not in names_switched_off(text):
            out.append("defences.def: %s is not named under %s" % (d["name"], d["anchor"]))
    known = {d["name"] for d in table}
    for p in pages:
        with open(p, encoding="utf-8") as f:
            for no, line in enumerate(f, 1):
                for name in names_switched_off(line):
                    if name not in known:
                        out.append("%s:%d: TICKETD_DEFENSES names %s, which defences.def lacks"
                                   % (os.path.relpath(p, root), no, name))
    return out


def main():
    passed = failed = 0

    def report(ok, what, details=()):
        nonlocal passed, failed
        if ok:
            passed += 1
            print("ok    docs: %s" % what)
        else:
            failed += 1
            print("FAIL  docs: %s" % what)
            for d in details:
                print("      %s" % d)

    ok, got = self_test()
    report(ok, "the checker finds the dead links, dead anchor, missing paths and names of a sample",
           ["it found: %s" % (", ".join(got) or "nothing")])

    checker = Checker(ROOT)
    pages = doc_pages(ROOT)
    for p in pages:
        found, (links, paths, names) = checker.problems(p)
        report(not found, "%s: %d relative links and anchors, %d file paths, %d names of code" % (
            os.path.relpath(p, ROOT), links, paths, names), found)

    found, docs = check_lessons_run(ROOT, pages)
    report(not found, "lessons-run blocks where lab/record.py rewrites them (%s)" % ", ".join(docs),
           found)

    sys.path.insert(0, os.path.join(ROOT, "lab"))
    import defences
    table = defences.DEFENCES
    found = check_defences(ROOT, pages, table)
    report(not found, "each of the %d defences of defences.def documented at its anchor, "
           "and no other switched off" % len(table), found)
    sample = [dict(table[0], name="no-such-defence")]
    found = check_defences(ROOT, [], sample)
    report(len(found) == 1, "the defences check finds a sample defence documented nowhere", found)

    found, n = check_settings(ROOT)
    report(not found and n > 0, "docs/configuration.md names each of the %d settings of config.c" % n,
           found)

    print("docs: %d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
