"""How walks, hops and node lists look on a terminal, and as JSON, dot or ndjson."""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING, Any

from rich import box
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from lineage.cli.runner import console

if TYPE_CHECKING:
    import typer

    from lineage.services.walks import Walk

# Rows a terminal table lists; the rest are counted, with the command that lists them all.
LISTED_ROWS = 50


def _hop_line(node: dict[str, Any], marks: dict[str, list[dict[str, Any]]]) -> str:
    made_by = " ".join(
        part
        for part in (
            node["transform_version"],
            node["produced_by"] and f"by {node['produced_by']}",
            node["index_snapshot"] and f"snapshot {node['index_snapshot']}",
            node["source_uri"],
        )
        if part
    )
    digest = node["content_hash"][:19]
    line = f"[bold]{node['kind']}[/bold] {node['context_id']}  {made_by}  [dim]{digest}…[/dim]"
    if layers := _layers_line(node.get("request")):
        line += f"\n[dim]{escape(layers)}[/dim]"
    for mark in marks.get(node["context_id"], []):
        line += f"\n[red]⚠ {mark['reason']}[/red]: {mark['detail']}"
    return line


def _layers_line(request: dict[str, Any] | None) -> str:
    """A hop's layers in one line: request, then service call, then the backend request ids."""
    if not request:
        return ""
    parts = [f"in {request['operation']} (trace {request['trace_id']})"]
    if service := request["service"]:
        said = [service["provider"], service["model"], service["operation"]]
        parts.append("via " + " ".join(p for p in said if p))
        parts += [f"{k}={v}" for k, v in service["parameters"].items()]
        if service["attempts"]:
            parts.append(f"{service['attempts']} attempts")
        ids = [t["request_id"] for t in service["transport"] if t["request_id"]]
        parts += [f"request {i}" for i in ids]
    return " · ".join(parts)


def print_walk(walk: Walk, hops: list[dict[str, Any]]) -> None:
    """Hop by hop from the start to the roots; a node reached again is only named."""
    by_id = {node["context_id"]: node for node in walk.nodes}
    marks: dict[str, list[dict[str, Any]]] = {}
    for hop in hops:
        marks.setdefault(hop["context_id"], []).append(hop)
    start = walk.nodes[0]
    tree = Tree(_hop_line(start, marks))
    shown = {start["context_id"]}

    def grow(branch: Tree, node: dict[str, Any]) -> None:
        for parent_id in node["parent_ids"]:
            parent = by_id.get(parent_id)
            if parent is None:
                branch.add(f"[dim]{parent_id} (beyond max depth)[/dim]")
            elif parent_id in shown:
                branch.add(f"[dim]{parent['kind']} {parent_id} (shown above)[/dim]")
            else:
                shown.add(parent_id)
                grow(branch.add(_hop_line(parent, marks)), parent)

    grow(tree, start)
    console.print(tree)
    if walk.truncated_reason == "retention":
        console.print("[yellow]truncated: ancestors expired under the retention period[/yellow]")
    elif walk.truncated:
        console.print("[yellow]truncated: ancestors lie beyond --max-depth[/yellow]")


def print_hops(hops: list[dict[str, Any]]) -> None:
    """The marks the tree shows, one phrase per hop (a table repeated the tree's text)."""
    if not hops:
        console.print("\nno suspicious hops")
        return
    reasons: dict[str, list[str]] = {}
    for hop in hops:
        reasons.setdefault(hop["context_id"], []).append(hop["reason"])
    marked = "; ".join(f"{context_id} {', '.join(why)}" for context_id, why in reasons.items())
    console.print(
        f"\n{len(reasons)} suspicious hops (sql/suspicious_hops.sql): {marked}", highlight=False
    )


def walk_json(found: Walk, hops: list[dict[str, Any]]) -> str:
    return json.dumps(
        {"nodes": found.nodes, "edges": found.edges(), "truncated": found.truncated,
         "truncated_reason": found.truncated_reason, "suspicious": hops},
        indent=2,
    )  # fmt: skip


