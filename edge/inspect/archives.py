"""What an archive holds, read from the first bytes of its first volume (the first article of a
post's .rar, .part01.rar, .r00, .7z.001, .7z or .zip): the files' names and sizes, whether they
or the headers themselves are encrypted, and whether it is one volume of several. Headers only:
no file data is ever decompressed or decrypted.

- RAR 4 (RAR 1.5 to 4.x, marker ``Rar!\\x1a\\x07\\x00``): 7-byte block headers (CRC16, type,
  flags, size; a long block's data size after them). The main header says volume, solid, first
  volume and whether the headers are encrypted (0x0080: then nothing after it can be read); each
  file header gives its name (OEM/UTF-8, or RAR's compressed Unicode form), unpacked size and the
  encrypted flag (0x0004).
- RAR 5 (``Rar!\\x1a\\x07\\x01\\x00``): headers of variable-length integers, each with its CRC32.
  An archive encryption header means encrypted headers; a file header's extra area with an
  encryption record means an encrypted file.
- 7z (``7z\\xbc\\xaf\\x27\\x1c``): the start header gives only where the real header is, at the
  archive's end. When those bytes are at hand (a small archive, or ``tail``), the header is read:
  an encoded header whose coders include AES means encrypted headers; an LZMA or LZMA2-compressed
  header (7-Zip's default) is unpacked, at most MAX_7Z_HEADER bytes of it; a plain header gives
  the files, and a folder with an AES coder marks its files encrypted.
- ZIP (local file headers ``PK\\x03\\x04``, after the ``PK\\x07\\x08`` of a spanned first volume):
  name (UTF-8 when flag bit 11 says so, else CP437), sizes (ZIP64 extra field when they overflow),
  bit 0 encrypted. A header whose sizes follow its data (bit 3) ends the walk: its data cannot be
  skipped.

Every length read is checked against the bytes at hand before anything is read with it; the walk
always moves forward and stops at MAX_BLOCKS headers; at most ``max_files`` files are kept and a
name is cut to MAX_NAME characters. Headers cut by the end of the bytes end the walk quietly
(``complete`` stays False: the first article of a volume rarely holds all of it); a header that is
malformed, or whose CRC does not match, ends it too, counted in ``malformed``.

The password level is newznab's ``password`` attribute: 0 none found, 1 passworded (an encrypted
file, or encrypted headers: nothing can be listed without the password), 2 potentially
passworded (an archive inside the archive, whose contents cannot be seen from here).
"""

from __future__ import annotations

import lzma
import re
import struct
import zlib
from dataclasses import dataclass, field

from edge.digest.rules import EXECUTABLE_EXTENSIONS
from edge.inspect._text import decode_name

RAR4_MARK = b"Rar!\x1a\x07\x00"
RAR5_MARK = b"Rar!\x1a\x07\x01\x00"
SEVEN_ZIP_MARK = b"7z\xbc\xaf\x27\x1c"
ZIP_LOCAL = b"PK\x03\x04"
ZIP_SPANNED = b"PK\x07\x08"
MAX_FILES = 10_000
MAX_NAME = 1_024  # characters of a name kept
MAX_BLOCKS = 100_000
MAX_FILE_SIZE = 2**48
MAX_RAR5_HEADER = 2 * 1024 * 1024  # the format's own bound (a 3-byte size)
MAX_7Z_HEADER = 1024 * 1024  # unpacked header bytes read at most
_AES_7Z = bytes.fromhex("06f10701")
_LZMA_7Z = bytes.fromhex("030101")
_LZMA2_7Z = b"\x21"
# Inner archives: what makes a post potentially passworded (newznab's level 2).
_INNER_ARCHIVE = re.compile(r"\.(?:rar|r\d{2}|\d{3}|zip|z\d{2}|7z|ace|arj|cab|tar|tgz|gz|bz2|xz)$", re.IGNORECASE)


class _Malformed(Exception):
    """A header read past its bounds or with values it cannot have (internal: counted)."""


@dataclass(frozen=True, slots=True)
class ArchiveFile:
    name: str
    size: int | None  # unpacked; None when the header does not say
    encrypted: bool


