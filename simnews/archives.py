"""Archives and par2 files built byte by byte for the tests of an edge node's inspection
(edge.inspect): real ones that no free tool on this machine makes, and hostile ones whose
headers lie.

Real files:

- :func:`rar4_stored`: a RAR 4 archive (the RAR 2.9 format RAR 3 and 4 write) holding files
  stored, uncompressed (method 0x30). Only the non-free ``rar`` makes RAR archives, so this writes
  the blocks itself: the marker, the main archive header, a file header and the data for each
  file, the end of archive block, each header with its CRC16 (the low half of the CRC32 over the
  header from HEAD_TYPE on). 7-Zip's RAR handler and the ``rarfile`` package list and extract what
  it writes.
- :func:`par2_index`: a PAR2 index file (no recovery slices) over files: a main packet, a file
  description and the slice checksums of each file, a creator packet; ``par2 verify`` takes it.

Hostile files (each function returns cases, a file name that says what lies -> the file's
bytes; :func:`yenc_lying_sizes` returns article bodies, its lies being in yEnc's own lines). Each
case aims at a bound a reader of edge.inspect keeps (its docstring names which), so that a test
shows the bound holds: the post is read promptly, the problem counted in the result's
``malformed`` and the good files beside it still read:

- :func:`yenc_lying_sizes`: =ybegin size=, =ypart begin=/end= and =yend size= that lie;
- :func:`par2_huge_lengths`: packet lengths of 2**63, under a header, not a multiple of 4, and
  bodies whose sizes and counts lie;
- :func:`par2_loop`: packets of length 0, repeated packets, packets inside packets, and headers
  every 16 bytes each claiming to run to the end of the file (every claim a rescan);
- :func:`rar_absurd_sizes`: RAR 4 and RAR 5 headers with absurd header, data, unpacked and name
  sizes and variable-length integers that overflow;
- :func:`sevenzip_absurd`: 7z start headers whose next-header offset, size or CRC lie, and
  headers that claim 2**40 files or unpacked bytes;
- :func:`zip_absurd`: a central directory (and ZIP64 end records) with absurd counts, sizes and
  offsets, and local headers whose sizes lie.

Everything is deterministic: the same call gives the same bytes.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import struct
import zlib
from collections.abc import Sequence

from simnews.yencpost import encode_lines

# --- RAR 4 ---------------------------------------------------------------------------------------

RAR4_MARK = b"Rar!\x1a\x07\x00"  # itself a block (type 0x72) of fixed bytes: readers match it whole
RAR5_MARK = b"Rar!\x1a\x07\x01\x00"
_RAR4_MAIN, _RAR4_FILE, _RAR4_END = 0x73, 0x74, 0x7B
_LONG_BLOCK = 0x8000  # a data area (ADD_SIZE, for a file PACK_SIZE) follows the header
_SKIP_IF_UNKNOWN = 0x4000  # what RAR sets on the end block: older versions may skip it
_LARGE = 0x0100  # HIGH_PACK_SIZE and HIGH_UNP_SIZE follow the fixed fields
_UNICODE = 0x0200
_HOST_WIN32 = 2  # what Windows' WinRAR, the posters' usual tool, writes
_ATTR_ARCHIVE = 0x20
_UNP_VER = 29  # RAR 2.9: the format RAR 3.x and 4.x write
_STORED = 0x30
_FILE_FIELDS = struct.Struct("<IIBIIBBHI")  # PACK_SIZE .. ATTR, after the 7-byte block header
# A fixed time: the same files give the same archive (2024-01-01 12:00:00, local time).
MTIME = dt.datetime(2024, 1, 1, 12, 0, 0)


def _dos_time(moment: dt.datetime) -> int:
    """MS-DOS date and time in one 32-bit word (2-second resolution), as RAR 4 stores FTIME."""
    return (
        (moment.year - 1980) << 25
        | moment.month << 21
        | moment.day << 16
        | moment.hour << 11
        | moment.minute << 5
        | moment.second // 2
    )


def _rar4_block(kind: int, flags: int, body: bytes, *, head_size: int | None = None) -> bytes:
    """One block header: HEAD_CRC, HEAD_TYPE, HEAD_FLAGS, HEAD_SIZE, then body. head_size
    overrides HEAD_SIZE (a lie); the CRC still covers the bytes written, so that a reader that
    refuses the block does so by the size, not by the CRC."""
    size = 7 + len(body) if head_size is None else head_size
    header = struct.pack("<BHH", kind, flags, size) + body
    return struct.pack("<H", zlib.crc32(header) & 0xFFFF) + header


def _rar4_name(name: str) -> tuple[bytes, int]:
    """The name as RAR 4 stores it and the flag it needs: Windows separators; a name that is not
    ASCII in UTF-8 under the Unicode flag with no NUL in it (unrar, 7-Zip and rarfile read such a
    name as UTF-8; RAR's own compressed form is not needed to be read right)."""
    windows = name.replace("/", "\\")
    if windows.isascii():
        return windows.encode("ascii"), 0
    return windows.encode("utf-8"), _UNICODE


def _rar4_file(
    name: str,
    data: bytes,
    *,
    flags: int = 0,
    packed: int | None = None,
    unpacked: int | None = None,
    name_size: int | None = None,
    head_size: int | None = None,
) -> bytes:
    """A file header (type 0x74) and its data, stored. packed, unpacked (above 32 bits: the LARGE
    flag and the high halves are written), name_size and head_size override what data and name
    give (lies); the data written is always data."""
    raw_name, name_flag = _rar4_name(name)
    packed = len(data) if packed is None else packed
    unpacked = len(data) if unpacked is None else unpacked
    flags |= _LONG_BLOCK | name_flag
    if packed >= 2**32 or unpacked >= 2**32:
        flags |= _LARGE
    body = _FILE_FIELDS.pack(
        packed & 0xFFFFFFFF,
        unpacked & 0xFFFFFFFF,
        _HOST_WIN32,
        zlib.crc32(data),
        _dos_time(MTIME),
        _UNP_VER,
        _STORED,
        len(raw_name) if name_size is None else name_size,
        _ATTR_ARCHIVE,
    )
    if flags & _LARGE:
        body += struct.pack("<II", packed >> 32 & 0xFFFFFFFF, unpacked >> 32 & 0xFFFFFFFF)
    return _rar4_block(_RAR4_FILE, flags, body + raw_name, head_size=head_size) + data


def _rar4_main() -> bytes:
    # Flags 0: one volume, not solid, no comment, no lock, headers not encrypted; then RESERVED1
    # (2 bytes) and RESERVED2 (4), which RAR writes as zeros (the HighPosAV and PosAV of old).
    return _rar4_block(_RAR4_MAIN, 0, b"\0" * 6)


def _rar4_end() -> bytes:
    return _rar4_block(_RAR4_END, _SKIP_IF_UNKNOWN, b"")


def rar4_stored(files: Sequence[tuple[str, bytes]]) -> bytes:
    """A RAR 4 archive (RAR 2.9 format) of these (name, data) files, stored: method 0x30, no
    compression, so that what a test reads back is the data itself. Names use ``/`` (written
    as RAR writes Windows paths, with ``\\``); a name that is not ASCII is written in UTF-8."""
    out = [RAR4_MARK, _rar4_main()]
    for name, data in files:
        raw_name, _ = _rar4_name(name)
        if len(data) >= 2**32 or len(raw_name) > 0xFFFF - 7 - _FILE_FIELDS.size:
            raise ValueError(f"{name!r}: a file of 4 GiB or more, or a name too long for a RAR 4 header")
        out.append(_rar4_file(name, data))
    out.append(_rar4_end())
    return b"".join(out)


# --- RAR 5 (for its hostile cases) ---------------------------------------------------------------


def _vint(value: int) -> bytes:
    """RAR 5's variable-length integer: 7 bits a byte, low first, the high bit saying more follow."""
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _rar5_header(fields: bytes) -> bytes:
    """A header: CRC32 of what follows it (the size and the fields), the size as a vint, the fields."""
    size = _vint(len(fields))
    return struct.pack("<I", zlib.crc32(size + fields)) + size + fields


def _rar5_file(
    name: str,
    data: bytes,
    *,
    data_size: int | None = None,
    unpacked: int | None = None,
    name_size: int | None = None,
    extra_size: int | None = None,
) -> bytes:
    """A file header (type 2) and its data, stored (compression info 0: version 0, method 0).
    The keywords write lies in place of what data and name give."""
    raw_name = name.encode("utf-8")
    flags = 0x0002 | (0x0001 if extra_size is not None else 0)  # a data area; an extra area
    fields = _vint(2) + _vint(flags)
    if extra_size is not None:
        fields += _vint(extra_size)
    fields += _vint(len(data) if data_size is None else data_size)
    fields += (
        _vint(0x0004)  # file flags: the data's CRC32 is given
        + _vint(len(data) if unpacked is None else unpacked)
        + _vint(_ATTR_ARCHIVE)
        + struct.pack("<I", zlib.crc32(data))
        + _vint(0)
        + _vint(0)  # compression, host OS Windows
        + _vint(len(raw_name) if name_size is None else name_size)
        + raw_name
    )
    return _rar5_header(fields) + data


def _rar5_main() -> bytes:
    return _rar5_header(_vint(1) + _vint(0) + _vint(0))  # type, header flags, archive flags


def _rar5_end() -> bytes:
    return _rar5_header(_vint(5) + _vint(0) + _vint(0))  # type, header flags, end flags


# --- PAR2 ----------------------------------------------------------------------------------------

PAR2_MAGIC = b"PAR2\0PKT"
_PAR2_MAIN = b"PAR 2.0\0Main\0\0\0\0"
_PAR2_FILE = b"PAR 2.0\0FileDesc"
_PAR2_IFSC = b"PAR 2.0\0IFSC\0\0\0\0"
_PAR2_CREATOR = b"PAR 2.0\0Creator\0"
_PAR2_UNKNOWN = b"SIMNEWS\0Unknown\0"  # a type no reader knows: skipped by its length
_HASH16K = 16 * 1024
# The good files the hostile par2 cases list after their lies: what a test expects read.
PAR2_LISTED: tuple[tuple[str, bytes], ...] = (
    ("Listed.Release.2024.1080p.WEB.h264-GRP.mkv", bytes(range(256)) * 40),
    ("Listed.Release.2024.1080p.WEB.h264-GRP.nfo", b"Listed.Release.2024.1080p.WEB.h264-GRP\r\n"),
)


def _pad4(raw: bytes) -> bytes:
    return raw + b"\0" * (-len(raw) % 4)


def _par2_packet(
    kind: bytes, body: bytes, set_id: bytes, *, length: int | None = None, digest: bytes | None = None
) -> bytes:
    """magic, length, MD5 (of the set id, type and body), set id, type, body. length and digest
    override the true ones (lies); the bytes written are the packet's."""
    rest = set_id + kind + body
    true_length = 32 + len(rest)
    return (
        PAR2_MAGIC
        + struct.pack("<Q", true_length if length is None else length)
        + (hashlib.md5(rest).digest() if digest is None else digest)
        + rest
    )


def _par2_description(name: str, data: bytes, *, size: int | None = None) -> tuple[bytes, bytes]:
    """A file's id and its file description body (size overrides the length written)."""
    raw_name = name.encode("utf-8")
    hash16k = hashlib.md5(data[:_HASH16K]).digest()
    length = struct.pack("<Q", len(data))
    file_id = hashlib.md5(hash16k + length + raw_name).digest()  # the PAR 2.0 specification's
    body = (
        file_id
        + hashlib.md5(data).digest()
        + hash16k
        + struct.pack("<Q", len(data) if size is None else size)
        + _pad4(raw_name)
    )
    return file_id, body


def _par2_checksums(file_id: bytes, data: bytes, slice_size: int) -> bytes:
    """An IFSC body: MD5 and CRC32 of each slice, the last one padded with zeros to a slice."""
    out = [file_id]
    for start in range(0, len(data), slice_size):
        piece = data[start : start + slice_size].ljust(slice_size, b"\0")
        out.append(hashlib.md5(piece).digest() + struct.pack("<I", zlib.crc32(piece)))
    return b"".join(out)


def _par2_packets(files: Sequence[tuple[str, bytes]], slice_size: int, creator: str) -> tuple[bytes, list[bytes]]:
    """The recovery set id and the packets of an index over files: main, then each file's
    description and checksums, then the creator."""
    if slice_size <= 0 or slice_size % 4:
        raise ValueError("a slice size is a positive multiple of 4")
    # par2 create skips empty files ("Skipping 0 byte file"): they have no slice to recover.
    described = [(_par2_description(name, data), data) for name, data in files if data]
    ids = sorted(file_id for (file_id, _), _ in described)
    main = struct.pack("<QI", slice_size, len(ids)) + b"".join(ids)
    set_id = hashlib.md5(main).digest()  # the specification's: the MD5 of the main packet's body
    packets = [_par2_packet(_PAR2_MAIN, main, set_id)]
    for (file_id, body), data in described:
        packets.append(_par2_packet(_PAR2_FILE, body, set_id))
        packets.append(_par2_packet(_PAR2_IFSC, _par2_checksums(file_id, data, slice_size), set_id))
    packets.append(_par2_packet(_PAR2_CREATOR, _pad4(creator.encode("utf-8")), set_id))
    return set_id, packets


def par2_index(
    files: Sequence[tuple[str, bytes]], *, slice_size: int = 4096, creator: str = "simnews.archives"
) -> bytes:
    """A PAR2 index file over these (name, data) files: what ``par2 create`` writes as
    ``name.par2``, no recovery slices (empty files left out, as par2 leaves them). Names are
    written in UTF-8."""
    return b"".join(_par2_packets(files, slice_size, creator)[1])


# --- yEnc ----------------------------------------------------------------------------------------


def _yenc(data: bytes, begin_line: bytes, part_line: bytes | None, end_line: bytes | None) -> bytes:
    lines = [
        begin_line,
        *([part_line] if part_line is not None else []),
        *encode_lines(data),
        *([end_line] if end_line is not None else []),
    ]
    return b"".join(line + b"\r\n" for line in lines)


def yenc_lying_sizes(data: bytes | None = None, name: str = "Lying.Sizes.rar") -> dict[str, bytes]:
    """Article bodies of data (by default a small RAR 4 archive, so that a body believed would
    show files) whose yEnc lines lie about sizes, by case. edge.inspect.yenc.decode bounds every
    number before it believes it: a size past 2**48 or over 18 digits is ``bad_header``; a
    =ypart range outside the file, or one claiming more bytes than the encoded text can hold or
    fewer than it does, and a =yend size= that differs are ``size_mismatch``; no =yend is
    ``truncated``; a header line over 4 KiB is ``bad_header``. One case is no lie the decoder can
    see: a part at the end of a 2**48-byte file, read as a later article (no first article)."""
    if data is None:
        data = rar4_stored([("Lying.Inside.mkv", bytes(range(256)) * 16)])
    raw_name, n = name.encode("utf-8"), len(data)
    crc = b"pcrc32=%08x" % zlib.crc32(data)

    def begin(size: int | bytes, part: bytes = b"part=1 total=1 ") -> bytes:
        return (
            b"=ybegin "
            + part
            + b"line=128 size="
            + (b"%d" % size if isinstance(size, int) else size)
            + b" name="
            + raw_name
        )

    def ypart(first: int | bytes, last: int | bytes) -> bytes:
        def text(value: int | bytes) -> bytes:
            return b"%d" % value if isinstance(value, int) else value

        return b"=ypart begin=" + text(first) + b" end=" + text(last)

    def yend(size: int | bytes = n) -> bytes:
        return b"=yend size=" + (b"%d" % size if isinstance(size, int) else size) + b" part=1 " + crc

    return {
        # =ybegin size= past the 2**48 the decoder believes, and past 18 digits (past any int64).
        "size-2**62": _yenc(data, begin(2**62), ypart(1, n), yend()),
        "size-20-digits": _yenc(data, begin(b"9" * 20), ypart(1, n), yend()),
        # =ypart ranges that cannot be: past the file's size, before its first byte, backwards.
        "end-past-size": _yenc(data, begin(n), ypart(1, n * 1000), yend()),
        "begin-zero": _yenc(data, begin(n), ypart(0, n - 1), yend()),
        "begin-after-end": _yenc(data, begin(n), ypart(n + 10, n), yend()),
        "end-20-digits": _yenc(data, begin(n), ypart(1, b"9" * 20), yend()),
        "begin-negative": _yenc(data, begin(n), ypart(b"-5", n), yend()),
        # A part of 1 TiB claimed (within a file of 2**40) for the few bytes the body carries: a
        # decoder that reserved room for the claim would try to take 1 TiB.
        "end-past-data": _yenc(data, begin(2**40), ypart(1, 2**40), yend(2**40)),
        # A claim the encoded length allows, but not what decodes: one byte short.
        "end-one-short": _yenc(data, begin(n), ypart(1, n - 1), yend(n - 1)),
        # =yend size= that differs from =ypart and from the data.
        "yend-size-lies": _yenc(data, begin(n), ypart(1, n), yend(n * 2)),
        "yend-size-20-digits": _yenc(data, begin(n), ypart(1, n), yend(b"9" * 20)),
        # A multi-part body without its =ypart line, and one cut before =yend.
        "part-without-ypart": _yenc(data, begin(n * 3, b"part=2 total=3 "), None, yend()),
        "no-yend": _yenc(data, begin(n), ypart(1, n), None),
        # A =ybegin line that never ends within the 4 KiB a header line may take.
        "endless-header-line": b"=ybegin part=1 total=1 line=128 size=%d name=" % n
        + b"x" * 8192
        + b"\r\n"
        + b"".join(line + b"\r\n" for line in [*encode_lines(data), yend()]),
        # No lie that can be seen: the data as the last bytes of a 2**48-byte file. Believed,
        # placed there, and no first article of that file.
        "far-offset": _yenc(data, begin(2**48, b"part=9 total=9 "), ypart(2**48 - n + 1, 2**48), yend()),
    }


# --- PAR2 hostile --------------------------------------------------------------------------------


def _par2_good(slice_size: int = 1024) -> tuple[bytes, list[bytes]]:
    return _par2_packets(PAR2_LISTED, slice_size, "simnews.archives")


def par2_huge_lengths() -> dict[str, bytes]:
    """PAR2 files (cases by name) that open with a packet whose length or body lies, then the
    good index of PAR2_LISTED. edge.inspect.par2 does not read a packet whose length runs past
    the data (``truncated``), is under the 64-byte header or not a multiple of 4
    (``bad_length``), and refuses a file description whose length is past 2**48 or a main packet
    whose file count is more than its ids (``bad_body``); after each it goes on to the next magic."""
    set_id, good = _par2_good()
    body = b"x" * 64
    main_lie = struct.pack("<QI", 1024, 0xFFFFFFFF) + b"\0" * 16  # 4 billion files, one id
    _, huge_file = _par2_description("Huge.File.mkv", b"x" * 100, size=2**63)
    return {
        "par2-length-2**63.par2": _par2_packet(_PAR2_UNKNOWN, body, set_id, length=2**63) + b"".join(good),
        "par2-length-2**64-4.par2": _par2_packet(_PAR2_UNKNOWN, body, set_id, length=2**64 - 4) + b"".join(good),
        "par2-length-under-header.par2": _par2_packet(_PAR2_UNKNOWN, body, set_id, length=32) + b"".join(good),
        "par2-length-not-4-aligned.par2": _par2_packet(_PAR2_UNKNOWN, body, set_id, length=64 + 64 + 2)
        + b"".join(good),
        "par2-file-size-2**63.par2": b"".join(good[:1])
        + _par2_packet(_PAR2_FILE, huge_file, set_id)
        + b"".join(good[1:]),
        "par2-main-count-4g.par2": _par2_packet(_PAR2_MAIN, main_lie, set_id) + b"".join(good),
    }


def par2_loop(nested_bytes: int = 320 * 1024) -> dict[str, bytes]:
    """PAR2 files (cases by name) whose packets would keep a naive reader going round, then the
    good index of PAR2_LISTED:

    - ``par2-length-zero``: 1,000 headers of length 0 (a reader that steps by the length never
      moves): each ``bad_length``, the scan steps past its magic;
    - ``par2-repeated``: the index's main and file description packets 500 times over, as
      every recovery volume repeats them: read, the files kept once, nothing counted;
    - ``par2-magic-inside``: an unknown packet (``unknown``) whose body is headers claiming to
      run to the file's end: the scan jumps over a packet whose MD5 holds, so never reads them;
    - ``par2-nested-lengths``: nested_bytes of headers every 16 bytes, each claiming a length
      that runs to the end of the file and none with a right MD5 (``bad_md5``). After each the
      scan moves on only to the next magic, 16 bytes on, but each claim costs an MD5 over the
      rest of the file: (nested_bytes / 16) * (nested_bytes / 2) bytes hashed, quadratic in the
      article's size (edge.inspect.par2 as it stands takes ~5 s for the default 320 KiB and
      ~30 s for a 700 KB article: the bug tests/simnews/test_archives.py marks)."""
    set_id, good = _par2_good()
    good_bytes = b"".join(good)
    zero = (PAR2_MAGIC + struct.pack("<Q", 0) + b"\0" * 48) * 1000
    repeated = b"".join(good[:3]) * 500  # main, the first file's description and checksums
    total = nested_bytes + len(good_bytes)
    inner = b"".join(PAR2_MAGIC + struct.pack("<Q", 10**6) for _ in range(256))
    count = nested_bytes // 16
    # A magic and a length every 16 bytes: a header read at any of them takes the 48 bytes after
    # its length (the next headers) for its MD5, set id and type, so its MD5 never matches; and
    # each length is exactly what is left of the file (a multiple of 4, as good as a true one).
    nested = b"".join(PAR2_MAGIC + struct.pack("<Q", (total - 16 * i) // 4 * 4) for i in range(count))
    return {
        "par2-length-zero.par2": zero + good_bytes,
        "par2-repeated.par2": repeated + good_bytes,
        "par2-magic-inside.par2": _par2_packet(_PAR2_UNKNOWN, inner, set_id) + good_bytes,
        "par2-nested-lengths.par2": nested + good_bytes,
    }


# --- RAR hostile ---------------------------------------------------------------------------------

BEFORE = ("Before.The.Lie.txt", b"read before the lie\r\n" * 8)  # in every hostile RAR, ahead of its lie
AFTER = ("After.The.Lie.txt", b"read after the lie\r\n" * 8)  # behind it: read when the walk goes on


def rar_absurd_sizes() -> dict[str, bytes]:
    """RAR 4 and RAR 5 archives (cases by name), each holding BEFORE, then a header that lies,
    then AFTER and the end block. edge.inspect.archives stops the walk at a header it cannot
    believe (counted ``bad_header``, or ``bad_crc``), keeps a file whose unpacked size is past
    2**48 without its size (``absurd_size``, the walk goes on), and ends quietly, as at an
    article's end, where a header or data size runs past the bytes at hand (``*-past-article``:
    nothing counted, the archive not complete)."""
    after = _rar4_file(*AFTER) + _rar4_end()
    rar4 = RAR4_MARK + _rar4_main() + _rar4_file(*BEFORE)
    name = "Lie.mkv"
    bad_crc = bytearray(_rar4_file(name, b"data"))
    bad_crc[7 + _FILE_FIELDS.size] ^= 0x20  # the name's first byte, after the CRC was taken
    after5 = _rar5_file(*AFTER) + _rar5_end()
    rar5 = RAR5_MARK + _rar5_main() + _rar5_file(*BEFORE)
    padding = b"\0" * 16  # so that a size read is not taken for a cut one
    return {
        # HEAD_SIZE under the 7 bytes of the block header itself (a walk stepping by it stalls).
        "rar4-head-size-3.rar": rar4 + _rar4_block(0x7A, 0, b"", head_size=3) + after,
        # HEAD_SIZE under a file header's fixed fields.
        "rar4-head-size-under-fields.rar": rar4 + _rar4_block(_RAR4_FILE, _LONG_BLOCK, b"\0" * 13) + after,
        # NAME_SIZE of 65,535 in a header of a few bytes.
        "rar4-name-size-65535.rar": rar4 + _rar4_file(name, b"data", name_size=0xFFFF) + after,
        # A 64-bit unpacked size of 2**63 (LARGE, HIGH_UNP_SIZE 0x80000000): kept without it.
        "rar4-unpacked-2**63.rar": rar4 + _rar4_file(name, b"data", unpacked=2**63) + after,
        # A header CRC that does not match.
        "rar4-bad-crc.rar": rar4 + bytes(bad_crc) + after,
        # A 64-bit PACK_SIZE of 2**64 - 1: the next header would be past any article.
        "rar4-pack-size-past-article.rar": rar4 + _rar4_file(name, b"data", packed=2**64 - 1) + after,
        # HEAD_SIZE of 65,535 in an archive of a few hundred bytes.
        "rar4-head-size-past-article.rar": rar4 + _rar4_file(name, b"data", head_size=0xFFFF) + after,
        # RAR 5: a header size of 0, one in a 5-byte vint (past the format's 3 bytes, 2 MiB),
        # an 11-byte vint (past the 10 bytes, 70 bits, a reader takes) in a header whose CRC holds, a name size of 2**40, an
        # extra area of 2**60, a data size of 2**63, an unpacked size of 2**63 (kept without it).
        "rar5-head-size-0.rar": rar5 + struct.pack("<I", 0) + _vint(0) + padding + after5,
        "rar5-head-size-5-byte-vint.rar": rar5 + struct.pack("<I", 0) + b"\xff\xff\xff\xff\x0f" + padding + after5,
        "rar5-vint-overflow.rar": rar5 + _rar5_header(_vint(2) + b"\xff" * 10 + b"\x01" + _vint(0)) + after5,
        "rar5-name-size-2**40.rar": rar5 + _rar5_file(name, b"data", name_size=2**40) + after5,
        "rar5-extra-size-2**60.rar": rar5 + _rar5_file(name, b"data", extra_size=2**60) + after5,
        "rar5-data-size-2**63.rar": rar5 + _rar5_file(name, b"data", data_size=2**63) + after5,
        "rar5-unpacked-2**63.rar": rar5 + _rar5_file(name, b"data", unpacked=2**63) + after5,
        # A data size of 2**61 (under the 2**62 believed): the next header past any article.
        "rar5-data-size-past-article.rar": rar5 + _rar5_file(name, b"data", data_size=2**61) + after5,
    }


# --- 7z hostile ----------------------------------------------------------------------------------

SEVEN_ZIP_MARK = b"7z\xbc\xaf\x27\x1c"


def _seven_zip(offset: int, size: int, crc: int, after: bytes = b"", *, start_crc: int | None = None) -> bytes:
    """A 7z signature header (version 0.4): the start header's CRC, then the next header's
    offset (from the end of these 32 bytes), size and CRC; then after."""
    start = struct.pack("<QQI", offset, size, crc)
    return (
        SEVEN_ZIP_MARK
        + b"\x00\x04"
        + struct.pack("<I", zlib.crc32(start) if start_crc is None else start_crc)
        + start
        + after
    )


def _seven_zip_with(header: bytes, packed: bytes = b"") -> bytes:
    """An archive of packed streams and then a header, the start header pointing at it truly."""
    return _seven_zip(len(packed), len(header), zlib.crc32(header), packed + header)


def _number_7z(value: int) -> bytes:
    """7z's NUMBER at its longest: 0xFF and 8 bytes, little-endian (any value fits)."""
    return b"\xff" + struct.pack("<Q", value)


def sevenzip_absurd() -> dict[str, bytes]:
    """7z archives (cases by name) whose start header or header lies. edge.inspect.archives
    refuses a next-header offset or size past 2**62 (``bad_header``) and a start header or
    header whose CRC does not match (``bad_crc``), bounds a header's counts (``bad_header``) and
    an encoded header's unpacked size (``header_too_large``); an offset within bounds but past
    the bytes at hand leaves the header unread, quietly (``*-past-article``)."""
    packed = bytes(range(64))  # stands for the packed streams a real archive has before its header
    header = bytes([0x01, 0x00])  # Header, End: an archive of nothing
    # Header, FilesInfo, 2**40 files.
    files = bytes([0x01, 0x05]) + _number_7z(2**40)
    # EncodedHeader: PackInfo (at 0, 1 stream of 5 bytes), UnpackInfo (1 folder of one LZMA coder,
    # properties 5D 00 00 01 00) whose unpacked size is 2**40.
    encoded = (
        bytes(
            [
                0x17,
                0x06,
                0x00,
                0x01,
                0x09,
                0x05,
                0x00,
                0x07,
                0x0B,
                0x01,
                0x00,
                0x01,
                0x23,
                0x03,
                0x01,
                0x01,
                0x05,
                0x5D,
                0x00,
                0x00,
                0x01,
                0x00,
                0x0C,
            ]
        )
        + _number_7z(2**40)
        + b"\x00\x00"
    )
    wrong_crc = _seven_zip(len(packed), len(header), zlib.crc32(header) ^ 1, packed + header)
    return {
        "7z-offset-2**63.7z": _seven_zip(2**63, len(header), zlib.crc32(header), packed + header),
        "7z-size-2**63.7z": _seven_zip(len(packed), 2**63, zlib.crc32(header), packed + header),
        "7z-offset-and-size-2**64-1.7z": _seven_zip(2**64 - 1, 2**64 - 1, 0, packed + header),
        "7z-start-crc-wrong.7z": _seven_zip(
            len(packed), len(header), zlib.crc32(header), packed + header, start_crc=0xDEADBEEF
        ),
        "7z-header-crc-wrong.7z": wrong_crc,
        "7z-files-2**40.7z": _seven_zip_with(files, packed),
        "7z-encoded-header-2**40.7z": _seven_zip_with(encoded, b"\0" * 5),
        # Offset and size each at the 2**62 believed: their sum past 2**63, where a reader adding
        # them in 64 bits would wrap round to an offset inside the article.
        "7z-offset-and-size-past-article.7z": _seven_zip(2**62, 2**62, 0, packed + header),
    }


# --- ZIP hostile ---------------------------------------------------------------------------------

_ZIP_LOCAL = struct.Struct("<4sHHHHHIIIHH")
_ZIP_CENTRAL = struct.Struct("<4sHHHHHHIIIHHHHHII")
_ZIP_END = struct.Struct("<4sHHHHIIH")
_ZIP64_END = struct.Struct("<4sQHHIIQQQQ")
_ZIP64_LOCATOR = struct.Struct("<4sIQI")
_DOS_DATE, _DOS_TIME = _dos_time(MTIME) >> 16, _dos_time(MTIME) & 0xFFFF
ZIP_GOOD = (("Zip.Good.One.txt", b"one\r\n" * 10), ("Zip.Good.Two.txt", b"two\r\n" * 10))  # in every hostile ZIP


def _zip_local(
    name: str,
    data: bytes,
    *,
    packed: int | None = None,
    unpacked: int | None = None,
    extra: bytes = b"",
    name_size: int | None = None,
) -> bytes:
    """A local file header and its data, stored (method 0), the name in UTF-8 (flag bit 11).
    packed, unpacked and name_size override the true ones (lies); the bytes written are data."""
    raw = name.encode("utf-8")
    return (
        _ZIP_LOCAL.pack(
            b"PK\x03\x04",
            20,
            0x0800,
            0,
            _DOS_TIME,
            _DOS_DATE,
            zlib.crc32(data),
            len(data) if packed is None else packed,
            len(data) if unpacked is None else unpacked,
            len(raw) if name_size is None else name_size,
            len(extra),
        )
        + raw
        + extra
        + data
    )


def _zip_central(name: str, data: bytes, offset: int, *, sizes: int | None = None, extra: bytes = b"") -> bytes:
    """A central directory entry (sizes overrides both sizes: a lie)."""
    raw = name.encode("utf-8")
    size = len(data) if sizes is None else sizes
    return (
        _ZIP_CENTRAL.pack(
            b"PK\x01\x02",
            20,
            20,
            0x0800,
            0,
            _DOS_TIME,
            _DOS_DATE,
            zlib.crc32(data),
            size,
            size,
            len(raw),
            len(extra),
            0,
            0,
            0,
            _ATTR_ARCHIVE,
            offset,
        )
        + raw
        + extra
    )


def _zip_true_directory(entries: Sequence[tuple[bytes, str, bytes]]) -> bytes:
    """The local entries (their bytes, name, data) followed by a true central directory and end
    record: the archive as the tools write it, whatever the local headers say."""
    offsets, at = [], 0
    for local, _, _ in entries:
        offsets.append(at)
        at += len(local)
    directory = b"".join(_zip_central(name, data, offset) for (_, name, data), offset in zip(entries, offsets))
    return (
        b"".join(local for local, _, _ in entries)
        + directory
        + _ZIP_END.pack(b"PK\x05\x06", 0, 0, len(entries), len(entries), len(directory), at, 0)
    )


def _zip64_extra(*values: int) -> bytes:
    """A ZIP64 extended information extra field (tag 0x0001) of 8-byte values."""
    return struct.pack("<HH", 0x0001, 8 * len(values)) + b"".join(struct.pack("<Q", value) for value in values)


def zip_absurd() -> dict[str, bytes]:
    """ZIP archives (cases by name) holding ZIP_GOOD, stored, with something absurd.
    edge.inspect.archives reads a ZIP's local headers from its start (the first article) and
    stops at the central directory without reading it: a directory that lies costs nothing
    (``zip-central-directory-absurd``: nothing counted, complete). A local header's ZIP64 size
    past 2**48 keeps the file without its size (``absurd_size``); a local header whose data
    size lands the walk on what is no header ends it (``bad_header``); one whose data size or
    name runs past the bytes at hand ends it quietly, as at an article's end (``*-past-article``)."""
    (one_name, one), (two_name, two) = ZIP_GOOD
    first, second = _zip_local(one_name, one), _zip_local(two_name, two)
    # The central directory: each entry's sizes 0xFFFFFFFF with a ZIP64 extra of 2**63 sizes and
    # local header offset; the end records: 65,535 entries (2**63 in ZIP64's), the directory's
    # size and offset past anything, a comment of 65,535 bytes that is not there.
    huge = _zip64_extra(2**63, 2**63, 2**63)
    central = _zip_central(one_name, one, 0xFFFFFFFF, sizes=0xFFFFFFFF, extra=huge) + _zip_central(
        two_name, two, 0xFFFFFFFF, sizes=0xFFFFFFFF, extra=huge
    )
    zip64_end = _ZIP64_END.pack(b"PK\x06\x06", 44, 45, 45, 0xFFFFFFFF, 0xFFFFFFFF, 2**63, 2**63, 2**63, 2**63)
    locator = _ZIP64_LOCATOR.pack(b"PK\x06\x07", 0, 2**63, 0xFFFFFFFF)
    end = _ZIP_END.pack(b"PK\x05\x06", 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFF)
    lie_name, lie = "Zip.Lie.bin", b"the data of the lying entry"
    # Both 32-bit sizes 0xFFFFFFFF, so the ZIP64 extra's count: an unpacked size of 2**63.
    zip64 = _zip_local(lie_name, lie, packed=0xFFFFFFFF, unpacked=0xFFFFFFFF, extra=_zip64_extra(2**63, len(lie)))
    return {
        "zip-central-directory-absurd.zip": first + second + central + zip64_end + locator + end,
        "zip-local-zip64-2**63.zip": _zip_true_directory(
            [(first, one_name, one), (zip64, lie_name, lie), (second, two_name, two)]
        ),
        # A data size 8 bytes short: the walk lands inside the data, on no header.
        "zip-local-size-lands-in-data.zip": first + _zip_local(lie_name, lie, packed=len(lie) - 8) + second,
        "zip-local-size-past-article.zip": first + _zip_local(lie_name, lie, packed=0xFFFFFFF0) + second,
        "zip-name-size-past-article.zip": first + _zip_local(lie_name, lie, name_size=0xFFFF),
    }
