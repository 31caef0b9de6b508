"""The workspace a newcomer starts with: a vendor SDK through ``new_local_repository`` and a
``build_file``, a ``cc_test``, and a ``py_test`` loading a ``cc_binary`` extension with ctypes.

``libvendor.so.3`` needs ``libvendor_core.so.3``; the SDK's BUILD file imports both, by their
unversioned names, as SDK BUILD files do. The tests depend only on ``@vendor//:vendor``.
"""

from __future__ import annotations

from pathlib import Path

from bazelws import Workspace, clean_env, make_workspace, sdk

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
