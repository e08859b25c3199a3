"""The package's floors, read from its imports (those inside functions and under TYPE_CHECKING
included): no import cycle, no module importing a floor above its own, and faces (api/, cli/)
that neither name a sql/ file nor open a transaction: they call one service verb."""

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

import lineage

PACKAGE = Path(lineage.__file__).parent
# Lowest first. A module may import its own floor and those below, never one above.
FLOORS: list[set[str]] = [
    {"core", "settings"},
    {"db", "migrations", "vector_stores"},
    {"services", "claims", "interop", "verifiable_log", "bundle"},
    {"store", "integrations", "lineage"},  # the SDK: `lineage` is the package's __init__
    {"api", "cli", "__main__", "ui"},
]
FACES = {"api", "cli"}
# What opens a transaction or runs SQL: only services do.
TRANSACTION_CALLS = {"tenant", "connection", "acquire", "transaction", "fetch", "execute"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for path in PACKAGE.rglob("*.py")
        if "migrations/versions" not in path.as_posix()
    }


def room(module: str) -> str:
    """The folder (or top-level module) a module lives in: `lineage.db.database` -> `db`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def floor(module: str) -> int:
    [level] = [i for i, rooms in enumerate(FLOORS) if room(module) in rooms]
    return level


@cache
def imports(module: str) -> frozenset[str]:
    """The package's modules that `module` imports, wherever in it the import stands."""
    path = modules()[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules() else base)
    return frozenset(name for name in found if name in modules() and name != module)


def cycles() -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in imports(node):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while (member := stack.pop()) != node:
                group.append(member)
            if group:
                found.append(sorted([node, *group]))

    for name in sorted(modules()):
        if name not in index:
            visit(name)
    return found


def face_modules() -> Iterator[tuple[str, ast.AST]]:
    for name, path in sorted(modules().items()):
        if room(name) in FACES:
            yield name, ast.parse(path.read_text())


def test_the_package_has_no_import_cycle() -> None:
    assert cycles() == []


def test_no_module_imports_a_floor_above_its_own() -> None:
    upward = [
        f"{module} (floor {floor(module)}) imports {target} (floor {floor(target)})"
        for module in sorted(modules())
        for target in sorted(imports(module))
        if floor(target) > floor(module)
    ]
    assert upward == []


def test_every_room_has_a_floor() -> None:
    placed = set().union(*FLOORS)
    assert {room(module) for module in modules()} <= placed


def test_faces_never_name_a_sql_file() -> None:
    names = {path.stem for path in (PACKAGE / "sql").glob("*.sql")}
    named = [
        f"{module}:{node.lineno} {node.value!r}"
        for module, tree in face_modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.removesuffix(".sql") in names
    ]
    assert named == []


def test_faces_never_open_a_transaction_or_run_sql() -> None:
    opened = [
        f"{module}:{node.lineno} .{node.func.attr}()"
        for module, tree in face_modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in TRANSACTION_CALLS
    ]
    assert opened == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import lineage.db.database\n", {"lineage.db.database"}),
        ("def f():\n    from lineage.services import appends\n", {"lineage.services.appends"}),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..db import keyring\n",
            {"lineage.db.keyring"},
        ),
    ],
)
def test_imports_are_read_wherever_they_stand(
    source: str, expected: set[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader sees imports inside functions, relative ones and TYPE_CHECKING ones."""
    probe = PACKAGE / "core" / "probe.py"
    monkeypatch.setitem(modules(), "lineage.core.probe", tmp_path / "probe.py")
    (tmp_path / "probe.py").write_text(source)
    imports.cache_clear()
    try:
        assert imports("lineage.core.probe") == expected
    finally:
        imports.cache_clear()
    assert not probe.exists()
