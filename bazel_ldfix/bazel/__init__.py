"""Running Bazel: build events, the test environment it gives, runfiles, the test rules."""
