"""Test logs read for glibc's messages, explained, with the fixes."""
