"""Reading a package: every format the same, hostile archives refused in one line, nothing
written outside the private directory, links followed only inside the package."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
from elfbuild import lib

from bazel_ldfix.errors import BadInputError
from bazel_ldfix.fs import archive
from bazel_ldfix.fs.archive import Format, Limits, LinkProblem

pytestmark = pytest.mark.security


def keep_elf(name: str, head: bytes) -> bool:
    return head.startswith(b"\x7fELF")


def tree(root: Path) -> Path:
    """pkg/lib/libx.so.1 (ELF), pkg/lib/libx.so -> libx.so.1, pkg/README (text)."""
    lib(root / "pkg" / "lib" / "libx.so.1")
    (root / "pkg" / "lib" / "libx.so").symlink_to("libx.so.1")
    (root / "pkg" / "README").write_text("hello\n")
    return root


def tar_of(root: Path, out: Path, mode: str) -> Path:
    with tarfile.open(out, mode) as t:
        t.add(root / "pkg", arcname="pkg")
    return out


def zip_of(root: Path, out: Path) -> Path:
    """A wheel as pip's tools write it: files only, links as the files they lead to."""
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted((root / "pkg").rglob("*")):
            if path.is_file() and not path.is_symlink():
                z.write(path, path.relative_to(root).as_posix())
    return out


@pytest.mark.parametrize(("mode", "fmt"), [
    ("w", Format.TAR), ("w:gz", Format.TAR_GZ), ("w:xz", Format.TAR_XZ),
    ("w:bz2", Format.TAR_BZ2)])
def test_every_tar_format_reads_as_the_directory_does(tmp_path: Path, mode: str,
                                                      fmt: Format) -> None:
    root = tree(tmp_path / "src")
    # The format is read from the bytes: a misleading name changes nothing.
    packed = tar_of(root, tmp_path / "package.zip", mode)
    with archive.opened(str(root), keep_elf) as plain, \
            archive.opened(str(packed), keep_elf) as packed_package:
        assert plain.format is Format.DIRECTORY and packed_package.format is fmt
        for package in (plain, packed_package):
            assert [m.name for m in package.files] == ["pkg/lib/libx.so.1"]
            assert package.regular >= {"pkg/lib/libx.so.1", "pkg/README"}
            assert package.names_of("pkg/lib/libx.so.1") == ("pkg/lib/libx.so.1",
                                                             "pkg/lib/libx.so")
        original = (root / "pkg" / "lib" / "libx.so.1").read_bytes()
        assert Path(packed_package.files[0].path).read_bytes() == original


def test_a_wheel_is_a_zip_and_its_copies_are_private_and_gone_after(tmp_path: Path) -> None:
    root = tree(tmp_path / "src")
    wheel = zip_of(root, tmp_path / "x-1.0-py3-none-linux_x86_64.whl")
    with archive.opened(str(wheel), keep_elf) as package:
        assert package.format is Format.ZIP
        assert [m.name for m in package.files] == ["pkg/lib/libx.so.1"]
        copy = Path(package.files[0].path)
        assert copy.name == "0000000"   # a number, never the member's name
        assert oct(copy.parent.stat().st_mode & 0o777) == "0o700"
        assert oct(copy.stat().st_mode & 0o777) == "0o600"
    assert not copy.exists() and not copy.parent.exists()


def test_a_file_that_is_no_package_is_bad_input(tmp_path: Path) -> None:
    text = tmp_path / "notes.tar.gz"
    text.write_text("not an archive\n")
    with pytest.raises(BadInputError, match="not a directory, a zip or wheel, or a tar"), \
            archive.opened(str(text), keep_elf):
        pass
    with pytest.raises(BadInputError, match="No such file"), \
            archive.opened(str(tmp_path / "gone.whl"), keep_elf):
        pass


def _tar_with(out: Path, members: list[tuple[tarfile.TarInfo, bytes]], mode: str = "w") -> Path:
    with tarfile.open(out, mode) as t:
        for info, data in members:
            info.size = len(data) if info.type == tarfile.REGTYPE else 0
            t.addfile(info, io.BytesIO(data) if info.type == tarfile.REGTYPE else None)
    return out


