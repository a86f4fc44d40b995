#!/usr/bin/env python3
"""Build stashd's hostile corpus: real and hostile archive files and the
expect.toml manifest giving each file's expected outcome (docs/hostile.md).

    python3 scripts/hostile-corpus.py DIR

Archives are made with the real tools (zip, 7z, tar, gzip, bzip2, xz, zstd,
lz4); RAR, which has no free writer, is written here (RAR 5.0 format, files
stored); lies and damage are made by editing bytes. Every file is
deterministic: the same DIR content on every run.
"""

import binascii
import io
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile

EPOCH = 1577836800  # 2020-01-01, every mtime


def run(*args, cwd=None):
    subprocess.run(args, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


class Corpus:
    def __init__(self, out):
        self.out = out
        self.entries = []  # manifest entries, in posting order

    def write(self, name, data, **expect):
        """Writes data as DIR/name and records its expectation."""
        path = os.path.join(self.out, name)
        with open(path, "wb") as f:
            f.write(data)
        os.utime(path, (EPOCH, EPOCH))
        self.entries.append(dict(name=name, **expect))

    def manifest(self):
        lines = ["# Expected outcome of every file of this directory (docs/hostile.md).", ""]
        for e in self.entries:
            lines.append("[[file]]")
            for key in ("name", "post_as", "expect", "set", "part", "reason", "format", "flags", "repack_of", "contained_in"):
                if key not in e:
                    continue
                v = e[key]
                if isinstance(v, int):
                    lines.append(f"{key} = {v}")
                elif isinstance(v, list):
                    lines.append(f"{key} = [" + ", ".join(toml_str(x) for x in v) + "]")
                else:
                    lines.append(f"{key} = {toml_str(v)}")
            lines.append("")
        return "\n".join(lines)


def toml_str(s):
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F or 0x200B <= ord(ch) <= 0x206F or ord(ch) == 0xFEFF:
            out.append("\\u%04X" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


# --- content -------------------------------------------------------------


def tree(root, seed, files=4):
    """Writes a small deterministic tree under root/content."""
    base = os.path.join(root, "content")
    os.makedirs(os.path.join(base, "docs"), exist_ok=True)
    names = []
    for i in range(files):
        rel = f"docs/file-{seed}-{i}.txt" if i % 2 else f"data-{seed}-{i}.bin"
        data = (f"stashd hostile corpus {seed}/{i}\n".encode() * (50 + 40 * i))
        if i == files - 1:
            data += bytes((seed * 7 + j * 13) % 251 for j in range(30000))  # big enough to split
        path = os.path.join(base, rel)
        with open(path, "wb") as f:
            f.write(data)
        names.append(rel)
    for dirpath, dirs, fs in os.walk(base):
        for n in dirs + fs:
            os.utime(os.path.join(dirpath, n), (EPOCH, EPOCH))
    os.utime(base, (EPOCH, EPOCH))
    return base, sorted(names)


def read_tree(base, names):
    out = []
    for n in names:
        with open(os.path.join(base, n), "rb") as f:
            out.append((n, f.read()))
    return out


def zip_of(base, names, args=()):
    with tempfile.TemporaryDirectory() as t:
        dst = os.path.join(t, "a.zip")
        run("zip", "-q", "-X", *args, dst, *names, cwd=base)
        return open(dst, "rb").read()


def sevenzip_of(base, names, args=()):
    with tempfile.TemporaryDirectory() as t:
        dst = os.path.join(t, "a.7z")
        run("7z", "a", "-bd", "-y", *args, dst, *names, cwd=base)
        return open(dst, "rb").read()


def sevenzip_volumes(base, names, size):
    with tempfile.TemporaryDirectory() as t:
        dst = os.path.join(t, "a.7z")
        run("7z", "a", "-bd", "-y", f"-v{size}", "-mx=0", dst, *names, cwd=base)
        return [open(os.path.join(t, n), "rb").read() for n in sorted(os.listdir(t))]


def tar_of(base, names, compressor=None):
    tar = subprocess.run(["tar", "--sort=name", "--owner=0", "--group=0", "--numeric-owner",
                          f"--mtime=@{EPOCH}", "-cf", "-", *names], cwd=base, check=True,
                         stdout=subprocess.PIPE).stdout
    if compressor is None:
        return tar
    cmd = {"gz": ["gzip", "-n", "-c"], "bz2": ["bzip2", "-c"], "xz": ["xz", "-c"],
           "zst": ["zstd", "-q", "-c"], "lz4": ["lz4", "-q", "-c"]}[compressor]
    return subprocess.run(cmd, input=tar, check=True, stdout=subprocess.PIPE).stdout


def split(data, n):
    size = (len(data) + n - 1) // n
    return [data[i * size:(i + 1) * size] for i in range(n)]


# --- RAR 5.0, files stored -----------------------------------------------


def vint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def rar_block(typ, flags, fields, data=b""):
    body = vint(typ)
    if data:
        flags |= 0x2
    body += vint(flags)
    if flags & 0x2:
        body += vint(len(data))
    body += fields
    h = vint(len(body)) + body
    return struct.pack("<I", binascii.crc32(h)) + h + data


def rar_volumes(files, n):
    """A RAR5 set of n volumes holding files [(name, data)], data spread evenly."""
    total = sum(len(d) for _, d in files)
    cap = max((total + n - 1) // n, 1)
    vols, cur, room = [], bytearray(), cap

    def start():
        nonlocal cur, room
        cur = bytearray(b"Rar!\x1a\x07\x01\x00")
        flags, fields = 0, b""
        if n > 1:
            flags = 0x1
            if vols:
                flags |= 0x2
                fields = vint(len(vols))
        cur += rar_block(1, 0, vint(flags) + fields)
        room = cap

    def finish(last):
        cur.extend(rar_block(5, 0, vint(0 if last else 1)))
        vols.append(bytes(cur))

    def file_block(name, size, chunk, hflags, crc):
        f = vint(0x2 | 0x4) + vint(size) + vint(0o100644) + struct.pack("<I", EPOCH) + struct.pack("<I", crc)
        f += vint(0) + vint(1) + vint(len(name.encode())) + name.encode()
        return rar_block(2, hflags, f, chunk)

    start()
    for name, data in files:
        rest, first = data, True
        while True:
            if room == 0 and len(vols) < n - 1:
                finish(False)
                start()
            chunk = rest
            if len(vols) < n - 1 and len(chunk) > room:
                chunk = chunk[:room]
            rest = rest[len(chunk):]
            last = not rest
            hflags = (0x8 if not first else 0) | (0x10 if not last else 0)
            crc = binascii.crc32(data if last else chunk)
            cur += file_block(name, len(data), chunk, hflags, crc)
            room -= len(chunk)
            first = False
            if last:
                break
    while len(vols) < n - 1:
        finish(False)
        start()
    finish(True)
    return vols


# --- lies and damage -----------------------------------------------------


def zip_fake_end_in_comment(z):
    """The real end record gets a comment that is a second, empty end record."""
    assert z[-22:-18] == b"PK\x05\x06"
    fake = b"PK\x05\x06" + bytes(18)
    real = z[-22:-2] + struct.pack("<H", len(fake))
    return z[:-22] + real + fake


def zip_rename_local(z):
    """The first local header names another file than the central directory."""
    assert z[:4] == b"PK\x03\x04"
    b = bytearray(z)
    b[30] = ord("X") if b[30] != ord("X") else ord("Y")
    return bytes(b)


def zip_data_past_directory(z):
    """The last central entry's compressed size runs into the directory."""
    end = len(z) - 22
    count, cd = struct.unpack_from("<H", z, end + 10)[0], struct.unpack_from("<I", z, end + 16)[0]
    pos = cd
    for _ in range(count - 1):
        n, e, c = struct.unpack_from("<HHH", z, pos + 28)
        pos += 46 + n + e + c
    b = bytearray(z)
    struct.pack_into("<I", b, pos + 20, 1 << 20)
    return bytes(b)


def zip_overlapping(inner_name, inner_data, outer_name):
    """A stored entry whose data is another entry's local record: both are
    listed from the directory, their bytes overlap (the overlapping-files
    zip bomb's trick)."""
    def local(name, data):
        return struct.pack("<IHHHHHIIIHH", 0x04034B50, 10, 0, 0, 0, 0x21, binascii.crc32(data),
                           len(data), len(data), len(name), 0) + name + data

    def central(name, data, offset):
        return struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 10, 10, 0, 0, 0, 0x21, binascii.crc32(data),
                           len(data), len(data), len(name), 0, 0, 0, 0, 0, offset) + name

    inner = local(inner_name, inner_data)
    body = local(outer_name, inner)
    cd = central(outer_name, inner, 0) + central(inner_name, inner_data, 30 + len(outer_name))
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 2, 2, len(cd), len(body), 0)
    return body + cd + end


def sevenzip_no_header(z):
    """The start header's next header size zeroed, its offset and CRC kept:
    7-Zip refuses it ("Is not archive")."""
    b = bytearray(z[:32])
    struct.pack_into("<Q", b, 20, 0)
    struct.pack_into("<I", b, 8, binascii.crc32(bytes(b[12:32])))
    return bytes(b) + z[32:]


def exe_stub():
    return b"MZ\x90\x00" + b"\x00" * 60 + b"This program cannot be run in DOS mode.\r\n" * 200


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: hostile-corpus.py DIR")
    out = sys.argv[1]
    for tool in ("zip", "7z", "tar", "gzip", "bzip2", "xz", "zstd", "lz4"):
        if shutil.which(tool) is None:
            sys.exit(f"hostile-corpus: {tool} not found (make hostile installs it)")
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    c = Corpus(out)
    work = tempfile.mkdtemp()
    try:
        build(c, work)
    finally:
        shutil.rmtree(work)
    with open(os.path.join(out, "expect.toml"), "w") as f:
        f.write(c.manifest())
    print(f"hostile corpus: {len(c.entries)} files in {out}")


def build(c, work):
    def content(seed, files=4):
        d = os.path.join(work, f"c{seed}")
        os.makedirs(d)
        return tree(d, seed, files)

    # Ordinary archives, one per format: delivered whole.
    base, names = content(1)
    plain_zip = zip_of(base, names)
    c.write("plain.zip", plain_zip, expect="delivered", format="zip")
    c.write("plain.7z", sevenzip_of(base, names), expect="repack", repack_of="plain.zip", format="7z")
    c.write("plain.rar", rar_volumes(read_tree(base, names), 1)[0], expect="repack", repack_of="plain.zip", format="rar")
    for i, comp in enumerate([None, "gz", "bz2", "xz", "zst", "lz4"]):
        b2, n2 = content(10 + i)
        ext = "tar" if comp is None else "tar." + comp
        c.write(f"plain.{ext}", tar_of(b2, n2, comp), expect="delivered", format=ext)

    # Sets: RAR parts, old-style RAR, a 7z byte split, a zip byte split.
    b, n = content(2)
    for i, v in enumerate(rar_volumes(read_tree(b, n), 3)):
        c.write(f"set.part{i + 1}.rar", v, expect="delivered", set="set.rar", part=i + 1, format="rar")
    b, n = content(3)
    for i, v in enumerate(rar_volumes(read_tree(b, n), 3)):
        name = "old.rar" if i == 0 else f"old.r{i - 1:02d}"
        c.write(name, v, expect="delivered", set="old.rar", part=i + 1, format="rar")
    b, n = content(4)
    for i, v in enumerate(sevenzip_volumes(b, n, "20k")):
        c.write(f"split7.7z.{i + 1:03d}", v, expect="delivered", set="split7.7z", part=i + 1, format="7z")
    # A byte-split 7z whose middle volume comes from another upload of the
    # same layout: the header, in the last volume, is the set's own, the
    # data it describes is not, and the files' CRC-32s tell.
    b, n = content(70)
    b2, n2 = content(71)
    own, other = sevenzip_volumes(b, n, "20k"), sevenzip_volumes(b2, n2, "20k")
    assert len(own) == len(other) == 3 and len(own[1]) == len(other[1]), "mixed7: volumes differ in layout"
    for i, v in enumerate([own[0], other[1], own[2]]):
        c.write(f"mixed7.7z.{i + 1:03d}", v, expect="dead_letter", set="mixed7.7z", part=i + 1, reason="CRC-32")
    b, n = content(5)
    for i, v in enumerate(split(zip_of(b, n, ("-0",)), 2)):
        c.write(f"splitzip.zip.{i + 1:03d}", v, expect="delivered", set="splitzip.zip", part=i + 1, format="zip")

    # Formats by magic, whatever the name.
    b, n = content(6)
    c.write("archive-without-extension", zip_of(b, n), expect="delivered", format="zip", flags=["name_lied"])
    b, n = content(7)
    c.write("setup-zip.exe", exe_stub() + zip_of(b, n), expect="delivered", format="zip", flags=["name_lied"])
    b, n = content(8)
    c.write("setup-7z.exe", exe_stub() + sevenzip_of(b, n), expect="delivered", format="7z", flags=["name_lied"])
    b, n = content(58)
    # 7-Zip's self-extractor for Linux: an ELF program, the 7z after it.
    c.write("setup-linux", sevenzip_of(b, n, ("-sfx7zCon.sfx",)), expect="delivered", format="7z", flags=["name_lied"])
    b, n = content(57)
    c.write("zipapp.zip", b"#!/usr/bin/env python3\n" + zip_of(b, n), expect="delivered", format="zip")
    b, n = content(9)
    c.write("payload.bin", tar_of(b, n, "lz4"), expect="delivered", format="tar.lz4", flags=["name_lied"])
    b, n = content(20)
    c.write("liar.zip", rar_volumes(read_tree(b, n), 1)[0], expect="delivered", format="rar", flags=["name_lied"])
    b, n = content(21)
    c.write("liar.tar.gz", sevenzip_of(b, n), expect="delivered", format="7z", flags=["name_lied"])

    # Zero bytes are never archives; a text file is none either.
    for ext in ("zip", "rar", "7z", "tar.gz"):
        c.write(f"empty.{ext}", b"", expect="not_archive")
    c.write("notes.txt", b"not an archive\n", expect="not_archive")

    # A part posted twice, same name and size, one copy damaged (posted
    # first); a truncated copy of another part beside the full one.
    b, n = content(22)
    vols = rar_volumes(read_tree(b, n), 3)
    bad = bytearray(vols[1])
    bad[12] ^= 0xFF  # inside the main header: its CRC fails
    c.write("dup.part1.rar", vols[0], expect="delivered", set="dup.rar", part=1, format="rar")
    c.write("dup.part2.rar~damaged", bytes(bad), post_as="dup.part2.rar", expect="rejected", set="dup.rar", part=2)
    c.write("dup.part2.rar", vols[1], expect="delivered", set="dup.rar", part=2, format="rar")
    c.write("dup.part3.rar~truncated", vols[2][: len(vols[2]) // 2], post_as="dup.part3.rar", expect="rejected", set="dup.rar", part=3)
    c.write("dup.part3.rar", vols[2], expect="delivered", set="dup.rar", part=3, format="rar")

    # Missing volumes: named in the dead letter.
    b, n = content(23)
    vols = rar_volumes(read_tree(b, n), 3)
    c.write("oldmid.rar", vols[0], expect="dead_letter", set="oldmid.rar", part=1, reason="oldmid.r00 missing")
    c.write("oldmid.r01", vols[2], expect="dead_letter", set="oldmid.rar", part=3, reason="oldmid.r00 missing")
    b, n = content(24)
    vols = rar_volumes(read_tree(b, n), 3)
    c.write("oldlast.rar", vols[0], expect="dead_letter", set="oldlast.rar", part=1, reason="oldlast.r01 missing")
    c.write("oldlast.r00", vols[1], expect="dead_letter", set="oldlast.rar", part=2, reason="oldlast.r01 missing")
    b, n = content(25)
    parts = split(zip_of(b, n, ("-0",)), 3)
    c.write("zcut.zip.001", parts[0], expect="dead_letter", set="zcut.zip", part=1, reason="zcut.zip.003 missing")
    c.write("zcut.zip.002", parts[1], expect="dead_letter", set="zcut.zip", part=2, reason="zcut.zip.003 missing")
    b, n = content(26)
    vols = rar_volumes(read_tree(b, n), 3)
    c.write("gap.part1.rar", vols[0], expect="dead_letter", set="gap.rar", part=1, reason="gap.part2.rar missing")
    c.write("gap.part3.rar", vols[2], expect="dead_letter", set="gap.rar", part=3, reason="gap.part2.rar missing")

    # Names that show other than they are.
    for i, name in enumerate(["new\nline.zip", "invoice\u202efdp.zip", "zero\u200bwidth.zip"]):
        b, n = content(30 + i)
        flag = ["name:control", "name:bidi", "name:zero-width"][i]
        c.write(name, zip_of(b, n), expect="delivered", format="zip", flags=[flag])
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for entry in ["readme\u202etxt.exe", "a\u200bb.txt", "../escape.txt"]:
            info = zipfile.ZipInfo(entry, date_time=(2020, 1, 1, 0, 0, 0))
            z.writestr(info, b"hostile entry name\n")
    c.write("entry-names.zip", buf.getvalue(), expect="delivered", format="zip", flags=["entry:bidi", "entry:zero-width", "entry:unsafe"])

    # Zip lies and damage.
    b, n = content(33)
    c.write("fake-end.zip", zip_fake_end_in_comment(zip_of(b, n)), expect="delivered", format="zip", flags=["suspicious"])
    b, n = content(34)
    c.write("local-lies.zip", zip_rename_local(zip_of(b, n)), expect="delivered", format="zip", flags=["suspicious"])
    b, n = content(35)
    c.write("data-past-end.zip", zip_data_past_directory(zip_of(b, n)), expect="dead_letter", reason="data runs past")
    b, n = content(36)
    tgz = tar_of(b, n, "gz")
    c.write("cut.tar.gz", tgz[: len(tgz) * 2 // 3], expect="dead_letter", reason="truncated")
    b, n = content(37)
    tgz = bytearray(tar_of(b, n, "gz"))
    tgz[-8] ^= 0xFF
    c.write("bad-crc.tar.gz", bytes(tgz), expect="dead_letter", reason="tar.gz")

    # What the structure hides, listed and flagged; and a start header that
    # names no header with files behind it.
    b, n = content(50)
    b2, n2 = content(51)
    c.write("two-tars.tar.gz", tar_of(b, n, "gz") + tar_of(b2, n2, "gz"), expect="delivered", format="tar.gz", flags=["suspicious"])
    c.write("overlap.zip", zip_overlapping(b"inner.txt", b"stashd hostile corpus overlap\n" * 20, b"outer.bin"),
            expect="delivered", format="zip", flags=["suspicious"])
    b, n = content(53)
    b2, n2 = content(54)
    c.write("zip-behind.7z", sevenzip_of(b, n) + zip_of(b2, n2), expect="delivered", format="7z", flags=["suspicious"])
    b, n = content(55)
    c.write("no-header.7z", sevenzip_no_header(sevenzip_of(b, n)), expect="dead_letter", reason="names no header")
    # A name that shows an archive's behind a zero-width space: downloaded
    # and judged by its bytes.
    b, n = content(56)
    c.write("shown.zip\u2060", zip_of(b, n), expect="delivered", format="zip", flags=["name:zero-width"])

    # Repacks: the same entries (path, size, CRC) in other bytes.
    b, n = content(40)
    c.write("orig.zip", zip_of(b, n), expect="delivered", format="zip")
    c.write("orig-store.zip", zip_of(b, n, ("-0",)), expect="repack", repack_of="orig.zip", format="zip")
    for i, v in enumerate(sevenzip_volumes(b, n, "25k")):
        c.write(f"orig-split.7z.{i + 1:03d}", v, expect="repack", set="orig-split.7z", part=i + 1, repack_of="orig.zip", format="7z")
    c.write("orig-half.zip", zip_of(b, n[:2]), expect="delivered", format="zip", contained_in="orig.zip")
    # The same bytes again under another name: a duplicate, never delivered twice.
    c.write("plain-again.zip", plain_zip, expect="duplicate")


if __name__ == "__main__":
    main()
