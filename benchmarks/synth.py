"""A synthetic Bazel output_base of a chosen size, for the benchmarks.

The shape follows what large monorepos fetch: CUDA-like SDKs (``targets/<arch>/lib`` with an
aarch64 copy of every library, ``lib64`` symlinked to the x86-64 one), pip repositories
(``site-packages`` with extension modules and vendored ``*.libs``), npm repositories (deep,
nested ``node_modules``), some repositories symlinked from elsewhere (as ``local_repository``
and ``new_local_repository`` are), a ``@<repo>.marker`` file per repository, and one symlink
cycle. Only the libraries the benchmark looks for are real ELF files; every other file is
empty, since nothing but its name is ever read.

    python benchmarks/synth.py DIR [--files N] [--repos N]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
from dataclasses import dataclass

X86 = "x86_64-linux"
ARM = "sbsa-linux"
EM_AARCH64 = 183


@dataclass(frozen=True)
class Layout:
    output_base: str
    external: str
    files: int                      # regular files and file symlinks written
    dirs: int
    repos: int
    targets: tuple[str, ...]        # sonames that exist once for x86-64 (plus aarch64 decoys)
    target_dirs: tuple[str, ...]    # where each target's x86-64 copy is, as reached
    linked_dir: str                 # a directory with a linked library and a target beside it
    beside: str                     # the soname beside the linked library


class _Writer:
    def __init__(self) -> None:
        self.files = 0
        self.dirs = 0

    def mkdir(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)
        self.dirs += 1

    def touch(self, path: str) -> None:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        self.files += 1

    def write(self, path: str, data: bytes) -> None:
        with open(path, "wb") as f:
            f.write(data)
        self.files += 1

    def symlink(self, target: str, path: str) -> None:
        os.symlink(target, path)
        self.files += 1


def tiny_elf() -> bytes:
    """A real x86-64 (host) shared object, a few kilobytes."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "libt.so")
        subprocess.run(["cc", "-shared", "-fPIC", "-nostdlib", "-o", out, "-x", "c", "-"],
                       input=b"int f(void){return 1;}", check=True, capture_output=True)
        with open(out, "rb") as f:
            return f.read()


def aarch64_copy(data: bytes) -> bytes:
    """The same bytes with e_machine = AArch64: a copy the host loader skips."""
    return data[:18] + EM_AARCH64.to_bytes(2, "little") + data[20:]


