"""The workspace a newcomer starts with: a vendor SDK through ``new_local_repository`` and a
``build_file``, a ``cc_test``, and a ``py_test`` loading a ``cc_binary`` extension with ctypes.

``libvendor.so.3`` needs ``libvendor_core.so.3``; the SDK's BUILD file imports both, by their
unversioned names, as SDK BUILD files do. The tests depend only on ``@vendor//:vendor``.
"""

from __future__ import annotations

import json
from pathlib import Path

from bazelws import Workspace, clean_env, make_workspace, sdk
from diagnose_fixtures import versioned_lib
from elfbuild import cc

VENDOR_BUILD = """package(default_visibility = ["//visibility:public"])
cc_import(name = "vendor", shared_library = "lib/libvendor.so")
cc_import(name = "vendor_core", shared_library = "lib/libvendor_core.so")
"""
EXT_TEST = """import ctypes, os
here = os.path.dirname(os.path.abspath(__file__))
ctypes.CDLL(os.path.join(here, "_ext.so"))
"""
VENDOR_TEST = ("int vendor_value(void);\n"
               "int main(void) { return vendor_value() == 3 ? 0 : 1; }\n")


def newcomer_workspace(top: Path) -> Workspace:
    core = sdk(top / "sdks" / "vendor", "vendor_core", "3")
    sdk(top / "sdks" / "vendor", "vendor", "3", needs=[core],
        src="int vendor_core_value(void);\n"
            "int vendor_value(void) { return vendor_core_value(); }\n")
    files = {
        "WORKSPACE": f'new_local_repository(name = "vendor", path = "{top / "sdks" / "vendor"}",'
                     ' build_file = "//third_party:vendor.BUILD")\n',
        "third_party/BUILD": "",
        "third_party/vendor.BUILD": VENDOR_BUILD,
        "app/BUILD": """
cc_test(name = "vendor_test", srcs = ["vendor_test.c"], deps = ["@vendor//:vendor"])
cc_binary(name = "_ext.so", srcs = ["ext.c"], linkshared = True, deps = ["@vendor//:vendor"])
py_test(name = "ext_test", srcs = ["ext_test.py"], data = [":_ext.so"])
cc_test(name = "broken_test", srcs = ["broken.c"])
""",
        "app/vendor_test.c": VENDOR_TEST,
        "app/ext.c": "int vendor_value(void);\nint ext_value(void) { return vendor_value(); }\n",
        "app/ext_test.py": EXT_TEST,
        "app/broken.c": "int main(void) { return 1; }\n",
    }
    return make_workspace(top / "ws", files, env=clean_env())


SDK_TEST = ("int nvx_value(void);\nint tc_value(void);\n"
            "int main(void) { return nvx_value() + tc_value() == 16 ? 0 : 1; }\n")


def toolchain_workspace(top: Path) -> Workspace:
    """A test that loads ``libtc.so.5`` of a toolchain only through the rc file's
    ``--test_env=LD_LIBRARY_PATH=<toolchain>/lib``, and ``libnvx.so.11`` of an SDK that ships
    only its dev file ``lib/libnvx.so``, imported as provided by the system: Bazel stages
    nothing of it, so that SONAME exists nowhere a repair looks (a library staged under
    another name than its SONAME would be given by a link of that name)."""
    toolchain = cc(top / "toolchain" / "lib" / "libtc.so.5", "-shared",
                   "-Wl,-soname,libtc.so.5", src="int tc_value(void){return 5;}")
    nvx = cc(top / "sdks" / "nvx" / "lib" / "libnvx.so", "-shared", "-Wl,-soname,libnvx.so.11",
             src="int nvx_value(void){return 11;}")
    build = ('package(default_visibility = ["//visibility:public"])\n'
             'cc_import(name = "nvx", interface_library = "lib/libnvx.so", '
             'system_provided = 1)\n')
    files = {
        "WORKSPACE": f'new_local_repository(name = "nvx", path = "{nvx.parent.parent}", '
                     f"build_file_content = {json.dumps(build)})\n",
        ".bazelrc": f"test --test_env=LD_LIBRARY_PATH={toolchain.parent}\n",
        "app/BUILD": 'cc_test(name = "sdk_test", srcs = ["sdk_test.c"], deps = ["@nvx//:nvx"], '
                     f'linkopts = ["-L{toolchain.parent}", "-l:libtc.so.5"])\n',
        "app/sdk_test.c": SDK_TEST,
    }
    return make_workspace(top / "ws", files, env=clean_env())


VER_TEST = ("int ver_new(void);\n"
            "int main(void) { return ver_new() == 2 ? 0 : 1; }\n")
SYM_TEST = ("int sym_new(void);\n"
            "int main(void) { return sym_new() == 2 ? 0 : 1; }\n")


def old_copies_workspace(top: Path) -> Workspace:
    """Two SDKs whose newer libraries the tests link, and older copies of both earlier in
    the search path (the rc file's ``--test_env=LD_LIBRARY_PATH=<top>/old``).

    ``libver.so.2`` is built with a version script: the new one defines VER_1 and VER_2
    (``ver_new`` is VER_2's), the old one only VER_1, so the loader stops with "version
    `VER_2' not found". ``libsym.so.1`` has no versions: the old one lacks ``sym_new``, so
    the call stops with "undefined symbol: sym_new".
    """
    src_ver = "int ver_old(void){return 1;}\nint ver_new(void){return 2;}\n"
    versioned_lib(top / "sdks" / "ver" / "lib" / "libver.so.2", "libver.so.2",
                  ["VER_1", "VER_2"], src=src_ver)
    versioned_lib(top / "old" / "libver.so.2", "libver.so.2", ["VER_1"],
                  src="int ver_old(void){return 1;}\nint ver_new(void){return 1;}\n")
    cc(top / "sdks" / "sym" / "lib" / "libsym.so.1", "-shared", "-Wl,-soname,libsym.so.1",
       src="int sym_old(void){return 1;}\nint sym_new(void){return 2;}\n")
    cc(top / "old" / "libsym.so.1", "-shared", "-Wl,-soname,libsym.so.1",
       src="int sym_old(void){return 1;}\n")

    def repository(name: str, soname: str) -> str:
        build = ('package(default_visibility = ["//visibility:public"])\n'
                 f'cc_import(name = "{name}", shared_library = "lib/{soname}")\n')
        return (f'new_local_repository(name = "{name}", path = "{top / "sdks" / name}", '
                f"build_file_content = {json.dumps(build)})\n")

    files = {
        "WORKSPACE": repository("ver", "libver.so.2") + repository("sym", "libsym.so.1"),
        ".bazelrc": f"test --test_env=LD_LIBRARY_PATH={top / 'old'}\n",
        "app/BUILD": 'cc_test(name = "ver_test", srcs = ["ver_test.c"], deps = ["@ver//:ver"])\n'
                     'cc_test(name = "sym_test", srcs = ["sym_test.c"], deps = ["@sym//:sym"])\n',
        "app/ver_test.c": VER_TEST,
        "app/sym_test.c": SYM_TEST,
    }
    return make_workspace(top / "ws", files, env=clean_env())
