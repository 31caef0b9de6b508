"""A Bazel workspace of many ``cc_test``s that share a few SDK libraries.

    .venv/bin/python benchmarks/manytests.py DIR [--tests 1000] [--own 50]
        [--header-libraries 0] [--build]

Writes, under ``DIR``:

* ``sdk/`` three SDK directories built with gcc, each imported with ``new_local_repository``
  and a ``cc_import`` of the unversioned file (as SDK BUILD files do): ``libsdka.so.11``
  (which needs ``libsdkb.so.3``), ``libsdkb.so.3`` and ``libsdkc.so.7``;
* ``own/`` one more repository per test with a library of its own (``--own`` of them,
  ``libownN.so.1``);
* ``ws/`` the workspace: packages ``t0``, ``t1``, ... of 100 tests each; every test links
  ``sdka`` and ``sdkb``, every other one also ``sdkc``, and every ``tests // own``-th one
  its own library. Every test fails to load under plain ``bazel test`` (the SONAMEs are
  not staged) and passes with the repair;
* with ``--header-libraries N``, N header-only ``cc_library`` rules more, spread evenly
  over the tests of each package (8 per test for 8,000 over 1,000 tests), each test
  depending on its own: a graph whose analysis costs what a larger project's does.

The workspace has its own output_base (``DIR/output-base``); ``--build`` runs
``bazel build //...`` once (about a minute per 1,000 tests here).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OFFLINE = os.path.join(REPO, "examples", "offline")
PER_PACKAGE = 100
SDKS = (("sdka", "11", ("sdkb",)), ("sdkb", "3", ()), ("sdkc", "7", ()))


def _cc(out: str, *flags: str, src: str) -> None:
    os.makedirs(os.path.dirname(out), exist_ok=True)
    subprocess.run(["cc", "-fPIC", "-Wl,--no-as-needed", *flags, "-o", out, "-x", "c", "-"],
                   input=src.encode(), check=True)


def _library(root: str, name: str, version: str, needs: tuple[tuple[str, str], ...] = ()
             ) -> None:
    """``root/lib/lib<name>.so.<version>`` and the ``lib<name>.so`` link to it."""
    lib = os.path.join(root, "lib")
    real = f"lib{name}.so.{version}"
    flags = ["-shared", f"-Wl,-soname,{real}"]
    for dep_dir, dep in needs:
        flags += ["-L", dep_dir, f"-l:{dep}"]
    _cc(os.path.join(lib, real), *flags, src=f"int {name}_value(void){{return {version};}}")
    link = os.path.join(lib, f"lib{name}.so")
    if not os.path.lexists(link):
        os.symlink(real, link)


def _repository(name: str, path: str, library: str) -> str:
    build = ('package(default_visibility = ["//visibility:public"])\n'
             f'cc_import(name = "{library}", shared_library = "lib/lib{library}.so")\n')
    return (f'new_local_repository(name = "{name}", path = "{path}", '
            f"build_file_content = {json.dumps(build)})\n")


def offline_rc() -> str:
    """The .bazelrc lines that let Bazel 4.2.3 work with no network (as the tests' own
    workspaces do, ``tests/support/bazelws.py``): Debian's rules packages, and this repository's
    stand-ins for rules_cc and remote_coverage_tools."""
    repos = {"rules_java": "/usr/share/bazel/rules/java",
             "platforms": "/usr/share/bazel/tools/platforms",
             "bazel_skylib": "/usr/share/bazel/tools/skylib",
             "rules_cc": f"{OFFLINE}/rules_cc",
             "remote_coverage_tools": f"{OFFLINE}/remote_coverage_tools"}
    lines = []
    for command in ("build", "query", "fetch", "sync"):
        for repo, path in repos.items():
            lines.append(f"{command} --override_repository={repo}={path}")
    return "\n".join(lines) + "\n"


def write(top: str, tests: int = 1000, own: int = 50, header_libraries: int = 0) -> str:
    """Write the SDKs and the workspace; the workspace's directory."""
    sdk = os.path.join(top, "sdk")
    ws = os.path.join(top, "ws")
    workspace = ['workspace(name = "many")\n']
    for name, version, needs in reversed(SDKS):  # dependencies first
        root = os.path.join(sdk, name)
        _library(root, name, version, tuple(
            (os.path.join(sdk, d, "lib"), f"lib{d}.so.{v}")
            for d, v, _ in SDKS if d in needs))
        workspace.append(_repository(name, root, name))
    every = max(1, tests // own) if own else 0
    for n in range(own):
        root = os.path.join(top, "own", f"own{n}")
        _library(root, f"own{n}", "1")
        workspace.append(_repository(f"own{n}", root, f"own{n}"))
    os.makedirs(ws, exist_ok=True)
    with open(os.path.join(ws, "WORKSPACE"), "w") as f:
        f.write("".join(workspace))
    with open(os.path.join(ws, ".bazelrc"), "w") as f:
        f.write(f"startup --output_base={os.path.join(top, 'output-base')}\n"
                "startup --max_idle_secs=3600\n" + offline_rc())
    for package in range(-(-tests // PER_PACKAGE)):
        pkg = os.path.join(ws, f"t{package}")
        os.makedirs(pkg, exist_ok=True)
        rules = []
        for i in range(package * PER_PACKAGE, min(tests, (package + 1) * PER_PACKAGE)):
            deps = ["@sdka//:sdka", "@sdkb//:sdkb"]
            src = "test.c"
            if i % 2:
                deps.append("@sdkc//:sdkc")
                src = "test_c.c"
            if every and i % every == 0 and i // every < own:
                n = i // every
                deps.append(f"@own{n}//:own{n}")
                src = f"test_own{n}.c"
                with open(os.path.join(pkg, src), "w") as f:
                    f.write(f"int sdka_value(void); int own{n}_value(void);\n"
                            f"int main(void){{return sdka_value() == 11 && "
                            f"own{n}_value() == 1 ? 0 : 1;}}\n")
            for h in _headers_of(i, tests, header_libraries):
                with open(os.path.join(pkg, f"h{h}.h"), "w") as f:
                    f.write(f"#define H{h} {h}\n")
                rules.append(f'cc_library(name = "h{h}", hdrs = ["h{h}.h"])\n')
                deps.append(f":h{h}")
            rules.append(f'cc_test(name = "test{i}", srcs = ["{src}"], '
                         f"deps = {json.dumps(deps)})\n")
        with open(os.path.join(pkg, "test.c"), "w") as f:
            f.write("int sdka_value(void);\n"
                    "int main(void){return sdka_value() == 11 ? 0 : 1;}\n")
        with open(os.path.join(pkg, "test_c.c"), "w") as f:
            f.write("int sdka_value(void); int sdkc_value(void);\n"
                    "int main(void){return sdka_value() == 11 && sdkc_value() == 7 ? 0 : 1;}\n")
        with open(os.path.join(pkg, "BUILD"), "w") as f:
            f.write("".join(rules))
    return ws


def _headers_of(test: int, tests: int, libraries: int) -> range:
    """The header-only libraries test number ``test`` depends on: an even share."""
    return range(test * libraries // tests, (test + 1) * libraries // tests)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir")
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--own", type=int, default=50)
    parser.add_argument("--header-libraries", type=int, default=0,
                        help="header-only cc_library rules the tests depend on")
    parser.add_argument("--build", action="store_true", help="bazel build //... once")
    args = parser.parse_args(argv)
    ws = write(os.path.abspath(args.dir), args.tests, args.own, args.header_libraries)
    print(ws)
    if args.build:
        return subprocess.run(["bazel", "build", "//..."], cwd=ws, check=False).returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
