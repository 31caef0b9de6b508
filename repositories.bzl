"""What bazel-ldfix's targets need, for WORKSPACE users (Bazel 4.2.3 and later, offline).

    load("@bazel_ldfix//:repositories.bzl", "bazel_ldfix_dependencies")
    bazel_ldfix_dependencies()

declares, unless the WORKSPACE already has them:

- `@bazel_ldfix_pip`: the Python packages the tool runs with (click, pyelftools,
  bazel-runfiles), taken from an installed Python's site-packages. Nothing is downloaded. The Python is
  `$BAZEL_LDFIX_PYTHON` if set, else the `python` argument, else `python3` on PATH; its
  `importlib.metadata` says where each distribution's files are, and those files are linked
  into the repository as one `py_library` per distribution, at the same labels rules_python's
  `pip.parse` hub gives (`@bazel_ldfix_pip//click`, `@bazel_ldfix_pip//bazel_runfiles`), so
  that BUILD.bazel reads the same under WORKSPACE and bzlmod. A version other than the one
  requirements_lock.txt pins is used, with a warning: offline, it is all there is.
- `@rules_python`, when the WORKSPACE has none: `python/defs.bzl` forwarding `py_binary`,
  `py_library` and `py_test` to the rules built into Bazel (no package of rules_python exists
  to install offline; with a real rules_python declared before this call, that one is used).
"""

PACKAGES = ["bazel-runfiles", "click", "pyelftools"]

# Prints {distribution: {"version", "base", "top"}} for the distributions named on the
# command line: where the installed files are, and which top-level names they provide.
_FIND = """
import importlib.metadata as md, json, sys
out = {}
for name in sys.argv[1:]:
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        out[name] = None
        continue
    tops = set()
    for f in dist.files or ():
        first = f.parts[0]
        if len(f.parts) == 1 and f.suffix == ".py":
            tops.add(first)
        elif len(f.parts) > 1 and not first.endswith((".dist-info", ".egg-info", ".data")) \
                and first not in ("..", "__pycache__", "bin"):
            tops.add(first)
    out[name] = {"version": dist.version, "base": str(dist.locate_file("")),
                 "top": sorted(tops)}
print(json.dumps(out))
"""

def _normalize(name):
    # PEP 503 names as rules_python's hub spells them: lower case, runs of -_. become _.
    return name.lower().replace("-", "_").replace(".", "_")

def _pinned(text):
    """{normalized name: version} of the `name==version` lines of a requirements lock."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if "==" in line and not line.startswith("#"):
            name, _, rest = line.partition("==")
            out[_normalize(name.strip())] = rest.split(" ")[0].split(";")[0].strip()
    return out

def _installed_python_packages_impl(rctx):
    python = rctx.os.environ.get("BAZEL_LDFIX_PYTHON") or rctx.attr.python
    if "/" not in python:
        found = rctx.which(python)
        if not found:
            fail("bazel_ldfix_dependencies: no `%s` on PATH; set BAZEL_LDFIX_PYTHON or " % python +
                 "pass python = \"/path/to/python3\"")
        python = str(found)
    # -E: PYTHONPATH and the like do not decide; the user's site-packages still count.
    result = rctx.execute([python, "-E", "-c", _FIND] + rctx.attr.packages)
    if result.return_code != 0:
        fail("bazel_ldfix_dependencies: %s failed (exit code %d):\n%s" %
             (python, result.return_code, result.stderr))
    found = json.decode(result.stdout)
    missing = [name for name in rctx.attr.packages if found[name] == None]
    if missing:
        fail("bazel_ldfix_dependencies: %s has no %s installed (pip install %s), or set " % (
            python,
            ", ".join(missing),
            " ".join(missing),
        ) + "BAZEL_LDFIX_PYTHON to a Python that has")
    pinned = _pinned(rctx.read(rctx.attr.lock))
    for name in rctx.attr.packages:
        want = pinned.get(_normalize(name))
        if want and want != found[name]["version"]:
            # Offline, what is installed is all there is: say so, and go on.
            print("bazel_ldfix_dependencies: %s has %s %s; requirements_lock.txt pins %s" % (
                python,
                name,
                found[name]["version"],
                want,
            ))
    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)
    rctx.file("BUILD.bazel", "# Found in %s\n" % python)
    for name in rctx.attr.packages:
        info = found[name]
        package = _normalize(name)
        for top in info["top"]:
            rctx.symlink(info["base"] + "/" + top, package + "/site/" + top)
        rctx.file(package + "/BUILD.bazel", """\
# {name} {version}, installed in {base}
load("@rules_python//python:defs.bzl", "py_library")

package(default_visibility = ["//visibility:public"])

py_library(
    name = "{package}",
    srcs = glob(["site/**/*.py"], allow_empty = True),
    data = glob(["site/**"], exclude = ["site/**/*.py", "site/**/__pycache__/**"], allow_empty = True),
    imports = ["site"],
)

# The name rules_python's hub also gives it.
alias(name = "pkg", actual = ":{package}")
""".format(name = name, version = info["version"], base = info["base"], package = package))

installed_python_packages = repository_rule(
    implementation = _installed_python_packages_impl,
    attrs = {
        "lock": attr.label(default = Label("//:requirements_lock.txt"), allow_single_file = True),
        "packages": attr.string_list(mandatory = True),
        "python": attr.string(default = "python3"),
    },
    environ = ["BAZEL_LDFIX_PYTHON", "PATH"],
    local = True,
)

def _native_python_rules_impl(rctx):
    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)
    rctx.file("BUILD.bazel", "")
    rctx.file("python/BUILD.bazel", "exports_files([\"defs.bzl\"])\n")
    rctx.file("python/defs.bzl", """\
\"\"\"The Python rules built into this Bazel, under rules_python's names.\"\"\"

def py_binary(**kwargs):
    native.py_binary(**kwargs)

def py_library(**kwargs):
    native.py_library(**kwargs)

def py_test(**kwargs):
    native.py_test(**kwargs)
""")

_native_python_rules = repository_rule(implementation = _native_python_rules_impl)

def bazel_ldfix_dependencies(python = "python3"):
    """Declares the repositories bazel-ldfix's targets need (see the module docstring).

    Args:
      python: the Python whose installed packages are used, a path or a name on PATH;
        $BAZEL_LDFIX_PYTHON, when set, takes precedence.
    """
    if not native.existing_rule("rules_python"):
        _native_python_rules(name = "rules_python")
    if not native.existing_rule("bazel_ldfix_pip"):
        installed_python_packages(name = "bazel_ldfix_pip", packages = PACKAGES, python = python)
