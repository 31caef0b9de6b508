"""Linkage gates: what a file really is, what it imports and defines, and who holds state.

``kinds`` decides a file's kind from its bytes with the fast reader (``elf.py``); ``symbols``,
``gate`` and ``dupes`` read symbol tables and relocations with pyelftools, which only they
import, so that the loader commands keep their start-up time.
"""
