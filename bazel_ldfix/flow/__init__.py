"""The flows of the commands that run Bazel: the build step and the repair, the run, the
diagnosis after it, the one rerun, and the BUILD fix.

The CLI parses the options and renders the results; what is said to the user on the way
goes through :attr:`Caller.say`.
"""
