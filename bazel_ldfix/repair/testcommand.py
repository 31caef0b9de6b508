"""The repair of one ``bazel test`` command line: its build step, its tests planned, the
rules' env.

Bazel works first. The build step starts before the loader model is even imported, and
the host's loader is asked what every model asks first while Bazel builds; the model's
own work starts when Bazel's events are in. The rules' ``env`` is asked only when needed,
and remembered (:mod:`bazel_ldfix.bazel.rulecache`); the last repair of the same command is
remembered too, so that the build step gets the same ``--test_env`` as the ``bazel test``
after it (a different value makes Bazel discard its analysis cache).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bazel_ldfix import pathlist
from bazel_ldfix.bazel.buildstep import BuildStep, download_outputs
from bazel_ldfix.bazel.client import Bazel
from bazel_ldfix.bazel.commandline import CommandLine
from bazel_ldfix.bazel.exitcodes import (
    BUILD_FAILURE,
    COMMAND_LINE_ERROR,
    INTERRUPTED,
    NO_TESTS_FOUND,
    SUCCESS,
)
from bazel_ldfix.bazel.options import selected as selected_tests
from bazel_ldfix.bazel.query import query_rules, start_query_rules
from bazel_ldfix.bazel.queryxml import RuleInfo
from bazel_ldfix.bazel.targets import StepHead, TestTarget
from bazel_ldfix.bazel.workspace import output_base as ask_output_base
from bazel_ldfix.bazel.workspace import workspace_of
from bazel_ldfix.errors import (
    BazelError,
    BuildStepError,
    NotAWorkspaceError,
    NoTestsError,
)
from bazel_ldfix.given import Given, flags
from bazel_ldfix.outputbase import checked
from bazel_ldfix.pathlist import VARIABLE
from bazel_ldfix.repair.keptrepair import LastRun
from bazel_ldfix.repair.setting import PlanContext, RunFacts, Setting

if TYPE_CHECKING:
    from bazel_ldfix.bazel.query import PendingRules
    from bazel_ldfix.bazel.targets import BuildEvents
    from bazel_ldfix.elf import ElfHeader
    from bazel_ldfix.loader.closure import LoaderFactory
    from bazel_ldfix.repair.models import Models
    from bazel_ldfix.repair.results import Repair
    from bazel_ldfix.session import BazelChoice, Session
    from bazel_ldfix.store import Store

@dataclass(frozen=True)
class StepFailed:
    """The build step failed, with Bazel's exit code."""

    code: int
    # The user's options ask for --build_tests_only, which the step's own
    # --nobuild_tests_only overrides: it built more than `bazel test ARGS` builds.
    builds_more: bool

    @property
    def same_as_test(self) -> bool:
        """``bazel test ARGS`` fails the same way: the step built what it builds (with the
        same options and rc files), and Bazel's code says the build or the command line is
        wrong, which running it again does not change."""
        # Others (out of memory, a lost remote input, an internal error) may not.
        return self.code in (BUILD_FAILURE, COMMAND_LINE_ERROR) and not self.builds_more


def builds_more(command_line: Sequence[str]) -> bool:
    """Whether the options as Bazel parsed them (``optionsParsed.cmdLine``: rc files and
    ``--config`` expansions in place) ask for ``--build_tests_only`` before the step's own
    ``--nobuild_tests_only``, the last one."""
    return CommandLine.of(command_line).until_last("--nobuild_tests_only").flag(
        "build_tests_only")


_ALONE = Setting()   # what a repair asks by default: nothing but the repair


