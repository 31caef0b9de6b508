"""What a newcomer reads before anything runs: `--help`."""

from __future__ import annotations

from click.testing import CliRunner

from bazel_ldfix.cli import cli


def test_help_opens_with_where_to_start_and_lists_commands_in_the_order_of_use() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    start = lines.index("  Start here:")
    # Where to start comes before the options and the list of commands.
    assert start < lines.index("Options:") < lines.index("Commands:")
    first = [line.split()[1] for line in lines[start + 1:start + 4]]
    assert first == ["test", "diagnose", "fix"]
    listed = [line.split()[0] for line in lines[lines.index("Commands:") + 1:] if line.strip()]
    assert listed[:4] == ["test", "diagnose", "fix", "env"]
    assert sorted(listed) == sorted(cli.commands)    # every command, once
    assert max(len(line) for line in lines) <= 80
