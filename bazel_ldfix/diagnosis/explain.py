"""Each loader failure of one test, explained with the files Bazel left behind.

The test executable (resolved with the loader model, as the repair does), the copies under
output_base (chosen as the repair chooses), the ``.gnu.version_d`` of each candidate, and the
``_solib_*`` directories that say which ``cc_import`` staged what. Each failure is explained
on its own (:class:`Explained`); the fixes are then worked out for the test as a whole, since
one LD_LIBRARY_PATH serves all its failures.

What is read from a message is reported as known; what the model or a directory name
suggests is said to be so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bazel_ldfix import PROG, elf, pathlist
from bazel_ldfix.bazel import declaredinputs
from bazel_ldfix.diagnosis import cause, fixes, logs
from bazel_ldfix.diagnosis.cause import Cause
from bazel_ldfix.diagnosis.fixes import Fix
from bazel_ldfix.diagnosis.hermetic import build_fix
from bazel_ldfix.diagnosis.messages import NOT_FOUND_KINDS, ErrorKind, LoaderFailure
from bazel_ldfix.diagnosis.testfacts import Entries, TestContext, same_file, versions
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.loader.resolution import PassedOver, PassReason
from bazel_ldfix.outputbase import index

if TYPE_CHECKING:
    from bazel_ldfix.repair.results import Missing


@dataclass(frozen=True)
class Finding:
    """One library one test could not load, explained, with the three fixes."""

    test: str | None
    log: str
    error_kind: ErrorKind
    soname: str | None
    needed_by: tuple[str, ...]
    found: tuple[str, ...]          # usable copies, best first (the repair's choice)
    fix: Fix
    message: str                    # the log's line ("" for a predicted one)
    seen_in_log: bool               # False: predicted by the loader model
    needed_by_source: str           # "message", "loader model" or "unknown"
    version: str | None = None
    symbol: str | None = None
    passed_over: tuple[PassedOver, ...] = ()
    notes: tuple[str, ...] = ()
    cause: Cause | None = None      # what to group it under on one screen


@dataclass(frozen=True)
class Explained:
    """The part of a finding that does not depend on the other failures of the test."""

    failure: LoaderFailure | None       # None: predicted by the loader model
    kind: ErrorKind
    soname: str | None
    log: str = ""
    needed_by: tuple[str, ...] = ()
    needed_by_source: str = "unknown"
    found: tuple[str, ...] = ()
    passed_over: tuple[PassedOver, ...] = ()
    notes: tuple[str, ...] = ()
    append: tuple[str, ...] = ()        # directories LD_LIBRARY_PATH needs, after the rest
    prepend: tuple[str, ...] = ()       # ... before the rest (to win over a bad copy)
    ldfix: bool = False                 # `bazel-ldfix test` finds it by itself
    modelled: bool = False              # the loader model misses it too
    build: str | None = None
    cause: Cause | None = None

    def noting(self, *notes: str) -> Explained:
        return dataclasses.replace(self, notes=self.notes + notes)


_PREDICTED = ("predicted by the loader model: the loader stops at the first library it "
              "cannot load, so the log cannot show this one yet")


def explain_test(test: TestContext, entries: Entries, prog: str = PROG) -> list[Finding]:
    """Every failure of one test, once, then what the loader model says comes next, each
    with the fixes worked out for the test as a whole (the tool's command run as ``prog``)."""
    explained: list[Explained] = []
    seen: set[tuple[Any, ...]] = set()
    for log, failures in entries:
        for failure in failures:
            key = (failure.kind, failure.soname, failure.version, failure.symbol)
            if key in seen:
                continue        # the same failure in another shard, run or attempt
            seen.add(key)
            explained.append(dataclasses.replace(explain(test, failure), log=log.path))
    if any(e.modelled for e in explained):
        # The loader stops at the first library it cannot load; the model knows the rest.
        shown = {e.soname for e in explained}
        for soname, missing in test.missing.items():
            if soname not in shown:
                one = _from_model(test, soname, missing)
                explained.append(dataclasses.replace(
                    one, log=explained[0].log, notes=(_PREDICTED, *one.notes)))
    base = pathlist.split(test.library_path)
    append = [d for e in explained for d in e.append]
    given = [index.Choice(e.soname, os.path.dirname(e.found[0]), e.found[0], ())
             for e in explained if e.append and e.found and e.soname]
    # What is appended gives the test its libraries and nothing else it loads: a directory
    # that holds other copies is given as links (repair/exposure.py).
    exposed = test.exposed(given) if given else None
    value = fixes.library_path_value(
        base, exposed if exposed is not None else append,
        [d for e in explained for d in e.prepend])
    ldfix = all(e.ldfix for e in explained if e.append or e.prepend) and any(
        e.ldfix for e in explained)
    out = []
    for e in explained:
        helps = bool(e.append or e.prepend)
        fix = Fix(fixes.command(test.label, value, ldfix=ldfix, prog=prog) if helps else None,
                  fixes.flag(value) if helps else None,
                  fixes.bazelrc(value) if helps else None,
                  e.build, value if helps else None)
        seen_failure = e.failure
        out.append(Finding(
            test.label, e.log, e.kind, e.soname, e.needed_by, e.found, fix,
            seen_failure.line if seen_failure else "", seen_failure is not None,
            e.needed_by_source, seen_failure.version if seen_failure else None,
            seen_failure.symbol if seen_failure else None,
            e.passed_over, e.notes + (test.notes if seen_failure else ()), e.cause))
    return out


def explain(test: TestContext, failure: LoaderFailure) -> Explained:
    """One failure of ``test``, explained on its own."""
    kind = failure.kind
    if kind is ErrorKind.VERSION_NOT_FOUND:
        return _version(test, failure)
    if kind is ErrorKind.UNDEFINED_SYMBOL:
        return _symbol(test, failure)
    if kind in NOT_FOUND_KINDS and not failure.by_path:
        return _not_found(test, failure)
    return _bad_file(test, failure)


def split_choice(directory: str | None, soname: str, passed_over: Sequence[PassedOver]
                 ) -> tuple[tuple[str, ...], tuple[PassedOver, ...]]:
    """(usable copies best first, the others) from one of index.choose's answers.

    A copy not preferred is usable and listed after the chosen one; the chosen file reached
    through another path is not listed at all.
    """
    if directory is None:
        return (), tuple(passed_over)
    good = [os.path.join(directory, soname)]
    rest = []
    for p in passed_over:
        if p.kind is PassReason.NOT_PREFERRED:
            good.append(p.path)
        elif p.kind is not PassReason.SAME_FILE:
            rest.append(p)
    return tuple(good), tuple(rest)


# -- one failure, by kind -------------------------------------------------------------------

def _not_found(test: TestContext, failure: LoaderFailure) -> Explained:
    soname = failure.soname or failure.name
    missing = test.missing.get(soname)
    if missing is not None:
        one = _from_model(test, soname, missing)
    else:
        one = _search(test, soname)
        linked = any(i.soname == soname for i in test.imports)
        if failure.dlopen and not linked:
            one = dataclasses.replace(
                one.noting("loaded with dlopen by name: no ELF file of the test names it, so "
                           "bazel-ldfix test cannot know it is needed; the flag below adds "
                           "its directory"),
                needed_by_source="dlopen", cause=cause.dlopen(),
                build=fixes.dlopen_by_name(soname, one.found[0] if one.found else None,
                                           test.output_base, test.label))
        elif test.executable is not None and (stale := [
                f for f in declaredinputs.leftovers(test.executable, test.library_path)
                if f.soname == soname]):
            one = dataclasses.replace(one.noting(
                f"the loader model finds it only at {stale[0].path}, which no rule declares "
                "for the test now (left in bazel-out by an earlier build): a sandbox or a "
                "remote executor gives the test only what Bazel declares, and `bazel clean` "
                "removes it"), cause=cause.leftover(stale[0].path))
        elif test.executable is not None and test.output_base is not None:
            one = one.noting("the loader model finds it in the environment assumed "
                             f"({_describe_env(test.library_path)}, outside the "
                             "sandbox): the test ran with another LD_LIBRARY_PATH (an env "
                             "attribute, a --test_env, or your shell's), or the model saw "
                             "a file the sandbox hides (a stale _solib_ symlink of an "
                             "earlier build)")
    one = dataclasses.replace(one, failure=failure, kind=failure.kind)
    if failure.kind is ErrorKind.WRONG_CLASS and one.cause is not None \
            and one.cause.kind is cause.CauseKind.NO_IMPORT:
        one = dataclasses.replace(one, cause=cause.wrong_class())
    if failure.kind is ErrorKind.WRONG_CLASS:
        # The copies of the other class: what the loader tried, and went on past.
        listed = {p.path for p in one.passed_over}
        other = [p for p in (index.check_candidate(path, test.expect) for path in
                             (*test.candidates(soname), *test.system_copies(soname))
                             if path not in listed and not any(same_file(path, f)
                                                               for f in one.found))
                 if p is not None]
        one = dataclasses.replace(one, passed_over=(*one.passed_over, *other))
        one = one.noting(f"every {soname} the loader tried was of the other class "
                         f"({failure.detail}); it skips those and keeps searching")
    return one


def _from_model(test: TestContext, soname: str, missing: Missing) -> Explained:
    """A name the model also misses: the repair's own answer (its choice, its reasons)."""
    found, passed_over = split_choice(missing.dir, soname, missing.passed_over)
    append: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    if missing.dir is not None:
        append = (missing.dir,)
    else:
        # The repair looks beside the libraries the loader found and under
        # output_base/external. A cc_import of this workspace stages a file of the
        # source tree, and its versioned file sits beside it there.
        near = index.locate([soname], [], test.expect, test.preferred(),
                            test.on_error)[soname]
        if near.dir is not None:
            found, passed_over = split_choice(near.dir, soname, near.passed_over)
            append = (near.dir,)
            notes = ("found beside the file a cc_import of the test stages, where "
                     "bazel-ldfix test does not look",)
        else:
            notes = (test.nowhere(soname),)
    return Explained(None, ErrorKind.CANNOT_OPEN, soname, needed_by=tuple(missing.needed_by),
                     needed_by_source="loader model" if missing.needed_by else "unknown",
                     found=found, passed_over=passed_over, notes=notes, append=append,
                     ldfix=missing.dir is not None, modelled=True,
                     build=build_fix(test, soname, found),
                     cause=cause.of_missing(test, soname, found))


def _search(test: TestContext, soname: str) -> Explained:
    """Look for ``soname`` as the repair would, for a name the model does not miss."""
    one = Explained(None, ErrorKind.CANNOT_OPEN, soname,
                    cause=cause.of_missing(test, soname, ()))
    if test.output_base is None:
        return one.noting("output_base unknown (pass --output-base): not searched")
    choice = index.locate([soname], test.roots(), test.expect, test.preferred(),
                          test.on_error)[soname]
    found, passed_over = split_choice(choice.dir, soname, choice.passed_over)
    return dataclasses.replace(
        one, found=found, passed_over=passed_over,
        append=(choice.dir,) if choice.dir is not None else (),
        notes=() if choice.dir is not None else (test.nowhere(soname),),
        build=build_fix(test, soname, found), cause=cause.of_missing(test, soname, found))


def _version(test: TestContext, failure: LoaderFailure) -> Explained:
    """A version the loaded copy does not define: which object needs it, what that copy
    defines, which copy (under output_base, beside the test's libraries, on the system)
    defines it, and how to have the loader take that one."""
    lacking = _real(logs.unsandbox(failure.name))
    soname = failure.soname or lacking
    if os.path.isfile(lacking):
        with contextlib.suppress(BadInputError):
            soname = elf.read_elf(lacking).soname or soname
    version = failure.version or ""
    required_by = _real(logs.unsandbox(failure.required_by)) if failure.required_by \
        else None
    one = Explained(failure, failure.kind, soname, needed_by=(required_by,) if required_by
                    else (), needed_by_source="message" if required_by else "unknown",
                    cause=cause.lacks_version(lacking, _defined(lacking)),
                    notes=(f"{required_by or 'an object'} needs {version} of {soname}; the "
                           f"loader took {lacking}, which does not define it"
                           + _defined_note(lacking),))
    if version.startswith("GLIBC_"):
        return one.noting(
            f"{version} is glibc's own: glibc's libraries must match the ld.so that "
            "starts the test, so no LD_LIBRARY_PATH can bring a newer one. Build "
            f"{required_by or 'the object'} for the oldest glibc it must run on (a sysroot "
            "toolchain), or run the test where glibc is at least that new")
    if test.output_base is None:
        return one.noting("output_base unknown (pass --output-base): not searched")
    candidates = [*test.candidates(soname), *test.system_copies(soname)]
    one = _other_copy(test, one, soname, lacking, candidates,
                      lambda path: version in versions(path), version)
    if not one.found and version.startswith(("GLIBCXX_", "CXXABI_")):
        one = one.noting(
            f"the C++ toolchain that built {required_by or 'the object'} is newer "
            f"than the {soname} the test loads: ship that toolchain's {soname} with "
            "the test (a cc_import of it), or link with -static-libstdc++")
    return one


def _symbol(test: TestContext, failure: LoaderFailure) -> Explained:
    """A symbol no loaded object defines: the loaded copies of what the object needs are
    searched for another copy that defines it (its ``.dynsym``, and the version)."""
    obj = _real(logs.unsandbox(failure.name))
    symbol = failure.symbol or ""
    version = failure.version
    what = symbol + (f" (version {version})" if version else "")
    one = Explained(failure, failure.kind, None, needed_by=(obj,), needed_by_source="message",
                    cause=cause.lacks_symbol(obj),
                    notes=(f"{obj} uses {what}, which no object loaded with it defines",))
    if test.output_base is None:
        return one.noting("output_base unknown (pass --output-base): not searched")

    def defines(path: str) -> bool:
        return _defines(path, symbol) and (version is None or version in versions(path))

    for soname, lacking in _loaded_for(test, obj):
        if defines(lacking):
            # The copy the model takes has it, so the test took another: through the
            # LD_LIBRARY_PATH it had, which the model does not know.
            one = dataclasses.replace(one, soname=soname, cause=cause.lacks_symbol(obj))
            one = one.noting(
                f"the loader model, in the environment assumed "
                f"({_describe_env(test.library_path)}), takes {lacking}, which defines "
                f"{symbol}: the test loaded another {soname}, through the LD_LIBRARY_PATH "
                "it had (a --test_env of an rc file, the rule's env, the shell's)")
            return _other_copy(test, one, soname, "", [lacking], defines, None,
                               what=symbol)
        candidates = [p for p in (*test.candidates(soname), *test.system_copies(soname))
                      if not same_file(p, lacking)]
        if not any(defines(p) for p in candidates):
            continue
        one = dataclasses.replace(one, soname=soname,
                                  cause=cause.lacks_symbol(obj, lacking))
        return _other_copy(test, one, soname, lacking, candidates, defines, None,
                           what=symbol)
    return one.noting(
        f"no other copy of the libraries {os.path.basename(obj)} loads (under "
        f"{test.output_base}/external, beside the test's libraries, on the system) defines "
        f"{symbol}: {obj} was built against a library the test does not load at all (a "
        "DT_NEEDED entry missing at link time), or a newer one than any here")


def _loaded_for(test: TestContext, obj: str) -> list[tuple[str, str]]:
    """``(soname, path)`` of the libraries loaded with ``obj``: its own DT_NEEDED first
    (where its symbols should come from), then the rest of the test's process."""
    out: dict[str, str] = {}
    own: list[str] = []
    with contextlib.suppress(BadInputError):
        own = list(elf.read_elf(obj).needed)
    for path in (obj, test.executable):
        for lib in test.loaded(path) if path and os.path.isfile(path) else ():
            if lib.path is not None and "/" not in lib.name:
                # ($ORIGIN/../_solib_k8/...: Bazel's own directories, no symlink among them)
                out.setdefault(lib.name, os.path.normpath(lib.path))
    first = [n for n in own if n in out]
    return [(n, out[n]) for n in (*first, *(n for n in out if n not in first))]


def _defines(path: str, symbol: str) -> bool:
    """Whether ``path`` exports a definition of ``symbol`` (its ``.dynsym``)."""
    # The symbol reader of the linkage gates: it reads ELF files and depends on nothing
    # above bazel_ldfix.elf. Imported here, as it imports pyelftools (50 ms).
    from bazel_ldfix.symbols import read_symbols

    try:
        return read_symbols(path, relocations=False).defines(symbol) is not None
    except BadInputError:
        return False


def _other_copy(test: TestContext, one: Explained, soname: str, lacking: str,
                candidates: Sequence[str], usable: Callable[[str], bool],
                version: str | None, what: str | None = None) -> Explained:
    """``one`` with the copy that has what ``lacking`` lacks (``version``, or the symbol
    ``what``), chosen as the repair chooses, and the change that makes the loader take it."""
    what = what or version or ""
    defining = [p for p in dict.fromkeys(candidates)
                if index.check_candidate(p, test.expect) is None and usable(p)]
    choice = index.choose(soname, defining, test.expect, test.preferred())
    found, passed_over = split_choice(choice.dir, soname, choice.passed_over)
    one = dataclasses.replace(one, found=found, passed_over=passed_over)
    if choice.dir is None:
        seen = ", ".join(dict.fromkeys(candidates)) or "none"
        return one.noting(f"no {soname} under {test.output_base}/external, beside the "
                          f"test's libraries or on the system defines {what} (copies seen: "
                          f"{seen})")
    one = one.noting(f"{choice.path} defines {what}")
    if not lacking:
        # Which copy the test took is not known: only that the one found comes first.
        return dataclasses.replace(one.noting(
            f"LD_LIBRARY_PATH is searched before RUNPATH, ld.so.cache and the system "
            f"directories: {choice.dir} first on it is taken (the flag below)"),
            prepend=(choice.dir,))
    # The entry of the test's LD_LIBRARY_PATH the loader took it from, if it did.
    entries = [d for d in pathlist.split(test.library_path)
               if same_file(os.path.join(d, soname), lacking)]
    on_path = bool(entries)
    where = entries[0] if entries else os.path.dirname(lacking)
    staged = [i for i in test.imports if same_file(i.staged, lacking)]
    if on_path:
        # LD_LIBRARY_PATH comes before every RUNPATH, hence before any BUILD change.
        one = one.noting(f"{where} is on the test's LD_LIBRARY_PATH, "
                         f"{test.library_path}: take it out (from the --test_env, the "
                         f"rule's env or the shell that sets it), or put {choice.dir} "
                         "before it (the flag below)")
    else:
        one = one.noting(f"LD_LIBRARY_PATH is searched before RUNPATH, ld.so.cache and the "
                         f"system directories: {choice.dir} first on it wins over {lacking} "
                         "(the flag below)")
    build = build_fix(test, soname, found, version) if version else None
    if staged and build is None:
        imp = staged[0]
        build = (f"{imp.shown_label} (a cc_import, in {fixes.where(imp)}) stages "
                 f"{imp.attribute_value}, a {soname} without {what}. Import one that has "
                 f"it, such as {found[0]}.\n")
    if on_path or not (_is_system(lacking) or staged):
        # Not a system copy and not one Bazel staged: it came through LD_LIBRARY_PATH (or
        # a DT_RPATH), which every RUNPATH, hence every BUILD change, comes after.
        build = (f"{where} is " + ("on the test's LD_LIBRARY_PATH" if on_path else
                 "not a system directory nor one Bazel staged, so the loader found it "
                 "through LD_LIBRARY_PATH (an env attribute, a --test_env, or the "
                 "shell's) or a DT_RPATH (guessed)") + ". Take it out of the test's "
                 "environment first; nothing in a BUILD file can come before it.\n"
                 + ("\n" + build if build else ""))
    return dataclasses.replace(one, prepend=(choice.dir,), build=build)


def _bad_file(test: TestContext, failure: LoaderFailure) -> Explained:
    """The loader named a file it could not use (or a name that was itself a path)."""
    path = logs.unsandbox(failure.name)
    soname = os.path.basename(path)
    searched = _search(test, soname) if failure.kind is not ErrorKind.OTHER or "/" in path \
        else Explained(failure, failure.kind, soname)
    described = _describe_file(path)
    one = dataclasses.replace(searched, failure=failure, kind=failure.kind, needed_by=(),
                              needed_by_source="unknown",   # the message does not say
                              notes=searched.notes + ((described,) if described else ()))
    if failure.kind is ErrorKind.OTHER:
        return dataclasses.replace(
            one.noting(_OTHER_HINTS.get(_hint_key(failure.detail),
                                        f"glibc says: {failure.detail}")), append=(),
            cause=cause.other())
    if failure.kind is ErrorKind.WRONG_CLASS:
        opener = "a dlopen call" if failure.dlopen else "a DT_NEEDED entry with a slash"
        return dataclasses.replace(one.noting(
            f"{path} was opened by its path ({opener}): LD_LIBRARY_PATH cannot redirect a "
            "path; the path itself must name a file of the test's class and machine"
            + (f", such as {one.found[0]}" if one.found else "")), append=(), build=None,
            cause=cause.wrong_class())
    # file too short / invalid ELF header: the search stopped at a broken copy.
    one = dataclasses.replace(one, prepend=one.append, append=(), cause=cause.broken_file(path))
    if one.found:
        one = one.noting(f"the loader stops at a broken copy instead of going on; put "
                         f"{os.path.dirname(one.found[0])} first on LD_LIBRARY_PATH, "
                         "which is searched before RUNPATH, ld.so.cache and the system "
                         "directories (not before a DT_RPATH)")
    staged = [i for i in test.imports if same_file(i.staged, path)]
    if staged:
        imp = staged[0]
        one = dataclasses.replace(one, build=(
            f"{imp.shown_label} (a cc_import, in {fixes.where(imp)}) imports "
            f"{imp.attribute_value}, which is not a usable library "
            f"({failure.detail}). Fix the repository's content (a real file, "
            "not a Git LFS pointer or a truncated download); the cc_import "
            "itself can stay.\n"))
    return one


# -- what files and messages say ------------------------------------------------------------

def _real(path: str) -> str:
    """The file behind a runfiles or _solib_ path, when it still exists."""
    return os.path.realpath(path) if os.path.exists(path) else path


def _defined(path: str) -> tuple[str, ...]:
    """The versions ``path`` defines, less its own name (the base version)."""
    if not os.path.isfile(path):
        return ()
    try:
        own = elf.read_elf(path).soname
    except BadInputError:
        own = None
    return tuple(v for v in versions(path) if v != own and v != os.path.basename(path))


def _defined_note(path: str) -> str:
    if not os.path.isfile(path):
        return ""
    defined = _defined(path)
    if not defined:
        return " (it defines no versions)"
    shown = ", ".join(defined[-4:])
    return f" (its newest: {shown})" if len(defined) > 4 else f" (it defines {shown})"


def _describe_file(path: str) -> str | None:
    if not path.startswith("/") or not os.path.exists(path):
        return None
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return None
    if head.startswith(b"version https://git-lfs"):
        return (f"{path} is a Git LFS pointer ({size} bytes), not the library: the "
                "repository was fetched without `git lfs pull`")
    if head.startswith(b"/* GNU ld script") or head.startswith(b"INPUT(") \
            or head.startswith(b"GROUP("):
        return f"{path} is a linker script, which only the linker reads"
    if not head.startswith(elf.ELFMAG):
        return f"{path} is not an ELF file ({size} bytes)"
    if size < 64:
        return f"{path} is {size} bytes long: a truncated download?"
    return None


_SYSTEM_PREFIXES = ("/lib/", "/lib64/", "/lib32/", "/libx32/", "/usr/lib/", "/usr/lib64/",
                    "/usr/lib32/", "/usr/libx32/", "/usr/local/lib/")


def _is_system(path: str) -> bool:
    """In a directory the loader reaches through ld.so.cache or its defaults (roughly)."""
    return path.startswith(_SYSTEM_PREFIXES)


def _describe_env(library_path: str | None) -> str:
    return f"LD_LIBRARY_PATH={library_path}" if library_path else "no LD_LIBRARY_PATH"


def _hint_key(detail: str) -> str:
    for key in _OTHER_HINTS:
        if detail.startswith(key):
            return key
    return detail


_OTHER_HINTS = {
    "cannot enable executable stack": (
        "the library asks for an executable stack (PT_GNU_STACK with PF_X), which this "
        "system refuses: rebuild it with -Wl,-z,noexecstack, or clear the flag "
        "(patchelf --clear-execstack)"),
    "cannot allocate memory in static TLS block": (
        "a library with initial-exec TLS was dlopen()ed after start-up and the static TLS "
        "space is used up: link it into the test (so it loads at start-up) or LD_PRELOAD it"),
    "cannot dynamically load position-independent executable": (
        "dlopen was given a program, not a library"),
    "cannot read file data": (
        "the file is shorter than its ELF header says: a truncated download or copy"),
}