def repair_tests(runner: Bazel, args: Sequence[str], client_env: Mapping[str, str], *,
                 output_base: str | None = None, setting: Setting = _ALONE,
                 session: Session | None = None) -> Repair | StepFailed:
    """The repair for ``bazel test ARGS``, or :class:`StepFailed` when the build step
    fails. Raises NoTestsError when the patterns select no test.

    Bazel is asked as little as possible: the output_base and each test's tags come from
    the build step's events (unless given), and the rules' ``env`` (``bazel query``) only
    when a test misses something (a rule's ``env`` may provide it, and the repair's
    ``--test_env`` would replace it) or the rule's value may win over the flags, only for
    the selected tests and only the rules whose ``env`` or ``env_inherit`` mentions the
    variable. That answer is remembered (:mod:`bazel_ldfix.bazel.rulecache`) and asked
    again only when a file it was read from, or an option, has changed. Without a
    ``session`` (its per-user store, its links directories, its host's driver), or under
    ``setting.no_cache``, nothing is remembered or given again.
    """
    workspace = workspace_of(runner.cwd)
    if workspace is None:
        raise NotAWorkspaceError("not inside a Bazel workspace (no WORKSPACE or MODULE.bazel "
                                 "above the current directory)")
    store = None if session is None else session.store
    use = store is not None and not setting.no_cache
    last = LastRun(runner, args, store, use=use)
    built = _build_step(runner, args, client_env, last, output_base)
    if isinstance(built, StepFailed):
        return built
    events = built.events
    # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
    from bazel_ldfix.bazel import testenv
    from bazel_ldfix.repair import replay

    selected = [t.label for t in selected_tests(events.tests, {}, events.command_line)]
    rules = _Rules(runner, events, events.workspace or workspace, selected,
                   store if use else None, built.output_base)
    # The same command again, with nothing it read changed: the same repair.
    inputs = replay.inputs_of(events, client_env, built.output_base, setting.prepend,
                              force_local=setting.force_local_path) \
        if last.keeps and not built.absent else None
    if last.kept is not None and inputs is not None:
        again = last.given_again(inputs, replay.rules_of(rules.known)
                                 if rules.known is not None else None)
        if again is not None:
            if again.links_dir:
                # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
                from bazel_ldfix import linkdir

                linkdir.renew(again.links_dir)
            last.remember(again.given)
            return again
    # Where a rule's env may win over the flags (Bazel 7.2+, or a version not known), a
    # test that loads with the flags' value may not load with its rule's: ask the rules.
    # (Tags come from the build step's events: a tag filter needs no query.)
    flags_decide = testenv.order_of(events.version) is testenv.Order.FLAGS_WIN or \
        testenv.environment_of(events.options, client_env, {}, [], events.version).base == ()
    result = None
    used: Mapping[str, RuleInfo] | None = None   # the rules' answer the repair used
    if last.given is not None:
        # The last run of this command needed a repair: this one most likely does too, so
        # the rule query runs while the tests are resolved.
        rules.start()
    try:
        if flags_decide and events.tests:
            # Without the rules' env: if every test loads, that is the answer (nothing to add).
            first = _plan_tests(built, args, client_env, setting, session, {}, search=False)
            if not any(t.missing_before or t.error for t in first.tests):
                result = first
        if result is None:
            used = rules.answer()
            result = _plan_tests(built, args, client_env, setting, session, used)
    finally:
        rules.close()
    last.remember(result.given)
    if inputs is not None and not result.groups:
        # (A split run is made anew each time: the kept record holds one value.)
        last.keep(inputs, replay.rules_of(used), built.models.memo.facts(), result)
    return result


@dataclass(frozen=True)
class _Built:
    """What the build step gave, and the model that read the tests while Bazel built."""

    events: BuildEvents
    models: Models
    host_loader: LoaderFactory
    host: ElfHeader | None
    output_base: str
    notes: tuple[str, ...]                  # about the whole step
    absent: tuple[str, ...]                 # tests whose executable is not on disk
    unreadable: Mapping[str, str]           # label -> why it is not examined


