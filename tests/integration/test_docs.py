"""The documentation holds together: README.md is a short front door (its title first, then
the two commands), and every relative link and anchor in README.md, CHANGES.md and docs/*.md
resolves, by GitHub's heading slugs. Every test module a doc names in backticks exists, so a
renamed or deleted test cannot stay cited. No build is needed: these read files only."""
import glob
import os
import re

from sgtest import check, read

ASAN = False  # reads text files only

README_MAX_LINES = 200
# The docs name far more tests than this; fewer checked means the name pattern broke.
MIN_TEST_NAMES = 20
COMMANDS = "./run.sh demo\n./run.sh test"

LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")
TEST_NAME = re.compile(r"`(test_[A-Za-z0-9_]+)(?:\.py)?(?:::(test_[A-Za-z0-9_]+))?`")


def doc_files(ctx):
    files = [ctx.path("README.md"), ctx.path("CHANGES.md")]
    files += sorted(glob.glob(ctx.path("docs", "*.md")))
    return files


def strip_code(text):
    """Text outside fenced code blocks and inline code spans, where links are links."""
    out, fence = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fence = not fence
            out.append("")
            continue
        out.append("" if fence else re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)


def headings(text):
    """Heading texts outside fenced code, in order."""
    found, fence = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m and not fence:
            found.append(m.group(1))
    return found


def slug(heading):
    """GitHub's anchor for a heading: markup dropped, lowercase, characters other than
    letters, digits, spaces, hyphens and underscores removed, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").replace("*", "")
    text = text.lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text):
    """Every anchor the file's headings make, duplicates numbered -1, -2, ... as GitHub does."""
    seen, result = {}, set()
    for h in headings(text):
        base = slug(h)
        n = seen.get(base, 0)
        result.add(base if n == 0 else "%s-%d" % (base, n))
        seen[base] = n + 1
    return result


def test_slug_follows_github(ctx):
    # Headings of this project's docs, with the anchors GitHub gives them.
    check(slug("macOS (Mach-O): the generator") == "macos-mach-o-the-generator", "slug: macOS")
    check(slug("Tools in other processes: the registry and `stencilrt-stack`") ==
          "tools-in-other-processes-the-registry-and-stencilrt-stack", "slug: backticks")
    check(slug("Batched units (`--units batched`)") == "batched-units---units-batched",
          "slug: hyphens kept")
    check(slug("What a_b does, 1.0!") == "what-a_b-does-10", "slug: underscore and digits")
    check(anchors("# A\n## A\n### A\n") == {"a", "a-1", "a-2"}, "duplicate headings")
    check(anchors("```\n# not a heading\n```\n# B\n") == {"b"}, "code is not a heading")


def test_every_link_and_anchor_resolves(ctx):
    bad, count = [], 0
    for path in doc_files(ctx):
        check(os.path.exists(path), "%s is missing", os.path.relpath(path, ctx.root))
        text = strip_code(read(path))
        for target in LINK.findall(text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, mailto: ...
                continue
            count += 1
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                if file_part else path
            where = "%s: [..](%s)" % (os.path.relpath(path, ctx.root), target)
            if not os.path.exists(dest):
                bad.append("%s: no file %s" % (where, os.path.relpath(dest, ctx.root)))
            elif anchor and (not dest.endswith(".md") or anchor not in anchors(read(dest))):
                bad.append("%s: no heading in %s makes the anchor #%s" %
                           (where, os.path.relpath(dest, ctx.root), anchor))
    check(not bad, "links that do not resolve:\n  %s", "\n  ".join(bad))
    check(count >= 20, "only %d relative links found: the link pattern is broken", count)


def test_readme_is_a_front_door(ctx):
    text = read(ctx.path("README.md"))
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    check(lines and lines[0] == "# stencilgen",
          "README.md's first line is %r, not '# stencilgen'", lines[0] if lines else "")
    check(len(lines) <= README_MAX_LINES, "README.md has %d lines, more than %d", len(lines),
          README_MAX_LINES)
    rest = lines[1:]
    while rest and rest[0].strip() == "":
        rest.pop(0)
    check(rest and rest[0].startswith("```"),
          "README.md: after the title comes %r, not the code block of the two commands",
          rest[0] if rest else "")
    block = []
    for line in rest[1:]:
        if line.startswith("```"):
            break
        block.append(line)
    check("\n".join(block).strip() == COMMANDS,
          "README.md's first code block is %r, not the two commands %r", "\n".join(block),
          COMMANDS)


def test_every_test_named_in_docs_exists(ctx):
    programs = set()
    for root, _, files in os.walk(ctx.path("tests")):
        for f in files:
            programs.add(os.path.splitext(f)[0])
    bad, names = [], set()
    for path in doc_files(ctx):
        for module, function in TEST_NAME.findall(read(path)):
            names.add((module, function))
            where = os.path.relpath(path, ctx.root)
            py = ctx.path("tests", "integration", module + ".py")
            if function:
                if not os.path.exists(py):
                    bad.append("%s: %s::%s: no tests/integration/%s.py" %
                               (where, module, function, module))
                elif not re.search(r"^def %s\(" % function, read(py), re.M):
                    bad.append("%s: tests/integration/%s.py has no function %s" %
                               (where, module, function))
            elif not os.path.exists(py) and module not in programs:
                bad.append("%s: `%s` is neither tests/integration/%s.py nor a program under "
                           "tests/" % (where, module, module))
    check(not bad, "tests the docs name that do not exist:\n  %s", "\n  ".join(sorted(set(bad))))
    check(len(names) > MIN_TEST_NAMES,
          "only %d test names found in backticks (expected more than %d): the pattern broke",
          len(names), MIN_TEST_NAMES)
