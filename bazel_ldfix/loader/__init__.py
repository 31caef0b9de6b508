"""glibc's loader, modelled and asked: search order, cache, trace, conformance."""