def _build_step(runner: Bazel, args: Sequence[str], client_env: Mapping[str, str],
                last: LastRun, output_base: str | None) -> _Built | StepFailed:
    """The build step, with the tests read and resolved as soon as Bazel has built each."""
    step = BuildStep(runner, args, flags(last.given))
    read_ahead: Callable[[TestTarget, StepHead], None] | None = None
    try:
        # While Bazel builds: the model, and what the host's loader says first; then each
        # test as soon as Bazel has built it.
        from bazel_ldfix.bazel.testenv import environment_of
        from bazel_ldfix.loader.closure import LoaderFactory, host_header
        from bazel_ldfix.repair.models import Models
        from bazel_ldfix.repair.results import TestInput

        models = Models()
        host_loader = LoaderFactory(memo=models.memo)
        host = host_header()
        # A failure here is met again, and handled, where each file is modelled.
        with contextlib.suppress(Exception):
            host_loader.warm()
        # What is read from here on while Bazel builds is checked once it has ended: a
        # directory read early may get more from Bazel later (another test's outputs).
        models.memo.watch()
        values: dict[int, tuple[StepHead, str | None]] = {}   # by the head's id
        last_value = last.given.ld_library_path if last.given is not None else None
        if last_value is not None and not _all_there(last_value):
            # A directory of it is gone: a links directory removed since (pruned, or the
            # cache cleaned), which the plan makes again. Read now, it would stay absent
            # for the rest of the command, after the plan has made it.
            last_value = None

        def read_tests(test: TestTarget, head: StepHead) -> None:
            # Read, and resolved in the value the flags give it: what the first plan asks
            # of most tests (a rule's own env may give another; that is resolved then).
            subject = models.read_ahead(TestInput(test.label, test.executable),
                                        host)
            if subject is None:
                return
            with contextlib.suppress(Exception):   # met again, and handled, by the plan
                known = values.get(id(head))
                if known is None or known[0] is not head:
                    known = values[id(head)] = (head, environment_of(
                        head.options, client_env, {}, [test.label], head.version
                    ).current[test.label])
                models.resolve_ahead(subject, known[1], host_loader)
                if last_value is not None and last_value != known[1]:
                    # The value the last repair of this command gave: most likely this
                    # one's too, whose check the plan then finds made.
                    models.resolve_ahead(subject, last_value, host_loader)

        if last.kept is None:
            # (With a repair kept, most likely given again, Bazel is left the machine.)
            read_ahead = read_tests
    finally:
        events, code = step.result(read_ahead)
    if code not in (SUCCESS, NO_TESTS_FOUND):
        return StepFailed(code, builds_more(events.command_line))
    if not models.memo.still_true():
        # Bazel changed something that was read while it built: read everything anew.
        models = Models()
        host_loader = LoaderFactory(memo=models.memo)
        models.memo.watch()
    if not events.complete:
        # Which tests the step built is not known: it is not "no test selected".
        raise BazelError("the build step's events end before Bazel's last event (the "
                         "--build_event_json_file was cut short or not written); which tests "
                         "it built is not known")
    base = checked(output_base or events.output_base or ask_output_base(runner))
    notes: list[str] = []
    absent = [t for t in events.tests if not os.path.isfile(t.executable)]
    if absent:
        # A remote cache with Build without the Bytes: Bazel 7+ does not download a test's
        # executable in a `bazel test` (RemoteOutputChecker.shouldAddTopLevelTarget, "Do
        # not download test binary in test/coverage mode"), 4.2.3 with
        # --remote_download_minimal downloads nothing. A `bazel build` of the same targets
        # with --remote_download_outputs=toplevel downloads each top-level target's
        # outputs and runfiles (addTopLevelTarget, addRunfiles) and changes no build
        # option, so neither this step nor the `bazel test` after it re-analyses.
        try:
            got = download_outputs(runner, args, flags(last.given))
        except BazelError as exc:   # it did not end in time: the tests run as they are
            notes.append(exc.lines()[0])
        else:
            if got != 0:
                notes.append(f"downloading the test executables (`bazel build ... "
                             f"--remote_download_outputs=toplevel`) failed with exit code "
                             f"{got}")
        absent = [t for t in absent if not os.path.isfile(t.executable)]
    unreadable = {t.label: f"{t.label}: cannot read its executable {t.executable}: not on "
                  "disk (a remote cache that did not download it?); not examined"
                  for t in absent}
    return _Built(events, models, host_loader, host, base, tuple(notes),
                  tuple(t.label for t in absent), unreadable)


