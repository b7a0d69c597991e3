"""Every public error class in ``ragkit.errors`` is where a user looks for it:
in the tree of the module's docstring (which error to catch) and exported from
``ragkit`` itself. A failure names the class; add it to both places."""

from __future__ import annotations

import inspect
import re

import ragkit
import ragkit.errors


def _public_errors() -> list[str]:
    return sorted(
        name
        for name, value in vars(ragkit.errors).items()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == "ragkit.errors"
        and not name.startswith("_")
    )


def test_there_are_errors_to_check():
    assert "RagkitError" in _public_errors()
    assert len(_public_errors()) >= 20


def test_every_error_is_in_the_docstring_tree():
    doc = ragkit.errors.__doc__
    tree = set(re.findall(r"[├└]── (\w+)", doc)) | set(re.findall(r"^\s+(RagkitError)$", doc, re.M))
    missing = [name for name in _public_errors() if name not in tree]
    assert missing == [], f"not in the tree of ragkit/errors.py's docstring: {missing}"


def test_the_tree_draws_each_error_under_its_parent():
    """Indentation in the tree is the class hierarchy: each entry's parent is
    the nearest entry above it drawn one level less deep."""
    stack: list[str] = []
    for line in ragkit.errors.__doc__.splitlines():
        match = re.match(r"^(\s*)((?:[│ ]   )*)[├└]── (\w+)", line)
        if not match:
            continue
        depth, name = len(match.group(2)) // 4, match.group(3)
        stack = stack[:depth] + [name]
        parent = stack[depth - 1] if depth else "RagkitError"
        assert parent in [c.__name__ for c in getattr(ragkit.errors, name).__mro__[1:]], (name, parent)


def test_every_error_is_exported_from_ragkit():
    missing = [name for name in _public_errors() if name not in ragkit.__all__]
    assert missing == [], f"not in ragkit.__all__ (ragkit/__init__.py): {missing}"
    for name in _public_errors():
        assert getattr(ragkit, name) is getattr(ragkit.errors, name)
