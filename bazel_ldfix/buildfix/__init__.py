"""``bazel-ldfix fix``: the hermetic BUILD change, made in the file a person edits.

- ``starlark``: reading BUILD and WORKSPACE text, and editing one attribute in place;
- ``locate``: which file (or which string in WORKSPACE) defines a ``cc_import``;
- ``plan``: what to change for each library a test cannot load, checked before it is
  proposed; ``change``: the changes themselves;
- ``edit``: the new text of each file, and writing it; ``files``: reading and writing a
  file with nothing lost;
- ``analysis``: whether Bazel accepts what was written.

The flow that shows, writes and analyses the change is :mod:`bazel_ldfix.flow.fix`; its
text and JSON are :mod:`bazel_ldfix.render.buildfix`.
"""