@dataclass(slots=True)
class ArchiveInfo:
    kind: str  # rar4, rar5, 7z, zip
    volume: bool | None = None  # one volume of several (None: the headers read do not say)
    first_volume: bool | None = None
    encrypted_headers: bool = False
    solid: bool | None = None
    files: list[ArchiveFile] = field(default_factory=list)
    complete: bool = False  # the end of the archive's (or volume's) headers was reached
    headers_at_end: bool = False  # 7z: the header is at the end of the archive
    header_offset: int | None = None  # 7z: where it starts, from the archive's first byte
    header_size: int | None = None
    header_read: bool = False  # 7z: its bytes were at hand and read
    malformed: dict[str, int] = field(default_factory=dict)

    def count(self, why: str) -> None:
        self.malformed[why] = self.malformed.get(why, 0) + 1

    @property
    def password(self) -> int:
        """newznab's level: 0 none seen, 1 passworded, 2 potentially (an archive inside)."""
        if self.encrypted_headers or any(f.encrypted for f in self.files):
            return 1
        if any(_INNER_ARCHIVE.search(f.name) for f in self.files):
            return 2
        return 0

    @property
    def executables(self) -> list[str]:
        return [f.name for f in self.files if is_executable(f.name)]


def is_executable(name: str) -> bool:
    return name.rpartition(".")[2].lower() in EXECUTABLE_EXTENSIONS if "." in name else False


def archive_kind(data: bytes) -> str | None:
    """rar4, rar5, 7z or zip from the first bytes; None for anything else."""
    if data.startswith(RAR5_MARK):
        return "rar5"
    if data.startswith(RAR4_MARK):
        return "rar4"
    if data.startswith(SEVEN_ZIP_MARK):
        return "7z"
    if data.startswith(ZIP_LOCAL) or (data.startswith(ZIP_SPANNED) and data[4:8] == ZIP_LOCAL):
        return "zip"
    return None


def read_archive(
    data: bytes, *, tail: bytes | None = None, tail_offset: int | None = None, max_files: int = MAX_FILES
) -> ArchiveInfo | None:
    """What the archive starting data holds (None when data starts no archive known here).
    tail, at tail_offset from the archive's first byte, may hold a 7z archive's end header."""
    kind = archive_kind(data)
    if kind is None:
        return None
    info = ArchiveInfo(kind=kind)
    reader = {"rar4": _read_rar4, "rar5": _read_rar5, "zip": _read_zip}.get(kind)
    try:
        if reader is not None:
            reader(data, info, max_files)
        else:
            _read_7z(data, info, max_files, tail, tail_offset)
    except _Malformed as error:
        info.count(str(error) or "bad_header")
    return info


# --- shared -------------------------------------------------------------------------------------


def _add(info: ArchiveInfo, max_files: int, name: str, size: int | None, encrypted: bool) -> bool:
    """Keeps a file; False once max_files are kept (the walk stops: counted)."""
    if len(info.files) >= max_files:
        info.count("too_many_files")
        return False
    if size is not None and size > MAX_FILE_SIZE:
        info.count("absurd_size")
        size = None
    info.files.append(ArchiveFile(name=name.replace("\\", "/")[:MAX_NAME], size=size, encrypted=encrypted))
    return True


# --- RAR 4 --------------------------------------------------------------------------------------

_RAR4_BLOCK = struct.Struct("<HBHH")  # crc16, type, flags, header size
_RAR4_FILE = struct.Struct("<IIBIIBBHI")  # pack, unpack, os, crc, time, version, method, name size, attrs
_RAR4_MAIN, _RAR4_FILE_BLOCK, _RAR4_SERVICE, _RAR4_END = 0x73, 0x74, 0x7A, 0x7B
_LONG_BLOCK = 0x8000


