"""The model against the real loader: every way a Resolution differs from a Trace.

The real loader is the oracle. ``bazel-ldfix check`` runs both on the same file and reports
each difference as a bug of ours; the tests and tools/sweep.py do the same on purpose-built
and system files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bazel_ldfix.loader.resolution import Resolution
    from bazel_ldfix.loader.trace import Trace


@dataclass(frozen=True)
class Disagreement:
    """One name on which the model and the loader differ."""

    name: str              # the listed name ("" for the load as a whole)
    model: str | None      # what the model chose (a path, or None: not found / not listed)
    loader: str | None     # what the loader printed
    what: str              # one sentence

    def __str__(self) -> str:
        return f"{self.name or '(the load)'}: {self.what}"


def compare(resolution: Resolution, trace: Trace) -> tuple[Disagreement, ...]:
    """Every difference between the model's load of a file and the real loader's.

    When the loader stopped, only the error is compared (it lists nothing then). Otherwise
    the listings are compared name by name (the path of each entry, how many entries carry
    the name) and then in order.
    """
    if trace.signal is not None:
        if resolution.error is not None:
            return ()
        return (Disagreement("", None, None, f"the loader died of signal {trace.signal}; "
                                             "the model expected a clean load"),)
    if trace.error is not None or resolution.error is not None:
        if trace.error == resolution.error:
            return ()
        return (_error_disagreement(resolution.error, trace.error),)

    model = [(lib.name, lib.path) for lib in resolution.libraries]
    real = [(o.name, o.path) for o in trace.objects]
    out = list(_by_name(model, real))
    out += _versions(resolution, trace)
    if not out and model != real:
        at = next(i for i, (m, r) in enumerate(zip(model, real, strict=True)) if m != r)
        out.append(Disagreement(
            real[at][0], model[at][1], real[at][1],
            f"listed in another order: the loader lists {_names(real)}, "
            f"the model {_names(model)}"))
    return tuple(out)


def _error_disagreement(model: str | None, loader: str | None) -> Disagreement:
    name = (loader or model or "").split(": ", 1)[0]
    if loader is None:
        what = f"the model stops the load with {model!r}; the loader loads everything"
    elif model is None:
        what = f"the loader stops the load with {loader!r}; the model does not"
    else:
        what = f"the loader stops with {loader!r}, the model with {model!r}"
    return Disagreement(name, model, loader, what)


def _by_name(model: list[tuple[str, str | None]],
             real: list[tuple[str, str | None]]) -> list[Disagreement]:
    out = []
    names = list(dict.fromkeys([n for n, _ in real] + [n for n, _ in model]))
    for name in names:
        ours = [p for n, p in model if n == name]
        theirs = [p for n, p in real if n == name]
        for mine, loaders in zip(ours, theirs, strict=False):  # counts: below
            if mine != loaders:
                out.append(Disagreement(name, mine, loaders, _path_sentence(mine, loaders)))
        if len(ours) != len(theirs):
            out.append(Disagreement(
                name, ours[-1] if ours else None, theirs[-1] if theirs else None,
                f"the loader lists it {_times(len(theirs))}, the model {_times(len(ours))}"))
    return out


def _path_sentence(model: str | None, loader: str | None) -> str:
    if model is None:
        return f"the loader loads {loader}; the model finds nothing"
    if loader is None:
        return f"the model chooses {model}; the loader finds nothing"
    return f"the loader loads {loader}; the model chooses {model}"


def _times(count: int) -> str:
    return {0: "not at all", 1: "once", 2: "twice"}.get(count, f"{count} times")


def _names(listing: list[tuple[str, str | None]]) -> str:
    return ", ".join(name for name, _ in listing)


def _versions(resolution: Resolution, trace: Trace) -> list[Disagreement]:
    """The version check's reports. The loader names the program by the real path it ran."""
    real_file = os.path.realpath(resolution.file)
    ours = {v.message.replace(f"(required by {resolution.file})", f"(required by {real_file})")
            for v in resolution.versions}
    theirs = set(trace.versions)
    out = [Disagreement(m.split(": ", 1)[0], m, None,
                        f"the model reports {m!r}; the loader does not")
           for m in sorted(ours - theirs)]
    out += [Disagreement(m.split(": ", 1)[0], None, m,
                         f"the loader reports {m!r}; the model does not")
            for m in sorted(theirs - ours)]
    return out