def _file(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


def _symlink(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    return info


@pytest.mark.parametrize("name", ["../../escaped", "/etc/escaped", "pkg/../../escaped"])
def test_a_member_name_that_leaves_the_package_is_refused_and_nothing_is_written(
        tmp_path: Path, name: str) -> None:
    elf = lib(tmp_path / "libx.so").read_bytes()
    (tmp_path / "a" / "b").mkdir(parents=True)
    packed = _tar_with(tmp_path / "a" / "b" / "evil.tar", [(_file(name), elf)])
    wheel = tmp_path / "a" / "b" / "evil.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(zipfile.ZipInfo(name), elf)
    for path in (packed, wheel):
        with pytest.raises(BadInputError, match=r"leaves the package|absolute name"), \
                archive.opened(str(path), keep_elf):
            pass
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "a" / "escaped").exists()
    assert not Path("/etc/escaped").exists()


def test_a_member_claiming_more_than_the_archive_holds_is_refused_before_reading(
        tmp_path: Path) -> None:
    packed = _tar_with(tmp_path / "huge.tar", [(_file("pkg/libhuge.so"), b"\x7fELF" + b"x" * 60)])
    data = bytearray(packed.read_bytes())
    # The size field of the first header: 11 octal digits and a NUL at offset 124.
    data[124:136] = b"%011o\0" % 3_000_000_000
    data[148:156] = b" " * 8
    data[148:156] = b"%06o\0 " % sum(data[:512])
    packed.write_bytes(bytes(data))
    with pytest.raises(BadInputError, match="claims 3000000000 bytes, more than the "
                                            r"archive's [0-9]+ bytes can hold"), \
            archive.opened(str(packed), keep_elf):
        pass


def test_a_zip_member_claiming_a_huge_size_is_refused_before_reading(tmp_path: Path) -> None:
    wheel = tmp_path / "claims.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("pkg/libx.so", b"\x7fELF" + b"x" * 100)
    data = bytearray(wheel.read_bytes())
    # The central directory's uncompressed size (offset 24 of its entry): 4 GiB - 2.
    central = data.rindex(b"PK\x01\x02")
    data[central + 24:central + 28] = (0xFFFFFFFE).to_bytes(4, "little")
    wheel.write_bytes(bytes(data))
    with pytest.raises(BadInputError, match="claims 4294967294 bytes"), \
            archive.opened(str(wheel), keep_elf):
        pass


def test_a_zip_bomb_is_refused_by_its_ratio(tmp_path: Path) -> None:
    wheel = tmp_path / "bomb.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("pkg/libbomb.so", b"\x7fELF" + bytes(32 << 20))
    assert wheel.stat().st_size < 100_000
    with pytest.raises(BadInputError, match="a zip bomb"), archive.opened(str(wheel), keep_elf):
        pass


def test_a_compressed_tar_bomb_is_refused_by_its_ratio(tmp_path: Path) -> None:
    # One member: its claim alone is more than the ratio lets the archive hold.
    one = _tar_with(tmp_path / "one.tgz", [(_file("pkg/zeros"), bytes(32 << 20))], "w:gz")
    with pytest.raises(BadInputError, match=r"more than the archive's [0-9]+ bytes can hold"), \
            archive.opened(str(one), keep_elf):
        pass
    # Many members, each within it: the decompressed stream is counted as it is read.
    # (Small bounds, so that the test stays small.)
    many = _tar_with(tmp_path / "many.tgz",
                     [(_file(f"pkg/zeros{i}"), bytes(48 << 10)) for i in range(40)], "w:gz")
    limits = Limits(ratio=10, ratio_floor=64 << 10)
    assert many.stat().st_size * 10 < 48 << 10 < limits.ratio_floor
    with pytest.raises(BadInputError, match="more than 10 times its size"), \
            archive.opened(str(many), keep_elf, limits):
        pass


def test_the_member_count_and_the_total_bytes_are_bounded(tmp_path: Path) -> None:
    members = [(_file(f"pkg/f{i}"), b"\x7fELF" + b"x" * 1000) for i in range(5)]
    packed = _tar_with(tmp_path / "many.tar", members)
    with pytest.raises(BadInputError, match="more than 3 members"), \
            archive.opened(str(packed), keep_elf, Limits(members=3)):
        pass
    with pytest.raises(BadInputError, match="more than 3000 bytes of members"), \
            archive.opened(str(packed), keep_elf, Limits(total_bytes=3000)):
        pass
    with archive.opened(str(packed), keep_elf) as package:
        assert len(package.files) == 5


def test_a_member_twice_is_refused(tmp_path: Path) -> None:
    packed = _tar_with(tmp_path / "twice.tar", [(_file("pkg/libx.so"), b"a"),
                                                (_file("pkg/libx.so"), b"b")])
    with pytest.raises(BadInputError, match="appears twice"), \
            archive.opened(str(packed), keep_elf):
        pass


def test_a_truncated_archive_is_one_line_of_bad_input(tmp_path: Path) -> None:
    root = tree(tmp_path / "src")
    packed = tar_of(root, tmp_path / "cut.tar.gz", "w:gz")
    packed.write_bytes(packed.read_bytes()[:200])
    with pytest.raises(BadInputError, match=r"corrupt tar\.gz archive"), \
            archive.opened(str(packed), keep_elf):
        pass


def test_links_are_followed_only_inside_the_package(tmp_path: Path) -> None:
    elf = lib(tmp_path / "libx.so").read_bytes()
    packed = _tar_with(tmp_path / "links.tar", [
        (_file("pkg/lib/libx.so.1"), elf),
        (_symlink("pkg/lib/libx.so", "libx.so.1"), b""),
        (_symlink("pkg/up", "lib/../lib/libx.so"), b""),           # inside, by ..
        (_symlink("pkg/lib/libout.so", "../../../etc/passwd"), b""),
        (_symlink("pkg/lib/libabs.so", "/usr/lib/libx.so.1"), b""),
        (_symlink("pkg/loop/a", "b"), b""),
        (_symlink("pkg/loop/b", "a"), b""),
        (_symlink("pkg/dangling", "lib/libnone.so"), b""),
        (_symlink("pkg/dir", "lib"), b""),
        (_symlink("pkg/via_dir", "dir/libx.so.1"), b""),
    ])
    with archive.opened(str(packed), keep_elf) as package:
        found = {link.name: (link.resolved, link.problem) for link in package.links}
    assert found == {
        "pkg/lib/libx.so": ("pkg/lib/libx.so.1", None),
        "pkg/up": ("pkg/lib/libx.so.1", None),
        "pkg/lib/libout.so": (None, LinkProblem.OUTSIDE),
        "pkg/lib/libabs.so": (None, LinkProblem.OUTSIDE),
        "pkg/loop/a": (None, LinkProblem.LOOP),
        "pkg/loop/b": (None, LinkProblem.LOOP),
        "pkg/dangling": (None, LinkProblem.DANGLING),
        "pkg/dir": (None, LinkProblem.NOT_A_FILE),
        "pkg/via_dir": ("pkg/lib/libx.so.1", None),
    }


def test_a_directory_packages_links_and_hard_links_alike(tmp_path: Path) -> None:
    root = tree(tmp_path / "src")
    pkg = root / "pkg"
    (pkg / "loop1").symlink_to("loop2")
    (pkg / "loop2").symlink_to("loop1")
    (pkg / "outside").symlink_to(tmp_path / "src")  # absolute: not followed, even back in
    os.link(pkg / "lib" / "libx.so.1", pkg / "hard.so")
    with archive.opened(str(root), keep_elf) as package:
        # One file under two names: the first name met is the file, the other a link.
        [member] = package.files
        assert set(package.names_of(member.name)) >= {"pkg/hard.so", "pkg/lib/libx.so.1"}
        problems = {link.name: link.problem for link in package.links}
    assert problems["pkg/loop1"] is LinkProblem.LOOP
    assert problems["pkg/outside"] is LinkProblem.OUTSIDE
    assert problems["pkg/lib/libx.so"] is None


def test_a_hard_link_in_a_tar_is_the_file_it_links(tmp_path: Path) -> None:
    elf = lib(tmp_path / "libx.so").read_bytes()
    hard = tarfile.TarInfo("pkg/copy.so")
    hard.type = tarfile.LNKTYPE
    hard.linkname = "pkg/libx.so.1"
    packed = _tar_with(tmp_path / "hard.tar", [(_file("pkg/libx.so.1"), elf), (hard, b"")])
    with archive.opened(str(packed), keep_elf) as package:
        assert [m.name for m in package.files] == ["pkg/libx.so.1"]
        assert package.names_of("pkg/libx.so.1") == ("pkg/libx.so.1", "pkg/copy.so")


@pytest.mark.parametrize("mode", ["w", "w:gz", "zip"])
def test_corrupt_archives_raise_only_the_projects_errors(tmp_path: Path, mode: str) -> None:
    import contextlib
    import random

    from bazel_ldfix.errors import LdfixError

    root = tree(tmp_path / "src")
    packed = (zip_of(root, tmp_path / "p.whl") if mode == "zip"
              else tar_of(root, tmp_path / "p.tar", mode))
    original = packed.read_bytes()
    rng = random.Random(mode)
    case = tmp_path / "case"
    for _ in range(60):
        data = bytearray(original)
        for _ in range(rng.randrange(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.2:
            data = data[: rng.randrange(len(data))]
        case.write_bytes(bytes(data))
        with contextlib.suppress(LdfixError), archive.opened(str(case), keep_elf):
            pass   # anything but the project's errors fails the test


def test_an_extended_header_claiming_a_huge_size_is_refused_before_reading(
        tmp_path: Path) -> None:
    """tarfile reads a pax header into memory whole, by the size it claims."""
    packed = tmp_path / "pax.tar"
    with tarfile.open(packed, "w", format=tarfile.PAX_FORMAT) as t:
        info = tarfile.TarInfo("pkg/" + "x" * 200)   # too long for ustar: a pax header
        t.addfile(info, io.BytesIO(b""))
    data = bytearray(packed.read_bytes())
    assert data[156:157] == tarfile.XHDTYPE
    data[124:136] = b"%011o\0" % (1 << 30)
    data[148:156] = b" " * 8
    data[148:156] = b"%06o\0 " % sum(data[:512])
    for mode in ("plain", "gz"):
        path = tmp_path / f"pax.{mode}"
        path.write_bytes(bytes(data) if mode == "plain" else gzip.compress(bytes(data)))
        with pytest.raises(BadInputError, match="an extended header claims 1073741824 bytes"), \
                archive.opened(str(path), keep_elf):
            pass
