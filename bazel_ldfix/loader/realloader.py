"""``check``: the real loader's verdict on a file, set against the model's.

The real loader is asked the model's question: it runs in trace mode on the name the file
would be opened by (``search.opened_path``: a program's real path, a library's name as
given, symlinks and all, since its ``$ORIGIN`` comes from that name), by default with the cache
inhibited, so that a library only /etc/ld.so.cache can reach shows as missing. Each missing
library is then explained with what the cache and ld.so.conf say about it.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bazel_ldfix import elf
from bazel_ldfix.children import signal_name
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.given import Given
from bazel_ldfix.loader import conformance, ldconfig, trace
from bazel_ldfix.loader.closure import (
    Options,
    cache_of,
    interp_for,
    loader_for,
    profile_of,
    trusted_for,
)
from bazel_ldfix.loader.cuda import NO_HOST_DRIVER, CudaNote, HostDriver, notes_for
from bazel_ldfix.loader.resolution import Resolution
from bazel_ldfix.loader.verify import opened_path

_MAX_EXACT_SUBSETS = 12  # beyond this many directories, the smallest set is found greedily


@dataclass(frozen=True)
class Note:
    """What the cache and ld.so.conf say about one missing library."""

    soname: str
    what: str


@dataclass(frozen=True)
class CheckResult:
    file: str
    interp: str
    trace: trace.Trace
    disagreements: tuple[conformance.Disagreement, ...]
    notes: tuple[Note, ...]
    interp_note: str | None = None     # the file's PT_INTERP was set aside
    # The loader run lists itself under the program's PT_INTERP, at its own path: what was
    # not compared, and why.
    loader_note: str | None = None
    # The real loader was killed by a signal (SIGSEGV, SIGBUS on a malformed object): what
    # that says. Nothing is compared then: a crash is the file's, not the model's.
    crash: str | None = None
    # Loaded CUDA stubs and compat drivers: they load, but a program cannot use them.
    cuda: tuple[CudaNote, ...] = ()

    @property
    def unusable(self) -> tuple[CudaNote, ...]:
        """The loaded CUDA files a program could not use (a stub, a compat driver too old)."""
        return tuple(n for n in self.cuda if not n.file.usable)

    @property
    def missing(self) -> tuple[str, ...]:
        return self.trace.missing

    @property
    def version_errors(self) -> tuple[str, ...]:
        """Version checks a real start would stop at (the trace only reports them)."""
        return tuple(v for v in self.trace.versions
                     if ": version `" in v and "no version information" not in v)

    @property
    def loads(self) -> bool:
        return not self.trace.missing and self.trace.error is None \
            and self.trace.signal is None and not self.version_errors


def check_file(path: str, options: Options,
               cuda: HostDriver = NO_HOST_DRIVER) -> CheckResult:
    """Run the trusted loader in trace mode on ``path`` (never ``path`` itself, nor the
    interpreter it names) and compare the model's load with it. Loaded CUDA stubs and
    compat drivers are named (``cuda``: the host's driver)."""
    info = elf.read_elf(path)
    trusted = trusted_for(info, options.loader)
    interp = trusted.path
    named = by_path(path)
    if not info.has_dynamic:
        # Nothing for a loader to do; ld.so, asked anyway, can crash on such a file.
        static = trace.Trace(path, (), None, 0, static=True)
        return CheckResult(path, interp, static, (), (), trusted.note)
    _refuse_audit(info)
    # The model first: it finds, without blocking, a FIFO the real loader would wait on.
    model = loader_for(info, options).resolve(named, info=info)
    _refuse_blocking(model)
    real = trace.run_trace(interp, opened_path(named, info), library_path=options.library_path,
                           inhibit_cache=options.inhibit_cache, cwd=options.cwd)
    notes = _notes(real.missing, info, options) if real.missing else ()
    if real.signal is not None:
        return CheckResult(path, interp, real, (), notes, trusted.note,
                           crash=_crash_words(real.signal, model.error))
    model, compared, loader_note = _without_the_loader_run(model, real, interp, info.interp)
    return CheckResult(path, interp, real, conformance.compare(model, compared), notes,
                       trusted.note, loader_note,
                       cuda=notes_for(((o.name, o.path) for o in real.objects), cuda))


def by_path(path: str) -> str:
    """``path`` as the loader is given it: a name without a slash is the file in the
    working directory, ``./NAME``. The loader would search for a library of that name
    (elf/rtld.c, _dl_map_object), and take ``$ORIGIN`` from the name it is given."""
    return path if "/" in path else f"./{path}"


def _crash_words(signum: int, model_error: str | None) -> str:
    """What a crash of the real loader says about the file (a start crashes too)."""
    words = (f"the real loader was killed by {signal_name(signum)} loading it: a start of "
             "this program would stop there too")
    if model_error is not None:
        return f"{words}; the model stops the load before: {model_error}"
    return (f"{words}; an object it loads is malformed in a part the model does not read "
            "(the model expected a clean load)")


def _without_the_loader_run(model: Resolution, real: trace.Trace, run: str,
                            interp: str | None
                            ) -> tuple[Resolution, trace.Trace, str | None]:
    """Both loads less the loader itself, when the loader run lists itself under the
    program's PT_INTERP rather than the path it was run at (a multiarch path of the same
    file, or a PT_INTERP set aside): a real start names it as PT_INTERP does, so the entry
    says how the loader was started, not how it searches."""
    here = os.path.realpath(run)

    def itself(path: str | None) -> bool:
        return path is not None and os.path.realpath(path) == here

    if not any(o.path is not None and o.name != o.path and itself(o.path)
               for o in real.objects):
        return model, real, None
    model = dataclasses.replace(
        model, libraries=tuple(lib for lib in model.libraries if not itself(lib.path)))
    real = dataclasses.replace(
        real, objects=tuple(o for o in real.objects if not itself(o.path)))
    if interp is not None and os.path.isabs(interp) and itself(interp):
        return model, real, (f"PT_INTERP {interp} is the same file as {run}, which was run "
                             f"and lists itself as {interp} => {run}; that entry is not "
                             "compared")
    return model, real, (f"the loader run, {run}, lists itself under PT_INTERP; that entry "
                         "is not compared")


def _refuse_blocking(model: Resolution) -> None:
    if model.blocked is not None:
        raise BadInputError(f"{model.blocked}: not a regular file where the loader searches; "
                            "the real loader would block on it, so it is not run")


def _refuse_audit(info: elf.ElfInfo) -> None:
    """A program's DT_AUDIT/DT_DEPAUDIT names libraries the loader loads and calls into even
    in trace mode (rtld.c, load_audit_modules): running the loader would run them."""
    if info.has_audit:
        raise BadInputError(f"{info.path}: names an audit library (DT_AUDIT/DT_DEPAUDIT), "
                            "which the real loader would run; not traced (use resolve)")


def _notes(missing: Sequence[str], info: elf.ElfInfo, options: Options) -> tuple[Note, ...]:
    interp = interp_for(info, options.loader)
    cache = cache_of(options.root, interp)
    if cache is None:
        return ()
    profile = profile_of(interp)
    listed = {e.soname for e in cache.entries}
    out = []
    for name in missing:
        hit = profile.lookup(cache, name)
        if hit is not None and options.inhibit_cache:
            out.append(Note(name, f"only /etc/ld.so.cache reaches it ({hit}); a test that "
                                  "does not use this machine's cache will not find it"))
            continue
        if name in listed:
            continue
        for directory in ldconfig.conf_dirs(options.root):
            candidate = os.path.join(directory, name)
            if os.path.exists(candidate):
                out.append(Note(name, f"ldconfig is stale: {candidate} exists in an ld.so.conf "
                                      "directory but the cache has no entry (run ldconfig)"))
                break
    return tuple(out)


@dataclass(frozen=True)
class MatrixRow:
    label: str
    dirs: tuple[str, ...]
    missing: tuple[str, ...]
    error: str | None
    # Loaded CUDA files a program could not use: such a row does not load everything.
    unusable: tuple[CudaNote, ...] = ()


@dataclass(frozen=True)
class Matrix:
    file: str
    rows: tuple[MatrixRow, ...]
    smallest: tuple[str, ...] | None   # None: even all directories together do not suffice


def matrix(path: str, dirs: Sequence[str], options: Options,
           cuda: HostDriver = NO_HOST_DRIVER) -> Matrix:
    """Which of ``dirs`` are needed: the real loader with none, each alone, all, then the
    smallest set that loads everything (appended to the given library path). A set that
    loads a CUDA stub or a compat driver the host (``cuda``) cannot use does not count."""
    info = elf.read_elf(path)
    interp = trusted_for(info, options.loader).path
    _refuse_audit(info)
    named = by_path(path)
    base = Given.of_value(options.library_path)
    everything = base.adding(dirs).ld_library_path or None
    _refuse_blocking(loader_for(info, dataclasses.replace(options, library_path=everything))
                     .resolve(named, info=info))

    def run(chosen: Sequence[str]) -> trace.Trace:
        value = base.adding(chosen).ld_library_path or None
        return trace.run_trace(interp, opened_path(named, info), library_path=value,
                               inhibit_cache=options.inhibit_cache, cwd=options.cwd)

    def row(label: str, chosen: Sequence[str]) -> MatrixRow:
        result = run(chosen)
        notes = notes_for(((o.name, o.path) for o in result.objects), cuda)
        return MatrixRow(label, tuple(chosen), result.missing, result.error,
                         tuple(n for n in notes if not n.file.usable))

    rows = [row("no dirs", [])]
    rows += [row(f"{d} only", [d]) for d in dirs]
    rows.append(row("all", list(dirs)))
    smallest: tuple[str, ...] | None = None
    whole = rows[-1]
    if _ok(whole) or (whole.unusable and not whole.missing and whole.error is None):
        # All together may load a stub first where fewer directories load the host's.
        smallest = _smallest(list(dirs), lambda chosen: _ok(row("", chosen)), _ok(whole))
    return Matrix(path, tuple(rows), smallest)


def _ok(row: MatrixRow) -> bool:
    return not row.missing and row.error is None and not row.unusable


def _smallest(dirs: list[str], loads: Callable[[Sequence[str]], bool],
              all_load: bool = True) -> tuple[str, ...] | None:
    """The fewest directories that load everything (in the given order); exact for a
    dozen directories, greedy removal beyond that (only from a set that loads: None when
    all of them together do not, ``all_load`` false)."""
    if len(dirs) <= _MAX_EXACT_SUBSETS:
        for size in range(len(dirs) + 1):
            for chosen in itertools.combinations(dirs, size):
                if loads(chosen):
                    return tuple(chosen)
        return None
    if not all_load:
        return None
    chosen_list = list(dirs)
    for d in list(dirs):
        trial = [x for x in chosen_list if x != d]
        if loads(trial):
            chosen_list = trial
    return tuple(chosen_list)
