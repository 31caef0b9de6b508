"""The table of commands: `--help` lists them all from it, and a command imports only what
it uses (each checked in a fresh interpreter, through sys.modules)."""

from __future__ import annotations

import os
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from bazel_ldfix.cli import cli, registry

# What only the Bazel side, the diagnosis, the BUILD fix, the linkage gates and the commands
# use, with their renderings.
HEAVY_PARTS = ("bazel_ldfix.bazel", "bazel_ldfix.diagnosis", "bazel_ldfix.buildfix",
               "bazel_ldfix.linkage", "bazel_ldfix.repair",
               *(f"bazel_ldfix.render.{m}" for m in ("repair", "diagnosis", "brief", "github",
                                                    "buildfix", "linkage", "locate")))
# Third-party and standard modules that `resolve`'s text output does not need.
UNUSED_BY_RESOLVE = ("elftools", "runfiles", "json", "tempfile")


def imported_by(*args: str) -> tuple[int, set[str]]:
    """Run ``bazel-ldfix ARGS`` in a new interpreter: its exit code and every module it
    imported, from the first import of the package to the command's end."""
    code = ("import sys\nfrom bazel_ldfix.cli import main\ncode = main(sys.argv[1:])\n"
            "sys.stderr.write('\\nMODULES ' + ' '.join(sorted(sys.modules)) + '\\n')\n"
            "sys.exit(code)\n")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          text=True, env={**os.environ, "NO_COLOR": "1"})
    [line] = [x for x in done.stderr.splitlines() if x.startswith("MODULES ")]
    return done.returncode, set(line.split()[1:])


def of_parts(modules: set[str], parts: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in parts))


def test_every_entry_of_the_table_is_the_command_of_that_name() -> None:
    for name, entry in registry.COMMANDS.items():
        command = registry.load(name)
        assert isinstance(command, click.Command)
        assert command.name == name
        assert command.callback is not None
        assert command.callback.__module__ == entry.module


def test_help_lists_every_command_of_the_table_with_its_summary() -> None:
    output = CliRunner().invoke(cli, ["--help"]).output
    rows = output.split("Commands:\n", 1)[1].splitlines()
    assert [row.split()[0] for row in rows] == list(registry.COMMANDS)
    for row, entry in zip(rows, registry.COMMANDS.values(), strict=True):
        assert row.split(None, 1)[1] == entry.summary


def test_a_misspelled_command_is_answered_with_the_near_name_from_the_table() -> None:
    result = CliRunner().invoke(cli, ["reslove", "x"])
    assert result.exit_code == 2
    assert "No such command 'reslove'. Did you mean 'resolve'?" in result.output


def test_help_imports_no_command_module() -> None:
    code, modules = imported_by("--help")
    assert code == 0
    assert of_parts(modules, HEAVY_PARTS) == []
    assert of_parts(modules, tuple(e.module for e in registry.COMMANDS.values())) == []
    assert of_parts(modules, ("bazel_ldfix.loader", "elftools", "subprocess", "shutil")) == []


@pytest.mark.parametrize("columns", ["52", "60", "79", "200", "none"])
def test_help_is_as_wide_as_clicks_own_width_would_make_it(columns: str) -> None:
    # click measures the terminal with shutil; the group finds the same width without it.
    env = {**os.environ, "COLUMNS": columns}
    ours = subprocess.run([sys.executable, "-m", "bazel_ldfix", "--help"], env=env,
                          capture_output=True, text=True, check=True).stdout
    clicks = ("import click\nfrom bazel_ldfix.cli import cli\n"
              "ctx = click.Context(cli, info_name='bazel-ldfix', **cli.context_settings)\n"
              "print(cli.get_help(ctx))\n")
    theirs = subprocess.run([sys.executable, "-c", clicks], env=env, capture_output=True,
                            text=True, check=True).stdout
    assert ours == theirs


@pytest.mark.parametrize("flag", [[], ["--json"]])
def test_resolve_imports_nothing_of_bazel_diagnosis_buildfix_or_linkage(
        flag: list[str]) -> None:
    # This interpreter is a real program of this machine, with a real load to model.
    code, modules = imported_by("resolve", *flag, os.path.realpath(sys.executable))
    assert code in (0, 1)
    assert of_parts(modules, HEAVY_PARTS) == []
    assert "bazel_ldfix.commands.locate" not in modules
    unused = UNUSED_BY_RESOLVE if not flag else tuple(m for m in UNUSED_BY_RESOLVE
                                                      if m != "json")
    assert of_parts(modules, unused) == []


def test_a_command_that_starts_bazel_is_the_only_kind_that_imports_the_bazel_side() -> None:
    # `locate` asks Bazel for the output_base unless given one: its module, and Bazel's
    # processes, come in with it.
    code, modules = imported_by("locate", "--help")
    assert code == 0
    assert "bazel_ldfix.commands.locate" in modules
    assert "bazel_ldfix.commands.resolve" not in modules
