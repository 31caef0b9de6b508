"""The shared "current stream" case, built for real with g++ and ar.

A library keeps the caller's stream in a ``thread_local`` and offers two accessors,
``getCallerStream()`` and a ``CallerStreamGuard`` class. A delegate, loaded with dlopen()
as a backend is, reads the stream through the shared library. The runner sets it:

- ``runner_good`` links ``libextension_cuda.so``, the shared library;
- ``runner_bad`` links the same code from the static archive ``libextension_cuda.a``;
- ``runner_bad_so`` links the static archive renamed ``libextension_cuda.so``, which the
  linker accepts and links as an archive.

Each program prints the address of the runner's and the delegate's stream slot and whether
the delegate saw the runner's stream; it exits 0 when it did.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

HEADER = """
namespace executorch { namespace extension { namespace cuda {
using Stream = void*;
Stream getCallerStream();
class CallerStreamGuard {
 public:
  explicit CallerStreamGuard(Stream s);
  ~CallerStreamGuard();
 private:
  Stream previous_;
};
const void* currentStreamSlot();
}}}
"""
LIBRARY = """
#include "stream.h"
namespace executorch { namespace extension { namespace cuda {
thread_local Stream current_stream = nullptr;
Stream getCallerStream() { return current_stream; }
CallerStreamGuard::CallerStreamGuard(Stream s) : previous_(current_stream) {
  current_stream = s;
}
CallerStreamGuard::~CallerStreamGuard() { current_stream = previous_; }
const void* currentStreamSlot() { return &current_stream; }
}}}
"""
DELEGATE = """
#include "stream.h"
extern "C" void* delegate_run() { return executorch::extension::cuda::getCallerStream(); }
extern "C" const void* delegate_slot() {
  return executorch::extension::cuda::currentStreamSlot();
}
"""
RUNNER = """
#include <cstdio>
#include <dlfcn.h>
#include "stream.h"
namespace cuda = executorch::extension::cuda;
int main(int argc, char** argv) {
  if (argc != 2) return 2;
  void* delegate = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!delegate) { std::fprintf(stderr, "%s\\n", dlerror()); return 2; }
  auto run = reinterpret_cast<void* (*)()>(dlsym(delegate, "delegate_run"));
  auto slot = reinterpret_cast<const void* (*)()>(dlsym(delegate, "delegate_slot"));
  int token;
  cuda::CallerStreamGuard guard(&token);
  bool runner_sees = cuda::getCallerStream() == &token;
  bool delegate_sees = run() == &token;
  std::printf("runner slot %p\\ndelegate slot %p\\n", cuda::currentStreamSlot(), slot());
  std::printf("runner sees its stream: %s\\ndelegate sees the runner's stream: %s\\n",
              runner_sees ? "yes" : "no", delegate_sees ? "yes" : "no");
  return delegate_sees ? 0 : 1;
}
"""


@dataclass(frozen=True)
class StreamCase:
    lib: Path             # lib/libextension_cuda.so
    delegate: Path        # lib/libdelegate.so
    archive: Path         # static/libextension_cuda.a
    renamed: Path         # renamed/libextension_cuda.so (the archive)
    good: Path
    bad: Path
    bad_so: Path

    def run(self, program: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(program), str(self.delegate)], capture_output=True,
                              text=True, timeout=60)


def gxx(*args: str | Path, cwd: Path) -> None:
    subprocess.run(["g++", *map(str, args)], check=True, capture_output=True, cwd=cwd)


def build(d: Path) -> StreamCase:
    for name, text in (("stream.h", HEADER), ("stream.cc", LIBRARY),
                       ("delegate.cc", DELEGATE), ("runner.cc", RUNNER)):
        (d / name).write_text(text)
    for sub in ("lib", "static", "renamed"):
        (d / sub).mkdir()
    gxx("-fPIC", "-shared", "-Wl,-soname,libextension_cuda.so", "stream.cc",
        "-o", "lib/libextension_cuda.so", cwd=d)
    gxx("-fPIC", "-shared", "-Wl,-soname,libdelegate.so", "delegate.cc", "-Llib",
        "-lextension_cuda", "-Wl,-rpath,$ORIGIN", "-o", "lib/libdelegate.so", cwd=d)
    gxx("-fPIC", "-c", "stream.cc", "-o", "stream.o", cwd=d)
    subprocess.run(["ar", "rcs", "static/libextension_cuda.a", "stream.o"], check=True,
                   cwd=d, capture_output=True)
    shutil.copy(d / "static/libextension_cuda.a", d / "renamed/libextension_cuda.so")
    gxx("runner.cc", "-Llib", "-lextension_cuda", "-Wl,-rpath,$ORIGIN/lib", "-o",
        "runner_good", cwd=d)
    gxx("runner.cc", "static/libextension_cuda.a", "-Wl,-rpath,$ORIGIN/lib", "-o",
        "runner_bad", cwd=d)
    # The renamed archive, found by -l as a build finds a prebuilt library.
    gxx("runner.cc", "-Lrenamed", "-lextension_cuda", "-Wl,-rpath,$ORIGIN/lib", "-o",
        "runner_bad_so", cwd=d)
    return StreamCase(d / "lib/libextension_cuda.so", d / "lib/libdelegate.so",
                      d / "static/libextension_cuda.a", d / "renamed/libextension_cuda.so",
                      d / "runner_good", d / "runner_bad", d / "runner_bad_so")


def stripped(program: Path) -> Path:
    out = program.with_name(program.name + ".stripped")
    subprocess.run(["strip", "-o", str(out), str(program)], check=True, capture_output=True)
    return out


# An extension module (as Python loads one) that reads the stream slot, and a loader that
# opens an extension and then the library the way an interpreter does, each RTLD_LOCAL,
# and prints both slots: one address when they share the library's state, two when not.
EXTENSION = """
#include "stream.h"
extern "C" const void* ext_slot() { return executorch::extension::cuda::currentStreamSlot(); }
"""
LOADER = r"""
#include <dlfcn.h>
#include <stdio.h>
typedef const void* (*slot_fn)(void);
int main(int argc, char** argv) {
  if (argc != 3) return 2;
  void* ext = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!ext) { fprintf(stderr, "%s\n", dlerror()); return 2; }
  void* lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
  slot_fn a = (slot_fn)dlsym(ext, "ext_slot");
  slot_fn b = (slot_fn)dlsym(lib, "_ZN10executorch9extension4cuda17currentStreamSlotEv");
  printf("extension slot %p\nlibrary slot %p\n", a(), b());
  return a() == b() ? 0 : 1;
}
"""


@dataclass(frozen=True)
class Extensions:
    shared: Path          # _ext.so beside lib/, linking libextension_cuda.so ($ORIGIN/lib)
    static: Path          # links libextension_cuda.a: its names exported (default visibility)
    static_stripped: Path
    hidden: Path          # links the archive with --exclude-libs,ALL: its names local
    hidden_stripped: Path
    loader: Path

    def slots(self, extension: Path, library: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.loader), str(extension), str(library)],
                              capture_output=True, text=True, timeout=60)


def extensions(case: StreamCase) -> Extensions:
    d = case.lib.parent.parent
    (d / "ext.cc").write_text(EXTENSION)
    (d / "loader.c").write_text(LOADER)
    for sub in ("ext_static", "ext_hidden"):
        (d / sub).mkdir()
    gxx("-fPIC", "-shared", "-Wl,-soname,_ext.so", "ext.cc", "-Llib", "-lextension_cuda",
        "-Wl,-rpath,$ORIGIN/lib", "-o", "_ext.so", cwd=d)
    gxx("-fPIC", "-shared", "-Wl,-soname,_ext.so", "ext.cc", "static/libextension_cuda.a",
        "-o", "ext_static/_ext.so", cwd=d)
    gxx("-fPIC", "-shared", "-Wl,-soname,_ext.so", "ext.cc", "static/libextension_cuda.a",
        "-Wl,--exclude-libs,ALL", "-o", "ext_hidden/_ext.so", cwd=d)
    subprocess.run(["cc", "loader.c", "-o", "loader", "-ldl"], check=True, cwd=d,
                   capture_output=True)
    return Extensions(d / "_ext.so", d / "ext_static/_ext.so",
                      stripped(d / "ext_static/_ext.so"), d / "ext_hidden/_ext.so",
                      stripped(d / "ext_hidden/_ext.so"), d / "loader")