def _read_rar4(data: bytes, info: ArchiveInfo, max_files: int) -> None:
    position, end = len(RAR4_MARK), len(data)
    for _ in range(MAX_BLOCKS):
        if position + _RAR4_BLOCK.size > end:
            return
        crc, kind, flags, size = _RAR4_BLOCK.unpack_from(data, position)
        if size < _RAR4_BLOCK.size:
            raise _Malformed("bad_header")
        if position + size > end:
            return  # cut by the article's end
        header = data[position : position + size]
        if kind not in (_RAR4_FILE_BLOCK, _RAR4_SERVICE) and not _rar4_crc_ok(header, crc, kind, flags):
            raise _Malformed("bad_crc")
        extra = 0
        if kind == _RAR4_MAIN:
            info.volume = bool(flags & 0x0001)
            info.solid = bool(flags & 0x0008)
            if info.volume and flags & 0x0100:  # RAR 3 and later mark the first volume
                info.first_volume = True
            if flags & 0x0080:
                info.encrypted_headers = True
                return  # every header after this one is encrypted
        elif kind in (_RAR4_FILE_BLOCK, _RAR4_SERVICE):
            if size < _RAR4_BLOCK.size + _RAR4_FILE.size:
                raise _Malformed("bad_header")
            packed, unpacked, _, _, _, _, _, name_size, _ = _RAR4_FILE.unpack_from(header, _RAR4_BLOCK.size)
            at = _RAR4_BLOCK.size + _RAR4_FILE.size
            if flags & 0x0100:  # large: the high halves of both sizes
                if size < at + 8:
                    raise _Malformed("bad_header")
                high_packed, high_unpacked = struct.unpack_from("<II", header, at)
                packed, unpacked, at = packed | high_packed << 32, unpacked | high_unpacked << 32, at + 8
            if at + name_size > size:
                raise _Malformed("bad_header")
            if not _rar4_crc_ok(header, crc, kind, flags, at + name_size):
                raise _Malformed("bad_crc")
            extra = packed
            if kind == _RAR4_FILE_BLOCK:
                if flags & 0x0001:
                    info.first_volume = False  # continued from a previous volume
                if (flags & 0x00E0) != 0x00E0:  # not a directory
                    name = _rar4_name(header[at : at + name_size], flags)
                    if not _add(info, max_files, name, unpacked, bool(flags & 0x0004)):
                        return
        elif kind == _RAR4_END:
            if flags & 0x0001:
                info.volume = True
            info.complete = True
            return
        elif flags & _LONG_BLOCK:
            if size < _RAR4_BLOCK.size + 4:
                raise _Malformed("bad_header")
            (extra,) = struct.unpack_from("<I", header, _RAR4_BLOCK.size)
        position += size + extra
    info.count("too_many_blocks")


def _rar4_crc_ok(header: bytes, crc: int, kind: int, flags: int, name_end: int = 0) -> bool:
    """The CRC16 (low half of the CRC32) over the header after its CRC field. Older versions
    leave out what follows the fixed fields: the main header's comment, a file header's comment
    (after its name, salt and times: the CRC ends within 48 bytes of the name); RAR 2's old
    subblocks (0x77) count their data in, which is not here: not checked."""
    if zlib.crc32(header[2:]) & 0xFFFF == crc or kind == 0x77:
        return True
    if kind == _RAR4_MAIN:
        fixed = 13 + (1 if flags & 0x0200 else 0)
        return len(header) >= fixed and zlib.crc32(header[2:fixed]) & 0xFFFF == crc
    if kind in (_RAR4_FILE_BLOCK, _RAR4_SERVICE) and flags & 0x0008:
        return any(
            zlib.crc32(header[2:end]) & 0xFFFF == crc for end in range(name_end, min(len(header), name_end + 48))
        )
    return False


def _rar4_name(raw: bytes, flags: int) -> str:
    if flags & 0x0200:  # Unicode
        nul = raw.find(b"\0")
        if nul < 0:
            return decode_name(raw[: 4 * MAX_NAME])
        decoded = _rar_unicode(raw[:nul], raw[nul + 1 :])
        return decoded if decoded is not None else decode_name(raw[:nul], "cp437")
    nul = raw.find(b"\0")
    return decode_name(raw[:nul] if nul >= 0 else raw, "cp437")


