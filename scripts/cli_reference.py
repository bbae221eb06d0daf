"""Print the CLI reference (docs/cli.md) from the commands' own --help texts.

    .venv/bin/python scripts/cli_reference.py > docs/cli.md

tests/test_cli_reference.py fails when docs/cli.md differs from what this prints.
"""

from __future__ import annotations

import click

from threadline.cli.main import cli


def help_text(cmd: click.Command, path: list[str], parent: click.Context | None) -> str:
    ctx = click.Context(
        cmd, info_name=path[-1], parent=parent, terminal_width=100, max_content_width=100
    )
    return cmd.get_help(ctx)


def walk(cmd: click.Command, path: list[str], parent: click.Context | None, out: list[str]) -> None:
    ctx = click.Context(
        cmd, info_name=path[-1], parent=parent, terminal_width=100, max_content_width=100
    )
    level = "#" * min(len(path) + 1, 4)
    out.append(f"{level} `{' '.join(path)}`\n")
    out.append("```text\n" + help_text(cmd, path, parent).rstrip() + "\n```\n")
    if isinstance(cmd, click.Group):
        for name in sorted(cmd.list_commands(ctx)):
            sub = cmd.get_command(ctx, name)
            assert sub is not None
            walk(sub, [*path, name], ctx, out)


def reference() -> str:
    out = [
        "# CLI reference\n",
        "Generated from the commands' `--help` by `scripts/cli_reference.py`; "
        "`tests/test_cli_reference.py` checks it is current.\n",
    ]
    walk(cli, ["threadline"], None, out)
    return "\n".join(out)


if __name__ == "__main__":
    print(reference(), end="")
