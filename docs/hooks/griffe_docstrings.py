"""griffe extension: the project's reST-flavoured docstrings, rendered as Markdown by mkdocstrings.

The docstrings are written for readers of the source: double backquotes for code (which Markdown
renders as code too), Sphinx roles (``:class:`~pkg.mod.Name```, ``:mod:`.source```), ``#:`` comments
above attributes, a few reST simple tables and ``::`` literal blocks. This extension, loaded by the
python handler (``extensions`` in ``mkdocs.yml``), makes them read well on the site:

* an attribute without a docstring gets the ``#:`` comment lines just above it (as Sphinx does);
* a role becomes a cross-reference to the object it names (resolved in the docstring's scope, as
  Sphinx would), shown as code; references to objects the site does not document stay plain code;
* a reST simple table (``====`` rules) becomes a preformatted block; ``text::`` becomes ``text:``.

Nothing in the package is changed; the rewriting happens on griffe's in-memory objects.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

#: ``:role:`text <target>```, ``:role:`~target```, ``:role:`target``` (with or without a domain).
ROLE = re.compile(r":(?:[A-Za-z]+:)?[A-Za-z]+:`([^`]+)`")
_TITLED = re.compile(r"(.+?)\s*<([^<>]+)>", re.DOTALL)
_RULE = re.compile(r"^\s*=+( +=+)+\s*$")


def _comment_docstring(attr: griffe.Attribute) -> str | None:
    """The ``#:`` comment lines right above ``attr`` (none: None)."""
    try:
        lines = attr.lines_collection[attr.filepath]
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    if not attr.lineno:
        return None
    found: list[str] = []
    i = attr.lineno - 2
    while i >= 0 and lines[i].strip().startswith("#:"):
        found.append(lines[i].strip()[2:].strip())
        i -= 1
    return "\n".join(reversed(found)) or None


def _package_of(obj: griffe.Object) -> griffe.Object:
    module = obj if obj.is_module else obj.module
    return module if module.is_package or module.parent is None else module.parent  # type: ignore[return-value]


def resolve_target(obj: griffe.Object, name: str, collection: Any) -> str | None:
    """The full path ``name`` refers to in ``obj``'s docstring, or None."""
    name = name.lstrip("!~").strip()
    if not name:
        return None
    if name.startswith("."):
        base: griffe.Object | None = _package_of(obj)
        dots = len(name) - len(name.lstrip("."))
        for _ in range(dots - 1):
            base = base.parent if base is not None else None
        if base is None:
            return None
        name = f"{base.path}.{name.lstrip('.')}"
    candidates = [name]
    head, _, rest = name.partition(".")
    scope: griffe.Object | None = obj
    while scope is not None:
        try:
            found = scope.resolve(head)
        except Exception:  # griffe's NameResolutionError, or an alias it cannot follow
            found = None
        if found:
            candidates.append(f"{found}.{rest}" if rest else found)
            break
        scope = scope.parent
    for candidate in candidates:
        try:
            target = collection[candidate]
        except Exception:  # not loaded: not part of the documented packages
            continue
        try:
            return str(target.final_target.path if target.is_alias else target.path)
        except Exception:  # an alias whose target is outside the loaded packages
            return candidate
    return None


def _role(obj: griffe.Object, collection: Any, match: re.Match[str]) -> str:
    text = match.group(1).strip()
    titled = _TITLED.fullmatch(text)
    if titled:
        title, target = titled.group(1), titled.group(2)
    else:
        target = text
        bare = text.lstrip("!")
        title = bare[1:].rsplit(".", 1)[-1] if bare.startswith("~") else bare.lstrip(".")
    path = resolve_target(obj, target, collection)
    code = f"<code>{html.escape(title)}</code>"
    return f'<autoref identifier="{html.escape(path)}" optional>{code}</autoref>' if path else code


def _tables_as_blocks(text: str) -> str:
    """reST simple tables (three ``====`` rules) as preformatted blocks; ``text::`` as ``text:``."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if _RULE.match(lines[i]):
            rules = [j for j in range(i, len(lines)) if _RULE.match(lines[j])][:3]
            if len(rules) == 3:
                out += ["", "```text", *lines[i: rules[2] + 1], "```", ""]
                i = rules[2] + 1
                continue
        out.append(lines[i])
        i += 1
    text = "\n".join(out)
    return re.sub(r"(\S)::$", r"\1:", text, flags=re.M)


def rewrite(obj: griffe.Object, collection: Any) -> None:
    """Rewrite ``obj``'s docstring (roles, tables, literal-block markers) in place."""
    docstring = obj.docstring
    if docstring is None:
        return
    value = _tables_as_blocks(docstring.value)
    docstring.value = ROLE.sub(lambda m: _role(obj, collection, m), value)


def _walk(obj: griffe.Object, seen: set[int]) -> Any:
    if id(obj) in seen:
        return
    seen.add(id(obj))
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _walk(member, seen)  # type: ignore[arg-type]


class ReSTDocstrings(griffe.Extension):
    """``#:`` attribute comments, Sphinx roles as cross-references, simple tables as blocks."""

    def on_attribute_instance(self, *, attr: griffe.Attribute, **kwargs: Any) -> None:
        if attr.docstring is None:
            text = _comment_docstring(attr)
            if text:
                attr.docstring = griffe.Docstring(text, parent=attr, lineno=attr.lineno)

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        for obj in _walk(pkg, set()):
            rewrite(obj, loader.modules_collection)