def _rar_unicode(plain: bytes, packed: bytes) -> str | None:
    """RAR 3's compressed UTF-16 name: the 8-bit name plus a stream of 2-bit opcodes saying how
    each character differs from it (unrar's DecodeFileName). None when the stream is broken. At
    most MAX_NAME characters come out."""
    out = bytearray()
    if not packed:
        return None
    high, position, flags, flag_bits, index = packed[0], 1, 0, 0, 0
    limit = 2 * MAX_NAME

    def byte() -> int:
        nonlocal position
        if position >= len(packed):
            raise IndexError
        position += 1
        return packed[position - 1]

    try:
        while position < len(packed) and len(out) < limit:
            if flag_bits == 0:
                flags, flag_bits = byte(), 8
            flag_bits -= 2
            op = (flags >> flag_bits) & 3
            if op == 0:
                out += bytes((byte(), 0))
                index += 1
            elif op == 1:
                out += bytes((byte(), high))
                index += 1
            elif op == 2:
                low = byte()
                out += bytes((low, byte()))
                index += 1
            else:
                length = byte()
                if length & 0x80:
                    correction = byte()
                    for _ in range((length & 0x7F) + 2):
                        if index >= len(plain) or len(out) >= limit:
                            break
                        out += bytes(((plain[index] + correction) & 0xFF, high))
                        index += 1
                else:
                    for _ in range(length + 2):
                        if index >= len(plain) or len(out) >= limit:
                            break
                        out += bytes((plain[index], 0))
                        index += 1
    except IndexError:
        return None
    return out[:limit].decode("utf-16-le", "replace")


# --- RAR 5 --------------------------------------------------------------------------------------


def _vint(data: bytes, position: int, end: int) -> tuple[int, int]:
    """A RAR 5 variable-length integer (7 bits a byte, low first, at most 10 bytes) read before end."""
    value, shift = 0, 0
    while position < end and shift < 70:
        byte = data[position]
        value |= (byte & 0x7F) << shift
        position += 1
        if not byte & 0x80:
            return value, position
        shift += 7
    raise _Malformed("bad_header")


def _read_rar5(data: bytes, info: ArchiveInfo, max_files: int) -> None:
    position, end = len(RAR5_MARK), len(data)
    for _ in range(MAX_BLOCKS):
        if position + 5 > end:
            return
        (crc,) = struct.unpack_from("<I", data, position)
        try:
            size, start = _vint(data, position + 4, min(end, position + 7))
        except _Malformed:
            if end - position < 7:
                return  # the size itself is cut
            raise
        if size == 0 or size > MAX_RAR5_HEADER:
            raise _Malformed("bad_header")
        header_end = start + size
        if header_end > end:
            return
        if zlib.crc32(memoryview(data)[position + 4 : header_end]) != crc:
            raise _Malformed("bad_crc")
        kind, at = _vint(data, start, header_end)
        flags, at = _vint(data, at, header_end)
        extra_size, data_size = 0, 0
        if flags & 0x0001:
            extra_size, at = _vint(data, at, header_end)
        if flags & 0x0002:
            data_size, at = _vint(data, at, header_end)
        if extra_size > header_end - at or data_size > 2**62:
            raise _Malformed("bad_header")
        if kind == 1:  # main archive header
            archive_flags, at = _vint(data, at, header_end)
            info.volume = bool(archive_flags & 0x0001)
            info.solid = bool(archive_flags & 0x0004)
            if info.volume:  # the volume number is in all but the first
                info.first_volume = not archive_flags & 0x0002
        elif kind == 4:  # archive encryption header: everything after it is encrypted
            info.encrypted_headers = True
            return
        elif kind == 2:  # file header
            file_flags, at = _vint(data, at, header_end)
            unpacked, at = _vint(data, at, header_end)
            _, at = _vint(data, at, header_end)  # attributes
            at += (4 if file_flags & 0x0002 else 0) + (4 if file_flags & 0x0004 else 0)
            _, at = _vint(data, at, header_end)  # compression
            _, at = _vint(data, at, header_end)  # host OS
            name_size, at = _vint(data, at, header_end)
            extra_start = header_end - extra_size
            if at + name_size > extra_start:
                raise _Malformed("bad_header")
            if flags & 0x0008:
                info.first_volume = False  # continued from a previous volume
            if not file_flags & 0x0001:  # not a directory
                name = decode_name(data[at : at + min(name_size, 4 * MAX_NAME)])
                encrypted = _rar5_encrypted(data, extra_start, header_end)
                if not _add(info, max_files, name, None if file_flags & 0x0008 else unpacked, encrypted):
                    return
        elif kind == 5:  # end of archive
            end_flags, at = _vint(data, at, header_end)
            if end_flags & 0x0001:
                info.volume = True
            info.complete = True
            return
        position = header_end + data_size
    info.count("too_many_blocks")


