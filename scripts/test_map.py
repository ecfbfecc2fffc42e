#!/usr/bin/env python3
"""Writes tests/README.md: which tests cover each header of include/ctnn.

  python3 scripts/test_map.py            prints the page (redirect it to tests/README.md)
  python3 scripts/test_map.py --check    exits 1, naming what differs, when tests/README.md
                                         is not what this script writes (the test
                                         "scripts: tests/README.md maps every header" runs it)
  --root DIR                             the repository (default: this script's parent's parent)

A test file *names* a header when it includes it (#include <ctnn/...> or a path relative
to the file) or is called after it (test_dense.cpp for layers/dense.hpp, test_dense_*.cpp
too). It *reaches* a header when the header is among everything it includes, directly or
through other headers (ctnn/ctnn.hpp reaches most of the library). Test files are the
.cpp and .cu files under tests/ (test areas, compile_fail cases, fuzzers, the package
consumers, the CUDA tests), not tests/docs (the docs checker) and not data files.
"""
import argparse
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def includes_of(path, include_root):
    """The files under include_root (or next to path) that path includes."""
    out = []
    for kind, name in INCLUDE.findall(path.read_text(errors="replace")):
        candidates = []
        if kind == '"':
            candidates.append(path.parent / name)
        candidates.append(include_root / name)
        for c in candidates:
            c = pathlib.Path(*c.parts)  # keep it lexical; resolve() below
            if c.is_file():
                out.append(c.resolve())
                break
    return out


def page(root):
    root = root.resolve()
    include_root = root / "include"
    headers = sorted(p.resolve() for p in (include_root / "ctnn").rglob("*") if p.suffix in (".hpp", ".cuh"))
    tests = sorted(p.resolve() for p in (root / "tests").rglob("*")
                   if p.suffix in (".cpp", ".cu") and "docs" not in p.relative_to(root / "tests").parts[:1]
                   and "corpus" not in p.parts)
    direct_cache = {}

    def direct(p):
        if p not in direct_cache:
            direct_cache[p] = includes_of(p, include_root)
        return direct_cache[p]

    closure_cache = {}

    def closure(p):
        if p in closure_cache:
            return closure_cache[p]
        seen, stack = set(), list(direct(p))
        while stack:
            q = stack.pop()
            if q in seen:
                continue
            seen.add(q)
            stack.extend(direct(q))
        closure_cache[p] = seen
        return seen

    def rel_header(h):
        return h.relative_to(include_root / "ctnn").as_posix()

    def rel_test(t):
        return t.relative_to(root / "tests").as_posix()

    rows = []
    for h in headers:
        stem = h.stem
        # a part of a split header (data/autotune/policy.hpp) is also named by its umbrella
        # (data/autotune.hpp), and by the tests named after the umbrella
        umbrella = h.parent.with_suffix(".hpp")
        if not umbrella.is_file() or h not in closure(umbrella.resolve()):
            umbrella = None
        # test_<stem>.cpp names the header of that stem; where headers share a stem
        # (data/autotune/tuner.hpp, tuning/tuner.hpp), only the one in the test's area
        same_stem = [o for o in headers if o.stem == stem]

        def called_after(t, stem=stem, h=h, same_stem=same_stem):
            if not (t.stem == "test_" + stem or t.stem.startswith("test_" + stem + "_")):
                return False
            area = t.parent.name
            return len(same_stem) == 1 or area in h.relative_to(include_root).parts
        names = []
        reach = 0
        for t in tests:
            named = h in direct(t) or called_after(t)
            if not named and umbrella is not None:
                named = umbrella.resolve() in direct(t) or t.stem == "test_" + umbrella.stem
            # a test helper header next to the test (tests/io/weights_file.hpp) counts as the test's own
            if not named:
                named = any(h in direct(q) for q in direct(t) if (root / "tests") in q.parents)
            if named:
                names.append(rel_test(t))
            if h in closure(t):
                reach += 1
        rows.append((rel_header(h), names, reach))

    lines = [
        "# Tests",
        "",
        "One doctest executable per area (a directory of tests/, `test_<area>`), CTest names",
        "`area: test case`; `tests/CMakeLists.txt` says how areas, compile-fail cases, the",
        "documents' code blocks, the scripts and the package consumers are registered, and",
        "docs/getting-started.md how to build and run them.",
        "",
        "## Which tests cover each header",
        "",
        "Written by `scripts/test_map.py` (`python3 scripts/test_map.py > tests/README.md`",
        "after adding a header or a test); the test \"scripts: tests/README.md maps every",
        "header\" fails when this page is not what the script writes. *Named by*: the test",
        "files that include the header or are called after it (`test_dense.cpp` for",
        "`layers/dense.hpp`), whose own helper header in tests/ includes it, or, for a part of",
        "a split header (`data/autotune/policy.hpp`), that name its umbrella. *Reached by*:",
        "how many test files compile it at all, through any chain of includes (the umbrella",
        "`ctnn/ctnn.hpp` reaches most headers). A header named by no test is marked **none**.",
        "",
        "| header | named by | reached by |",
        "| --- | --- | --- |",
    ]
    for h, names, reach in rows:
        named = ", ".join(f"`{n}`" for n in names) if names else "**none**"
        lines.append(f"| `ctnn/{h}` | {named} | {reach} |")
    lines.append("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parent.parent))
    ap.add_argument("--readme", default=None, help="the page to check (default: ROOT/tests/README.md)")
    a = ap.parse_args()
    root = pathlib.Path(a.root)
    text = page(root)
    if not a.check:
        sys.stdout.write(text)
        return 0
    readme = pathlib.Path(a.readme) if a.readme else root / "tests" / "README.md"
    have = readme.read_text() if readme.is_file() else ""
    if have == text:
        print(f"{readme}: current ({text.count('| `ctnn/')} headers)")
        return 0
    want_rows = {l for l in text.splitlines() if l.startswith("| `ctnn/")}
    have_rows = {l for l in have.splitlines() if l.startswith("| `ctnn/")}
    for l in sorted(want_rows - have_rows):
        print(f"{readme}: missing or out of date: {l}", file=sys.stderr)
    for l in sorted(have_rows - want_rows):
        print(f"{readme}: stale: {l}", file=sys.stderr)
    if want_rows == have_rows:
        print(f"{readme}: the text around the table differs from what scripts/test_map.py writes", file=sys.stderr)
    print("run: python3 scripts/test_map.py > tests/README.md", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
