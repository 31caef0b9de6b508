"""Repair and explain Bazel test environments that fail at load time."""

__version__ = "0.1.0"