def _rar5_encrypted(data: bytes, position: int, end: int) -> bool:
    """True when the extra area (position..end) has a file encryption record (type 1)."""
    for _ in range(64):
        if position >= end:
            return False
        size, at = _vint(data, position, end)
        if size == 0 or at + size > end:
            raise _Malformed("bad_header")
        kind, _ = _vint(data, at, at + size)
        if kind == 1:
            return True
        position = at + size
    return False


# --- ZIP ----------------------------------------------------------------------------------------

_ZIP_HEADER = struct.Struct("<4sHHHHHIIIHH")  # sig, version, flags, method, time, date, crc, sizes, name, extra


def _read_zip(data: bytes, info: ArchiveInfo, max_files: int) -> None:
    position, end = 0, len(data)
    if data.startswith(ZIP_SPANNED):
        info.volume, info.first_volume, position = True, True, 4
    for _ in range(MAX_BLOCKS):
        if position + 4 <= end and data[position : position + 4] in (b"PK\x01\x02", b"PK\x05\x06", b"PK\x06\x06"):
            info.complete = True  # the central directory: every local header was read
            return
        if position + _ZIP_HEADER.size > end:
            return
        signature, _, flags, method, _, _, _, packed, unpacked, name_size, extra_size = _ZIP_HEADER.unpack_from(
            data, position
        )
        if signature != ZIP_LOCAL:
            raise _Malformed("bad_header")
        at = position + _ZIP_HEADER.size
        if at + name_size + extra_size > end:
            return
        raw_name = data[at : at + name_size]
        extra = data[at + name_size : at + name_size + extra_size]
        if packed == 0xFFFFFFFF or unpacked == 0xFFFFFFFF:
            unpacked, packed = _zip64_sizes(extra, unpacked, packed)
        name = decode_name(raw_name, "cp437") if not flags & 0x0800 else raw_name.decode("utf-8", "replace")
        if not name.endswith(("/", "\\")):
            known = unpacked if not flags & 0x0008 else None
            if not _add(info, max_files, name, known, bool(flags & 0x0001) or method == 99):
                return
        if flags & 0x0008 and packed == 0:
            return  # the sizes follow the data: it cannot be skipped
        position = at + name_size + extra_size + packed
        if flags & 0x0008:  # a data descriptor after the data: CRC and sizes, maybe signed
            position += 16 if data[position : position + 4] == ZIP_SPANNED else 12
    info.count("too_many_blocks")


def _zip64_sizes(extra: bytes, unpacked: int, packed: int) -> tuple[int, int]:
    """The ZIP64 extra field's sizes (each present only when its 32-bit field overflowed)."""
    position = 0
    while position + 4 <= len(extra):
        tag, size = struct.unpack_from("<HH", extra, position)
        body = extra[position + 4 : position + 4 + size]
        if tag == 0x0001:
            at = 0
            if unpacked == 0xFFFFFFFF and at + 8 <= len(body):
                (unpacked,) = struct.unpack_from("<Q", body, at)
                at += 8
            if packed == 0xFFFFFFFF and at + 8 <= len(body):
                (packed,) = struct.unpack_from("<Q", body, at)
            break
        position += 4 + size
    return unpacked, packed


# --- 7z -----------------------------------------------------------------------------------------

_7Z_START = struct.Struct("<6sBBIQQI")  # signature, version, start header CRC, next header offset, size, CRC
(
    _K_END,
    _K_HEADER,
    _K_ARCHIVE_PROPERTIES,
    _K_ADDITIONAL_STREAMS,
    _K_MAIN_STREAMS,
    _K_FILES,
    _K_PACK_INFO,
    _K_UNPACK_INFO,
    _K_SUBSTREAMS,
    _K_SIZE,
    _K_CRC,
    _K_FOLDER,
    _K_UNPACK_SIZE,
    _K_NUM_UNPACK_STREAM,
    _K_EMPTY_STREAM,
    _K_EMPTY_FILE,
) = range(16)
_K_NAME, _K_ENCODED_HEADER, _K_DUMMY = 0x11, 0x17, 0x19


