"""One test as the repair reads it: its executable, the programs it can run from its
runfiles, and the shared objects of its runfiles."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from bazel_ldfix import elf
from bazel_ldfix.errors import (
    BadInputError,
)
from bazel_ldfix.fs.memo import Memo
from bazel_ldfix.loader.resolution import Environment, Resolution
from bazel_ldfix.loader.search import LoaderSource
from bazel_ldfix.repair import fallback, loadalike
from bazel_ldfix.repair.fallback import Skipped
from bazel_ldfix.repair.results import TestInput
from bazel_ldfix.repair.runfilesobjects import (
    PER_FILE_ERRORS,
    manifest_libraries,
    runfiles_libraries,
    runfiles_programs,
    test_cwd,
    tree_listing,
)


@dataclass(frozen=True)
class Subject:
    """One test: its executable (when it is ELF), the programs of its runfiles, and the
    shared objects in its runfiles."""

    label: str
    executable: str
    info: elf.ElfInfo | None
    extras: tuple[str, ...]
    cwd: str
    skipped: tuple[Skipped, ...] = ()
    notes: tuple[str, ...] = ()
    host: elf.ElfHeader | None = None   # what a script runs as (this machine's programs)
    # The twins' digest of the tree's MANIFEST (loadalike.manifest_digest), taken from the
    # read that listed the tree; None: read it when it is asked for.
    digest: bytes | None = field(default=None, repr=False, compare=False)
    # The ELF programs of the runfiles the test can start (a cc_binary in its data), each
    # a load of its own (inventory.runfiles_programs).
    programs: tuple[str, ...] = ()

    @classmethod
    def of(cls, test: TestInput, host: elf.ElfHeader, memo: Memo | None = None, *,
           from_manifest: bool = True) -> Subject:
        """The test's executable and runfiles. The tree is listed from its ``MANIFEST``
        where that is exactly what a walk finds (:func:`runfiles.tree_listing`), else
        walked; ``from_manifest=False`` always walks it."""
        memo = memo or Memo()
        try:
            info: elf.ElfInfo | None = memo.read_elf(test.executable)
        except BadInputError:
            info = None  # a script (sh_test, py_test): only its runfiles are examined
        tree = test.executable + ".runfiles"
        # A script runs under an interpreter of this machine, which is what would load
        # the libraries of its runfiles.
        expect = info.header if info is not None else host
        notes: tuple[str, ...] = ()
        # A listing shows the tree is a directory (its root is one of those it stats).
        listing = tree_listing(test.executable, memo, read=info is not None) \
            if from_manifest else None
        if listing is None or info is None:
            # A walk of the tree, a manifest read whole, a script's runfiles read one by one:
            # not kept as facts (see Memo.facts).
            memo.opaque()
        digest = None
        programs: list[str] = []
        if listing is not None or os.path.isdir(tree):
            extras, skipped = runfiles_libraries(tree, expect, memo, listing)
            programs = runfiles_programs(tree, test.executable, expect, memo, listing)
            if listing is not None:
                digest = loadalike.manifest_digest(listing.manifest, test.executable, memo)
        else:
            # No tree (--nobuild_runfile_links, as --remote_download_minimal sets): the
            # manifest names what the test stages.
            extras, skipped, absent = manifest_libraries(test.executable, expect, memo)
            notes = tuple(f"{test.label}: cannot read {path}: not on disk (a remote cache "
                          "that did not download it?)" for path in absent)
        return cls(test.label, test.executable, info, tuple(sorted(extras)),
                   test_cwd(test, tree, listing), tuple(skipped), notes, host, digest,
                   tuple(programs))

    def resolve(self, loaders: LoaderSource,
                library_path: str | None, *, extras: bool) -> list[Resolution | Skipped]:
        """The model's load of the executable (with the runfiles' objects as if dlopen()ed),
        or of each runfiles object for a script; then the load of each program of the
        runfiles, as the process the test starts (it inherits the test's environment and
        working directory). A file the model fails on is skipped."""
        out = self._resolve_own(loaders, library_path, extras=extras)
        out += [self._resolve_alone(path, loaders, library_path) for path in self.programs]
        return out

    def _resolve_own(self, loaders: LoaderSource,
                     library_path: str | None, *, extras: bool) -> list[Resolution | Skipped]:
        if self.info is not None:
            info = self.info
            try:
                env = Environment(library_path, self.cwd, loaders.cache_for(info))
                loader = loaders.make_loader(info, env)
            except PER_FILE_ERRORS as exc:
                return [fallback.no_loader(self.executable, exc)]
            try:
                return [loader.resolve(self.executable, self.extras if extras else (),
                                       info=info)]
            except PER_FILE_ERRORS as exc:
                if not (extras and self.extras):
                    return [fallback.from_error(self.executable, exc)]
            # One of the extras defeats the model: take them one at a time.
            out: list[Resolution | Skipped] = [*self._resolve_own(
                loaders, library_path, extras=False)]
            for path in self.extras:
                try:
                    out.append(loaders.make_loader(info, env).resolve(self.executable, (path,),
                                                              info=info))
                except PER_FILE_ERRORS as exc:
                    out.append(fallback.from_error(path, exc))
            return out
        return [self._resolve_alone(path, loaders, library_path) for path in self.extras]

    def _resolve_alone(self, path: str, loaders: LoaderSource,
                       library_path: str | None) -> Resolution | Skipped:
        """The load of one file of the runfiles on its own: a program as its process
        would start, or a script's shared object as if its interpreter opened it."""
        try:
            info = elf.read_elf(path)
        except PER_FILE_ERRORS as exc:
            return fallback.from_error(path, exc)
        try:
            env = Environment(library_path, self.cwd, loaders.cache_for(info))
            loader = loaders.make_loader(info, env)
        except PER_FILE_ERRORS as exc:
            return fallback.no_loader(path, exc)
        try:
            return loader.resolve(path, info=info)
        except PER_FILE_ERRORS as exc:
            return fallback.from_error(path, exc)