def walk_dot(found: Walk, hops: list[dict[str, Any]]) -> str:
    suspect = {hop["context_id"] for hop in hops}
    lines = ["digraph lineage {", "  rankdir=BT;"]
    for node in found.nodes:
        color = ', color="red"' if node["context_id"] in suspect else ""
        label = f"{node['kind']}\\n{node['context_id']}"
        lines.append(f'  "{node["context_id"]}" [label="{label}"{color}];')
    lines += [f'  "{edge["child"]}" -> "{edge["parent"]}";' for edge in found.edges()]
    return "\n".join([*lines, "}"])


def table(*headers: str, title: str | None = None, numbers: int = 0) -> Table:
    """A table that reads at 80 columns: no side borders, and no column narrower than its
    header word (a long value folds inside its own column). The last `numbers` columns are
    right-aligned."""
    made = Table(
        box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0), title=title
    )
    for index, header in enumerate(headers):
        numeric = index >= len(headers) - numbers
        made.add_column(
            header,
            min_width=len(header),
            overflow="fold",
            justify="right" if numeric else "left",
        )
    return made


def print_table(headers: tuple[str, ...], rows: list[list[str]], *, numbers: int = 0) -> None:
    shown = table(*headers, numbers=numbers)
    for row in rows:
        shown.add_row(*row)
    console.print(shown)


def print_lines(lines: list[str]) -> None:
    """Plain lines (no markup), each wrapped at the terminal's edge under its own indent."""
    from rich.padding import Padding
    from rich.text import Text

    for line in lines:
        if not line.strip():
            console.print()  # a padded empty Text prints no line at all
            continue
        text = line.lstrip(" ")
        indent = len(line) - len(text)
        console.print(Padding(Text(text), (0, 0, 0, indent), expand=False), highlight=False)


def command_line(ctx: typer.Context, **changed: str) -> str:
    """This command as one would type it again: the arguments and options it was given (those
    not at their defaults), with `changed` ones (by parameter name) given these values."""
    words = ["lineage", *ctx.command_path.split()[1:]]
    for param in ctx.command.params:
        name = str(param.name)
        value = changed.get(name, ctx.params.get(name))
        if param.param_type_name == "argument":
            words.append(shlex.quote(str(value)))
        elif name in changed or (value is not None and value != param.default):
            words += [param.opts[0], shlex.quote(str(value))]
    return " ".join(words)


def print_more(listed: int, total: int, command: str) -> None:
    """Say how many rows a table left out and how to get every one."""
    if total > listed:
        console.print(f"… {total - listed:,} more: {command}", highlight=False, soft_wrap=True)


def print_nodes(nodes: list[dict[str, Any]], output: str, ctx: typer.Context) -> None:
    """A table of the first LISTED_ROWS (and the command for the rest); every node as ndjson,
    or as CSV (ID_FILE_COLUMNS, as the explorer's download)."""
    import csv
    import sys

    from lineage.services.reads import ID_FILE_COLUMNS
    from lineage.services.walks import ImpactTally

    tally = ImpactTally()
    for node in nodes:
        tally.add(node)
    summary = tally.summary()
    if output == "ndjson":
        for node in nodes:
            print(json.dumps(node))
        print(json.dumps({"summary": summary.model_dump(mode="json")}))
        return
    if output == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(ID_FILE_COLUMNS)
        writer.writerows([node[column] for column in ID_FILE_COLUMNS] for node in nodes)
        return
    listed = table("depth", "kind", "context_id", "source / made by")
    listed.columns[0].justify = "right"
    for node in nodes[:LISTED_ROWS]:
        made_by = node["produced_by"] or node["transform_version"]
        origin = made_by if node["parent_ids"] else node["source_uri"] or made_by
        listed.add_row(str(node["depth"]), node["kind"], node["context_id"], origin or "")
    console.print(listed)
    file_name = f"{ctx.command_path.split()[-1]}.csv"
    print_more(LISTED_ROWS, len(nodes), f"{command_line(ctx, output='csv')} > {file_name}")
    kinds = ", ".join(f"{kind} {count:,}" for kind, count in summary.counts_by_kind.items())
    cut = "; truncated: some lie beyond --max-depth" if summary.truncated else ""
    console.print(f"{summary.total:,} records" + (f" ({kinds})" if kinds else "") + cut)