class _Cursor:
    """Bounded reads of a 7z header."""

    def __init__(self, data: bytes) -> None:
        self.data, self.position = data, 0

    def byte(self) -> int:
        if self.position >= len(self.data):
            raise _Malformed("bad_header")
        self.position += 1
        return self.data[self.position - 1]

    def take(self, size: int) -> bytes:
        if size < 0 or self.position + size > len(self.data):
            raise _Malformed("bad_header")
        self.position += size
        return self.data[self.position - size : self.position]

    def number(self) -> int:
        """7z's NUMBER: the leading 1 bits of the first byte count the bytes that follow."""
        first = self.byte()
        mask, extra = 0x80, 0
        while extra < 8 and first & mask:
            extra, mask = extra + 1, mask >> 1
        value = int.from_bytes(self.take(extra), "little")
        if extra < 8:
            value |= (first & (mask - 1)) << (8 * extra)
        return value

    def count(self, bound: int = MAX_FILES * 10) -> int:
        value = self.number()
        if value > bound:
            raise _Malformed("bad_header")
        return value


@dataclass(slots=True)
class _Folder:
    coders: list[tuple[bytes, bytes]]  # method id, properties
    out_streams: int = 1
    unpack_sizes: list[int] = field(default_factory=list)
    main_out: int = 0  # the output stream no bind pair consumes
    crc_defined: bool = False

    @property
    def size(self) -> int:
        return self.unpack_sizes[self.main_out] if self.main_out < len(self.unpack_sizes) else 0

    @property
    def encrypted(self) -> bool:
        return any(method == _AES_7Z for method, _ in self.coders)


@dataclass(slots=True)
class _Streams:
    pack_position: int = 0
    pack_sizes: list[int] = field(default_factory=list)
    folders: list[_Folder] = field(default_factory=list)
    substreams: list[int] = field(default_factory=list)  # per folder
    sizes: list[int] = field(default_factory=list)  # every unpacked stream's, in order


def _read_7z(data: bytes, info: ArchiveInfo, max_files: int, tail: bytes | None, tail_offset: int | None) -> None:
    info.headers_at_end = True
    if len(data) < _7Z_START.size:
        return
    _, _, _, start_crc, offset, size, crc = _7Z_START.unpack_from(data)
    if zlib.crc32(data[12:32]) != start_crc:
        raise _Malformed("bad_crc")
    if offset > 2**62 or size > 2**62:
        raise _Malformed("bad_header")
    info.header_offset, info.header_size = _7Z_START.size + offset, size
    if size == 0:
        info.complete = True  # an empty archive
        return
    header = _at(data, 0, info.header_offset, size)
    if header is None and tail is not None and tail_offset is not None:
        header = _at(tail, tail_offset, info.header_offset, size)
    if header is None:
        return
    if zlib.crc32(header) != crc:
        raise _Malformed("bad_crc")
    info.header_read = True
    cursor = _Cursor(header)
    kind = cursor.byte()
    if kind == _K_ENCODED_HEADER:
        streams = _streams_info(cursor)
        if any(folder.encrypted for folder in streams.folders):
            info.encrypted_headers = True
            return
        header = _unpack_header(streams, data, tail, tail_offset)
        if header is None:
            return
        cursor = _Cursor(header)
        kind = cursor.byte()
    if kind != _K_HEADER:
        raise _Malformed("bad_header")
    _7z_header(cursor, info, max_files)
    info.complete = True


def _at(data: bytes, data_offset: int, offset: int, size: int) -> bytes | None:
    """size bytes at offset from the archive's start, when data (at data_offset) holds them."""
    start = offset - data_offset
    if start < 0 or start + size > len(data):
        return None
    return data[start : start + size]


