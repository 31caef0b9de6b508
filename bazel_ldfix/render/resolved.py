"""``resolve`` and ``check`` for people and scripts: the tree of what loads, and the real
loader's answer beside the model's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bazel_ldfix.loader.closure import Unversioned
    from bazel_ldfix.loader.cuda import CudaNote
    from bazel_ldfix.loader.realloader import CheckResult, Matrix
    from bazel_ldfix.loader.resolution import Library, Resolution
from bazel_ldfix.render.common import DIM, JSON_VERSION, RED, RESET, json_text, text_of


def resolution_document(res: Resolution) -> dict[str, Any]:
    return {
        "version": JSON_VERSION,
        "file": res.file,
        "error": res.error,
        "libraries": [
            {"soname": lib.name, "path": lib.path,
             "via": lib.via.value if lib.via else None,
             "needed_by": list(lib.needed_by), "error": lib.error,
             "tried": [] if lib.path else [
                 {"via": s.via.value, "dirs": list(s.dirs), "skipped": s.skipped}
                 for s in lib.steps],
             "rejected": [{"path": r.path, "reason": r.reason} for r in lib.rejected]}
            for lib in res.libraries],
        "missing": list(res.missing),
        "versions": [{"object": v.object, "required_by": v.required_by, "version": v.version,
                      "weak": v.weak, "fatal": v.fatal, "message": v.message}
                     for v in res.versions],
        "notes": list(res.notes),
    }


def resolutions_json(results: Sequence[Resolution]) -> str:
    docs = [resolution_document(r) for r in results]
    return json_text(docs[0] if len(docs) == 1 else docs)


_SYSTEM_VIA = ("ld.so.cache", "default", "interpreter", "vdso")


def resolution_tree(res: Resolution, *, color: bool, verbose: bool = True,
                    unversioned: Mapping[str, Sequence[Unversioned]] | None = None) -> str:
    """A tree like libtree's: under each object, what it needs; each object is expanded
    where it first appears, later references say "see above".

    Without ``verbose``, libraries of the system (found through ld.so.cache or the default
    directories, the interpreter, the vDSO) are folded, as libtree folds them, unless
    something under them is missing. ``unversioned`` says, for a missing name, which
    searched directory holds its unversioned file and where the versioned one is.
    """
    red, dim, reset = (RED, DIM, RESET) if color else ("", "", "")
    children: dict[str, list[Library]] = {}
    unneeded: list[Library] = []
    for lib in res.libraries:
        for requester in lib.needed_by:
            children.setdefault(requester, []).append(lib)
        if not lib.needed_by:
            unneeded.append(lib)
    folded: dict[str, bool] = {}

    def system(lib: Library, trail: frozenset[str] = frozenset()) -> bool:
        if verbose or lib.path is None or lib.via is None or lib.via.value not in _SYSTEM_VIA:
            return False
        if lib.path in folded:
            return folded[lib.path]
        below = [k for k in children.get(lib.path, []) if k.path not in trail]
        folded[lib.path] = all(system(k, trail | {lib.path}) for k in below)
        return folded[lib.path]

    lines = [res.file]
    if res.info.has_dynamic and not res.info.needed:
        lines.append("  (no DT_NEEDED: needs no shared object)")
    elif not res.info.has_dynamic:
        lines.append("  statically linked")
    shown: set[int] = set()
    hidden: set[str] = set()

    def walk(parent: str, prefix: str) -> None:
        kids = []
        for lib in children.get(parent, []):
            if system(lib):
                hidden.add(lib.name)
            else:
                kids.append(lib)
        for i, lib in enumerate(kids):
            last = i == len(kids) - 1
            branch, more = ("└── ", "    ") if last else ("├── ", "│   ")
            if lib.path is None:
                problem = lib.error or "not found"
                lines.append(f"{prefix}{branch}{red}{lib.name} {problem}{reset}")
                for twin in (unversioned or {}).get(lib.name, ()):
                    lines.append(f"{prefix}{more}┊ {twin.dir} holds {twin.file}, whose SONAME "
                                 f"is {twin.soname}; no file there is named {twin.soname}")
                    lines.append(f"{prefix}{more}┊ " + (
                        f"the versioned file is at {twin.versioned}" if twin.versioned else
                        f"no {twin.soname} beside what {twin.file} leads to"))
                lines.extend(f"{prefix}{more}{dim}┊ {text}{reset}" for text in _explain(lib))
                continue
            via = f"[{lib.via.value}]" if lib.via else ""
            again = id(lib) in shown
            shown.add(id(lib))
            lines.append(f"{prefix}{branch}{lib.name} {via} {lib.path}"
                         + (f" {dim}(see above){reset}" if again else ""))
            if not again and lib.path != parent:
                walk(lib.path, prefix + more)

    walk(res.file, "  ")
    for lib in unneeded:
        if system(lib):
            hidden.add(lib.name)
        else:
            lines.append(f"  {dim}{lib.name} [{lib.via.value if lib.via else ''}]{reset}")
    hidden |= {lib.name for lib in res.libraries if system(lib)}
    if hidden:
        lines.append(f"  {dim}{len(hidden)} system librar{'ies' if len(hidden) != 1 else 'y'} "
                     f"not shown ({', '.join(sorted(hidden))}); -v shows them{reset}")
    for v in res.versions:
        colour = red if v.fatal else ""
        lines.append(f"  {colour}{v.message}{reset if colour else ''}"
                     + (" (a real start stops here)" if v.fatal else ""))
    if res.error:
        lines.append(f"{red}the load stops: {res.error}{reset}")
    lines += [f"  note: {note}" for note in res.notes]
    return text_of(lines)


def _explain(lib: Library) -> list[str]:
    """Every search step in order, and why each candidate that exists was passed over."""
    out = ["searched, in this order:"]
    for n, step in enumerate(lib.steps, 1):
        if step.skipped:
            out.append(f"{n}. {step.via.value}: {step.skipped}")
        else:
            dirs = ", ".join(d or "(current directory)" for d in step.dirs)
            out.append(f"{n}. {step.via.value}: {dirs}")
    out += [f"rejected {r.path}: {r.reason}" for r in lib.rejected]
    if lib.needed_by:
        out.append(f"needed by {', '.join(lib.needed_by)}")
    return out


def check_document(result: CheckResult) -> dict[str, Any]:
    return {
        "version": JSON_VERSION,
        "file": result.file,
        "interpreter": result.interp,
        "loads": result.loads,
        "objects": [{"soname": o.name, "path": o.path} for o in result.trace.objects],
        "missing": list(result.missing),
        "error": result.trace.error,
        "versions": list(result.trace.versions),
        "notes": [{"soname": n.soname, "note": n.what} for n in result.notes],
        "interpreter_note": result.interp_note,
        "loader_note": result.loader_note,
        "crash": result.crash,
        "cuda": [_cuda_document(n) for n in result.cuda],
        "disagreements": [{"soname": d.name, "model": d.model, "loader": d.loader,
                           "what": d.what} for d in result.disagreements],
    }


def _cuda_document(note: CudaNote) -> dict[str, Any]:
    return {"soname": note.soname, "path": note.path, "kind": note.file.kind.value,
            "usable": note.file.usable, "what": note.file.reason}


def checks_json(results: Sequence[CheckResult]) -> str:
    docs = [check_document(r) for r in results]
    return json_text(docs[0] if len(docs) == 1 else docs)


def check_text(result: CheckResult, *, color: bool) -> str:
    red, reset = (RED, RESET) if color else ("", "")
    lines = [f"{result.file} (the real loader, {result.interp}):"]
    for obj in result.trace.objects:
        if obj.path is None:
            lines.append(f"  {red}{obj.name} => not found{reset}")
        elif obj.path == obj.name:
            lines.append(f"  {obj.name}")
        else:
            lines.append(f"  {obj.name} => {obj.path}")
    if result.trace.static:
        lines.append("  statically linked")
    if result.trace.error:
        lines.append(f"  {red}error while loading shared libraries: {result.trace.error}{reset}")
    for message in result.trace.versions:
        fatal = message in result.version_errors
        lines.append(f"  {red if fatal else ''}{message}{reset if fatal else ''}"
                     + (" (a real start stops here)" if fatal else ""))
    lines += [f"  note: {n.soname}: {n.what}" for n in result.notes]
    lines += [f"  {red if not n.file.usable else ''}cuda: {n.words}"
              f"{reset if not n.file.usable else ''}" for n in result.cuda]
    if result.interp_note:
        lines.append(f"  note: {result.interp_note}")
    if result.loader_note:
        lines.append(f"  note: {result.loader_note}")
    if result.crash:
        lines.append(f"{red}{result.crash}{reset}")
    elif result.disagreements:
        lines.append(f"{red}the model disagrees with the loader (a bug in bazel-ldfix, please "
                     f"report it):{reset}")
        lines += [f"  {d}" for d in result.disagreements]
    else:
        lines.append("the model agrees with the loader")
    return text_of(lines)


def matrix_text(m: Matrix) -> str:
    width = max(len(r.label) for r in m.rows)
    lines = [f"{m.file}:"]
    for row in m.rows:
        if row.error:
            outcome = f"stops: {row.error}"
        elif row.missing:
            outcome = ", ".join(row.missing) + " missing"
        elif row.unusable:
            outcome = "all loaded, but " + "; ".join(n.words for n in row.unusable)
        else:
            outcome = "all loaded"
        lines.append(f"  {row.label.ljust(width)} -> {outcome}")
    if m.smallest is None:
        lines.append("  no set of these directories loads everything")
    elif not m.smallest:
        lines.append("  smallest set: none needed")
    else:
        lines.append(f"  smallest set: {':'.join(m.smallest)}")
    return text_of(lines)


def matrix_json(matrices: Sequence[Matrix]) -> str:
    docs = [{"version": JSON_VERSION, "file": m.file,
             "rows": [{"label": r.label, "dirs": list(r.dirs), "missing": list(r.missing),
                       "error": r.error,
                       "cuda": [_cuda_document(n) for n in r.unusable]} for r in m.rows],
             "smallest": list(m.smallest) if m.smallest is not None else None}
            for m in matrices]
    return json_text(docs[0] if len(docs) == 1 else docs)