class _Rules:
    """The selected tests' rules' ``env``: remembered from an earlier run while nothing it
    was read from has changed, else asked (``bazel query``), early or when needed."""

    def __init__(self, runner: Bazel, events: BuildEvents, workspace: str,
                 selected: Sequence[str], store: Store | None, output_base: str) -> None:
        # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
        from bazel_ldfix.bazel import rulecache

        self._runner, self._selected, self._output_base = runner, selected, output_base
        self._remembered = store if selected else None
        self._key = rulecache.key_of(runner, events, workspace)
        #: The remembered answer (None: not known without asking).
        self.known = rulecache.recall(self._remembered, self._key, selected) \
            if self._remembered else None
        self._asked_ns = time.time_ns()
        self._pending: PendingRules | None = None

    def start(self) -> None:
        """Ask now, in the background, unless the answer is known."""
        if self.known is None and self._selected:
            self._asked_ns = time.time_ns()
            self._pending = start_query_rules(self._runner, self._selected, VARIABLE)

    def answer(self) -> dict[str, RuleInfo]:
        """The answer: remembered, or the query's (then remembered for the next run)."""
        # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
        from bazel_ldfix.bazel import rulecache

        if self.known is None:
            if self._pending is None:
                self._asked_ns = time.time_ns()
            answer = (self._pending.result() if self._pending is not None
                      else query_rules(self._runner, self._selected, VARIABLE))
            if self._remembered:
                rulecache.remember(self._remembered, self._key, self._selected, answer,
                                   self._output_base, self._asked_ns)
            self.known = dict(answer.rules)
        return self.known

    def close(self) -> None:
        if self._pending is not None:
            self._pending.close()


def _plan_tests(built: _Built, args: Sequence[str], client_env: Mapping[str, str],
                setting: Setting, session: Session | None, rules: Mapping[str, RuleInfo],
                search: bool = True) -> Repair:
    """The plan for the selected tests, given the rules' ``env``: one value, or one per
    group where one value cannot serve them all (:mod:`bazel_ldfix.repair.plan`)."""
    # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
    from bazel_ldfix.bazel.testenv import environment_of
    from bazel_ldfix.repair.plan import plan_repair
    from bazel_ldfix.repair.results import Repair, TestInput

    events = built.events
    chosen = selected_tests(events.tests, rules, events.command_line)
    if not chosen:
        patterns = " ".join(a for a in args if not a.startswith("-")) or "(none)"
        raise NoTestsError(f"the target patterns and test filters select no test: "
                           f"{patterns}")
    tests = [t for t in chosen if t.label not in built.unreadable]
    step_notes = (*built.notes,
                  *(built.unreadable[t.label] for t in chosen if t.label in built.unreadable))
    if not tests:
        # Nothing to model; the user's `bazel test` still runs, unchanged.
        return Repair(built.output_base, "nothing", (), (), Given(), options=events.options,
                      notes=step_notes, patterns=events.patterns)
    env = environment_of(events.options, client_env,
                         {k: r.env for k, r in rules.items()}, [t.label for t in tests],
                         events.version, {k: r.env_inherit for k, r in rules.items()})
    inputs = [TestInput(t.label, t.executable) for t in tests]
    models = built.models
    told = session.on_error if session is not None else None

    def noted(path: str, exc: OSError) -> None:
        models.memo.opaque()   # a walk's error is not a fact kept: never given again
        if told is not None:
            told(path, exc)

    context = PlanContext(built.output_base, built.host_loader, models, built.host,
                          session, setting,
                          RunFacts(events.options, events.patterns, step_notes), noted)
    return plan_repair(inputs, env, context, search=search)


def _all_there(value: str) -> bool:
    """Whether every directory of an ``LD_LIBRARY_PATH`` value is there now."""
    return all(os.path.isdir(entry) for entry in pathlist.split(value) if entry)


def for_command(session: Session, choice: BazelChoice, bazel_args: Sequence[str], *,
                prepend: bool = False, force_local_path: bool = False
                ) -> Repair | StepFailed:
    """:func:`repair_tests` for a command: the session's environment, its per-user store
    (none with ``--no-cache``), its Bazel, its progress and unreadable-file lines."""
    setting = Setting(prepend, choice.no_cache, force_local_path)
    return repair_tests(session.bazel(choice), bazel_args, session.env,
                        output_base=choice.output_base, setting=setting, session=session)


def build_failed(failed: StepFailed) -> BuildStepError:
    """The error ``test``, ``env`` and ``fix`` alike end with when the build step fails.
    Where it failed as ``bazel test BAZEL_ARGS`` would (a target that does not exist, a
    compile error, a command line Bazel refuses), the exit code is Bazel's own, which
    ``test`` always exits with; otherwise the step is one of the tool's own (66), which
    ``test`` falls back from."""
    code = failed.code
    exit_code = code if failed.same_as_test else None
    if code == INTERRUPTED:
        return BuildStepError("the build step of `bazel test` was interrupted (exit code 8)",
                              code, exit_code)
    return BuildStepError(f"the build step of `bazel test` failed (exit code {code}); "
                          "see Bazel's output above", code, exit_code)