def _unpack_header(streams: _Streams, data: bytes, tail: bytes | None, tail_offset: int | None) -> bytes | None:
    """An encoded header unpacked: one folder with one LZMA or LZMA2 coder, at most
    MAX_7Z_HEADER bytes out. None when its packed bytes are not at hand or the coder is another."""
    if len(streams.folders) != 1 or len(streams.pack_sizes) != 1 or len(streams.folders[0].coders) != 1:
        raise _Malformed("unsupported_header")
    folder = streams.folders[0]
    method, properties = folder.coders[0]
    out_size = folder.size
    if out_size > MAX_7Z_HEADER:
        raise _Malformed("header_too_large")
    offset = _7Z_START.size + streams.pack_position
    packed = _at(data, 0, offset, streams.pack_sizes[0])
    if packed is None and tail is not None and tail_offset is not None:
        packed = _at(tail, tail_offset, offset, streams.pack_sizes[0])
    if packed is None:
        return None
    # The dictionary need not be larger than what comes out: a lie about its size costs nothing.
    window = max(4096, min(1 << 26, 1 << max(out_size, 1).bit_length()))
    if method == _LZMA_7Z and len(properties) == 5:
        lc_lp_pb = properties[0]
        if lc_lp_pb >= 9 * 5 * 5:
            raise _Malformed("bad_header")
        dictionary = min(int.from_bytes(properties[1:5], "little"), window)
        filters = [
            {
                "id": lzma.FILTER_LZMA1,
                "dict_size": max(4096, dictionary),
                "lc": lc_lp_pb % 9,
                "lp": lc_lp_pb // 9 % 5,
                "pb": lc_lp_pb // 45,
            }
        ]
    elif method == _LZMA2_7Z and len(properties) == 1:
        filters = [{"id": lzma.FILTER_LZMA2, "dict_size": window}]
    else:
        raise _Malformed("unsupported_header")
    try:
        unpacked = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=filters).decompress(packed, max_length=out_size)
    except (lzma.LZMAError, ValueError):
        raise _Malformed("bad_header") from None
    if len(unpacked) != out_size:
        raise _Malformed("bad_header")
    return unpacked


def _streams_info(cursor: _Cursor) -> _Streams:
    streams = _Streams()
    kind = cursor.byte()
    if kind == _K_PACK_INFO:
        streams.pack_position = cursor.number()
        count = cursor.count()
        kind = cursor.byte()
        while kind != _K_END:
            if kind == _K_SIZE:
                streams.pack_sizes = [cursor.number() for _ in range(count)]
            elif kind == _K_CRC:
                _digests(cursor, count)
            else:
                raise _Malformed("bad_header")
            kind = cursor.byte()
        kind = cursor.byte()
    if kind == _K_UNPACK_INFO:
        if cursor.byte() != _K_FOLDER:
            raise _Malformed("bad_header")
        count = cursor.count()
        if cursor.byte() != 0:
            raise _Malformed("unsupported_header")  # folders stored elsewhere
        streams.folders = [_folder(cursor) for _ in range(count)]
        if cursor.byte() != _K_UNPACK_SIZE:
            raise _Malformed("bad_header")
        for folder in streams.folders:
            folder.unpack_sizes = [cursor.number() for _ in range(folder.out_streams)]
        kind = cursor.byte()
        while kind != _K_END:
            if kind == _K_CRC:
                for folder, defined in zip(streams.folders, _digests(cursor, len(streams.folders))):
                    folder.crc_defined = defined
            else:
                raise _Malformed("bad_header")
            kind = cursor.byte()
        kind = cursor.byte()
    streams.substreams = [1] * len(streams.folders)
    if kind == _K_SUBSTREAMS:
        kind = cursor.byte()
        if kind == _K_NUM_UNPACK_STREAM:
            streams.substreams = [cursor.count() for _ in streams.folders]
            if sum(streams.substreams) > MAX_FILES * 10:
                raise _Malformed("bad_header")
            kind = cursor.byte()
        sizes_given = kind == _K_SIZE
        for folder, substreams in zip(streams.folders, streams.substreams):
            if not substreams:
                continue
            sizes = [cursor.number() for _ in range(substreams - 1)] if sizes_given else []
            sizes.append(max(0, folder.size - sum(sizes)))
            streams.sizes += sizes
        if sizes_given:
            kind = cursor.byte()
        while kind != _K_END:
            if kind == _K_CRC:
                # One for each stream whose CRC its folder's does not give already.
                _digests(
                    cursor,
                    sum(
                        n for folder, n in zip(streams.folders, streams.substreams) if n != 1 or not folder.crc_defined
                    ),
                )
            else:
                raise _Malformed("bad_header")
            kind = cursor.byte()
        kind = cursor.byte()
    else:
        streams.sizes = [folder.size for folder in streams.folders]
    if kind != _K_END:
        raise _Malformed("bad_header")
    return streams