def build(root: str, files: int = 300_000, repos: int = 2_000, seed: int = 5,
          ntargets: int = 10) -> Layout:
    """Write an output_base under ``root`` (which must exist) with about ``files`` files."""
    rng = random.Random(seed)
    w = _Writer()
    ob = os.path.join(root, "output_base")
    ext = os.path.join(ob, "external")
    elsewhere = os.path.join(root, "elsewhere")  # targets of symlinked repositories
    w.mkdir(ext)
    w.mkdir(elsewhere)
    elf = tiny_elf()
    arm = aarch64_copy(elf)

    ncuda = max(ntargets + 1, repos // 20)
    nnpm = repos * 2 // 5
    nmisc = repos // 20
    npip = max(0, repos - ncuda - nnpm - nmisc)
    # Shares of the file budget, close to what a monorepo with CUDA, Python and JS has.
    budget = {"cuda": files * 15 // 100, "npm": files * 55 // 100, "pip": files * 26 // 100,
              "misc": files * 4 // 100}
    kinds = (["cuda"] * ncuda + ["npm"] * nnpm + ["pip"] * npip + ["misc"] * nmisc)
    counts = {"cuda": ncuda, "npm": nnpm, "pip": npip, "misc": nmisc}
    names = []
    for i, kind in enumerate(kinds):
        names.append(f"{kind}_{i:05d}_{rng.choice(['core', 'rt', 'x', 'util', 'sdk'])}")
    order = list(range(len(names)))
    rng.shuffle(order)
    symlinked = set(order[: max(2, len(names) // 10)])  # about 10% are symlinks

    targets = tuple(f"libbench{k}.so.{k + 10}" for k in range(ntargets))
    target_dirs: list[str] = []
    cuda_seen = 0
    cycle_made = False
    linked_dir = beside = ""
    for i, (name, kind) in enumerate(zip(names, kinds, strict=True)):
        if i in symlinked:
            real = os.path.join(elsewhere, name)
            w.mkdir(real)
            w.symlink(real, os.path.join(ext, name))
            reached = os.path.join(ext, name)
        else:
            real = reached = os.path.join(ext, name)
            w.mkdir(real)
        w.touch(os.path.join(ext, f"@{name}.marker"))
        w.touch(os.path.join(real, "WORKSPACE"))
        w.touch(os.path.join(real, "BUILD.bazel"))
        share = budget[kind] // counts[kind]
        n = max(4, int(share * rng.uniform(0.5, 1.5)))
        if kind == "cuda":
            mine = targets[cuda_seen] if cuda_seen < len(targets) else None
            libdir = _cuda(w, rng, real, n, name, mine, elf, arm)
            if mine is not None:
                target_dirs.append(os.path.join(reached, "targets", X86, "lib"))
            elif not linked_dir:
                # The library a test links (libfoo.so) with its versioned file beside it.
                beside = f"libbenchnear.so.{3}"
                w.write(os.path.join(libdir, beside), elf)
                w.symlink(beside, os.path.join(libdir, "libbenchnear.so"))
                linked_dir = os.path.join(reached, "targets", X86, "lib")
            cuda_seen += 1
        elif kind == "npm":
            _npm(w, rng, real, n)
        elif kind == "pip":
            _pip(w, rng, real, n, name)
        else:
            _misc(w, rng, real, n)
        if i in symlinked and not cycle_made:
            # A cycle: a directory inside the repository pointing back at its root.
            w.mkdir(os.path.join(real, "sub"))
            w.symlink("..", os.path.join(real, "sub", "loop"))
            cycle_made = True
    return Layout(ob, ext, w.files, w.dirs, len(names), targets, tuple(target_dirs),
                  linked_dir, beside)


def _cuda(w: _Writer, rng: random.Random, root: str, n: int, name: str, target: str | None,
          elf: bytes, arm: bytes) -> str:
    """``targets/{x86_64,sbsa}-linux/lib`` with the same libraries, ``lib64`` -> x86-64."""
    libs = {arch: os.path.join(root, "targets", arch, "lib") for arch in (X86, ARM)}
    for d in libs.values():
        w.mkdir(d)
        w.mkdir(os.path.join(os.path.dirname(d), "include"))
    w.symlink(os.path.join("targets", X86, "lib"), os.path.join(root, "lib64"))
    w.mkdir(os.path.join(root, "bin"))
    w.mkdir(os.path.join(root, "nvvm", "libdevice"))
    stem = name.split("_", 2)[-1]
    per_lib = 4  # libX.so, libX.so.N, libX.so.N.M (per arch), a header
    nlibs = max(1, n // (2 * per_lib + 2))
    for j in range(nlibs):
        lib = f"lib{stem}{j}"
        for arch, d in libs.items():
            w.touch(os.path.join(d, f"{lib}.so.{j % 13}.{j}"))
            w.symlink(f"{lib}.so.{j % 13}.{j}", os.path.join(d, f"{lib}.so.{j % 13}"))
            w.symlink(f"{lib}.so.{j % 13}", os.path.join(d, f"{lib}.so"))
            w.touch(os.path.join(d, f"{lib}_static.a"))
            w.touch(os.path.join(os.path.dirname(d), "include", f"{stem}{j}_{arch[:3]}.h"))
        w.touch(os.path.join(root, "bin", f"tool{j}"))
    if target is not None:
        unversioned = target.rsplit(".so.", 1)[0] + ".so"
        for arch, data in ((X86, elf), (ARM, arm)):
            w.write(os.path.join(libs[arch], target), data)
            w.symlink(target, os.path.join(libs[arch], unversioned))
    return libs[X86]


_NPM_FILES = ("package.json", "README.md", "LICENSE", "index.js", "index.d.ts", "CHANGELOG.md")
_NPM_LIB = ("util.js", "parse.js", "format.js", "types.d.ts", "index.mjs", "map.js.map")


def _npm(w: _Writer, rng: random.Random, root: str, n: int) -> None:
    """Nested node_modules: packages of a few files, some ``lib/``, depth up to eight."""
    nm = os.path.join(root, "node_modules")
    w.mkdir(nm)
    frontier = [(nm, 0)]
    written = 0
    k = 0
    while written < n:
        parent, depth = rng.choice(frontier)
        pkg = os.path.join(parent, f"pkg{k}-{rng.choice(['a', 'b', 'core', 'js'])}")
        k += 1
        w.mkdir(pkg)
        for f in _NPM_FILES[: rng.randint(2, len(_NPM_FILES))]:
            w.touch(os.path.join(pkg, f))
            written += 1
        if rng.random() < 0.5:
            w.mkdir(os.path.join(pkg, "lib"))
            for f in _NPM_LIB[: rng.randint(1, len(_NPM_LIB))]:
                w.touch(os.path.join(pkg, "lib", f))
                written += 1
        if rng.random() < 0.01:  # a prebuilt native addon with its library
            pre = os.path.join(pkg, "prebuilds", "linux-x64")
            w.mkdir(pre)
            w.touch(os.path.join(pre, f"libaddon{k}.so.1"))
            w.touch(os.path.join(pre, "addon.node"))
            written += 2
        if depth < 8 and rng.random() < 0.35:
            inner = os.path.join(pkg, "node_modules")
            w.mkdir(inner)
            frontier.append((inner, depth + 1))


def _pip(w: _Writer, rng: random.Random, root: str, n: int, name: str) -> None:
    """``site-packages/<pkg>``: modules, extension modules, a vendored ``<pkg>.libs``."""
    pkg = name.split("_", 2)[-1] + name.split("_")[1]
    site = os.path.join(root, "site-packages")
    top = os.path.join(site, pkg)
    info = os.path.join(site, f"{pkg}-1.0.dist-info")
    w.mkdir(top)
    w.mkdir(info)
    for f in ("METADATA", "RECORD", "WHEEL", "top_level.txt"):
        w.touch(os.path.join(info, f))
    written = 4
    subdirs = [top]
    while written < n:
        if rng.random() < 0.08:
            d = os.path.join(rng.choice(subdirs), f"sub{len(subdirs)}")
            w.mkdir(d)
            w.touch(os.path.join(d, "__init__.py"))
            subdirs.append(d)
            written += 1
            continue
        d = rng.choice(subdirs)
        r = rng.random()
        if r < 0.06:
            f = f"_ext{written}.cpython-311-x86_64-linux-gnu.so"
        elif r < 0.5:
            f = f"mod{written}.py"
        elif r < 0.9:
            f = f"mod{written}.pyc"
        else:
            f = f"data{written}.json"
        w.touch(os.path.join(d, f))
        written += 1
    if rng.random() < 0.2:
        libs = os.path.join(site, f"{pkg}.libs")
        w.mkdir(libs)
        for j in range(rng.randint(1, 4)):
            w.touch(os.path.join(libs, f"libvendored{j}-{rng.randrange(1 << 32):08x}.so.{j}"))


def _misc(w: _Writer, rng: random.Random, root: str, n: int) -> None:
    """Source-like repositories: BUILD files, headers, sources, some ``lib/`` dirs."""
    dirs = [root]
    for j in range(n):
        if j % 12 == 0:
            d = os.path.join(rng.choice(dirs), rng.choice(["src", "include", "lib", "tools"])
                             + str(j))
            w.mkdir(d)
            dirs.append(d)
        d = rng.choice(dirs)
        w.touch(os.path.join(d, f"f{j}" + rng.choice([".c", ".h", ".bzl", ".txt", ".so.1"])))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--files", type=int, default=300_000)
    parser.add_argument("--repos", type=int, default=2_000)
    args = parser.parse_args(argv)
    os.makedirs(args.dir, exist_ok=True)
    layout = build(args.dir, args.files, args.repos)
    print(layout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
