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
    $VAR) are not claims.

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
wrapped over two lines), one dead anchor and two missing paths (one in a
fenced command), and must find exactly those five: a check that cannot
fail proves nothing.
"""

import os
import re
import shutil
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


class Checker:
    def __init__(self, root):
        self.root = root
        self.pages = {}
        self.top = {e for e in os.listdir(root) if e not in GENERATED}
        self.names = set()
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if not (d == root and x in GENERATED)]
            self.names.update(files)

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

    def problems(self, path):
        page = self.page(path)
        name = os.path.relpath(path, self.root)
        out, counts = [], [0, 0]
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
        return out, counts


def doc_pages(root):
    docs = os.path.join(root, "docs")
    return [os.path.join(root, "README.md")] + sorted(
        os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))


def self_test():
    """The checker on a sample it must fault five times, no more."""
    tmp = tempfile.mkdtemp(prefix="check-docs-")
    try:
        os.makedirs(os.path.join(tmp, "docs"))
        os.makedirs(os.path.join(tmp, "service"))
        os.makedirs(os.path.join(tmp, "scripts"))
        open(os.path.join(tmp, "service", "orders.c"), "w").close()
        open(os.path.join(tmp, "scripts", "pay.sh"), "w").close()
        with open(os.path.join(tmp, "docs", "b.md"), "w") as f:
            f.write("# Page b\n\n## The `make lab` page: two\n")
        with open(os.path.join(tmp, "README.md"), "w") as f:
            f.write("# Sample\n\n## Here\n\n"
                    "[good](docs/b.md#the-make-lab-page-two), [here](#here), `service/orders.c`,\n"
                    "`orders.c:orders_create`, `build/x.o`, `[skip](nowhere.md)`\n"
                    "[dead](docs/none.md) [gone](docs/b.md#no-such-heading)\n"
                    "`service/none.c` and [a link that\nwraps](docs/gone.md)\n\n"
                    "```\n[fenced](nowhere.md) scripts/pay.sh; scripts/gone.sh --flag $x/y\n```\n")
        c = Checker(tmp)
        found, _ = c.problems(os.path.join(tmp, "README.md"))
        want = ["dead link docs/none.md", "dead anchor docs/b.md#no-such-heading",
                "dead link docs/gone.md", "no such path service/none.c",
                "no such path scripts/gone.sh"]
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
    report(ok, "the checker finds the dead links, dead anchor and missing paths of a sample",
           ["it found: %s" % (", ".join(got) or "nothing")])

    checker = Checker(ROOT)
    pages = doc_pages(ROOT)
    for p in pages:
        found, (links, paths) = checker.problems(p)
        report(not found, "%s: %d relative links and anchors, %d file paths" % (
            os.path.relpath(p, ROOT), links, paths), found)

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