def _folder(cursor: _Cursor) -> _Folder:
    coders: list[tuple[bytes, bytes]] = []
    ins = outs = 0
    for _ in range(cursor.count(64)):
        flags = cursor.byte()
        method = cursor.take(flags & 0x0F)
        coder_ins, coder_outs = (cursor.count(64), cursor.count(64)) if flags & 0x10 else (1, 1)
        properties = cursor.take(cursor.count(1024)) if flags & 0x20 else b""
        if flags & 0x80:
            raise _Malformed("unsupported_header")
        coders.append((method, properties))
        ins, outs = ins + coder_ins, outs + coder_outs
    if not coders or outs == 0:
        raise _Malformed("bad_header")
    bound_outs = set()
    for _ in range(outs - 1):
        cursor.number()  # in index
        bound_outs.add(cursor.number())
    packed = ins - (outs - 1)
    if packed < 1:
        raise _Malformed("bad_header")
    if packed > 1:
        for _ in range(packed):
            cursor.number()
    main = next((index for index in range(outs) if index not in bound_outs), 0)
    return _Folder(coders=coders, out_streams=outs, main_out=main)


def _digests(cursor: _Cursor, count: int) -> list[bool]:
    defined = _bits(cursor, count, all_defined_byte=True)
    cursor.take(4 * sum(defined))
    return defined


def _bits(cursor: _Cursor, count: int, all_defined_byte: bool = False) -> list[bool]:
    if all_defined_byte and cursor.byte():
        return [True] * count
    raw = cursor.take((count + 7) // 8)
    return [bool(raw[i // 8] & (0x80 >> (i % 8))) for i in range(count)]


def _7z_header(cursor: _Cursor, info: ArchiveInfo, max_files: int) -> None:
    kind = cursor.byte()
    if kind == _K_ARCHIVE_PROPERTIES:
        while True:
            if cursor.byte() == _K_END:
                break
            cursor.take(cursor.count(1 << 20))
        kind = cursor.byte()
    if kind == _K_ADDITIONAL_STREAMS:
        _streams_info(cursor)
        kind = cursor.byte()
    streams = _Streams()
    if kind == _K_MAIN_STREAMS:
        streams = _streams_info(cursor)
        kind = cursor.byte()
    if kind == _K_END:
        return
    if kind != _K_FILES:
        raise _Malformed("bad_header")
    count = cursor.count(10 * MAX_FILES)
    empty_stream = [False] * count
    empty_file: list[bool] = []
    directory: list[bool] = []
    names: list[str] = []
    while True:
        prop = cursor.byte()
        if prop == _K_END:
            break
        body = _Cursor(cursor.take(cursor.count(len(cursor.data))))
        if prop == _K_EMPTY_STREAM:
            empty_stream = _bits(body, count)
        elif prop == _K_EMPTY_FILE:
            empty_file = _bits(body, sum(empty_stream))
        elif prop == _K_NAME:
            if body.byte() != 0:
                raise _Malformed("unsupported_header")
            text = body.data[1:]
            names = text[: len(text) // 2 * 2].decode("utf-16-le", "replace").split("\0")[:count]
        elif prop == 0x15:  # attributes: the directory bit of each file that has them
            directory = _directories(body, count)
    # Files with data take the unpacked streams in order; each folder's are encrypted with it.
    stream_encrypted = [folder.encrypted for folder, n in zip(streams.folders, streams.substreams) for _ in range(n)]
    stream, empty_index = 0, 0
    size: int | None
    for index in range(count):
        name = names[index] if index < len(names) else ""
        if empty_stream[index]:
            is_file = empty_index < len(empty_file) and empty_file[empty_index]
            empty_index += 1
            if not is_file or (index < len(directory) and directory[index]):
                continue  # a directory
            size, encrypted = 0, False
        else:
            size = streams.sizes[stream] if stream < len(streams.sizes) else None
            encrypted = stream_encrypted[stream] if stream < len(stream_encrypted) else False
            stream += 1
        if not _add(info, max_files, name, size, encrypted):
            return


def _directories(body: _Cursor, count: int) -> list[bool]:
    defined = _bits(body, count, all_defined_byte=True)
    if body.byte() != 0:
        return []
    flags = []
    for index in range(count):
        attributes = int.from_bytes(body.take(4), "little") if defined[index] else 0
        flags.append(bool(attributes & 0x10))
    return flags
