"""What the diagnosis knows of the failed test of ``fake_bazel``, read from its layout."""

from __future__ import annotations

from diagnose_fixtures import FakeBazel

from bazel_ldfix import elf
from bazel_ldfix.bazel import declaredinputs
from bazel_ldfix.diagnosis.testfacts import TestContext


def context_of(fake: FakeBazel) -> TestContext:
    """The test's context as ``TestContext.build`` reads it, without asking the model."""
    staged = declaredinputs.imports_of(str(fake.executable))
    header = elf.read_elf(str(fake.executable)).header
    return TestContext("//t:app_test", str(fake.executable), header, str(fake.output_base),
                       None, {}, staged.own, staged.other, ())
