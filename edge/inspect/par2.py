"""The files a PAR2 recovery set lists: their real names and sizes, read from the packets of a
.par2 file (its first article is enough: a par2 index holds nothing else, and every recovery
volume starts with the same packets).

A packet (PAR 2.0 specification): a 64-byte header, the magic ``PAR2\\0PKT``, the packet's length
(8 bytes, little-endian, the header included, a multiple of 4), the MD5 of everything after this
field to the packet's end (recovery set id, type, body), the recovery set id (16), the type (16);
then its body. The packets read:

- main (``PAR 2.0\\0Main\\0\\0\\0\\0``): slice size (8), the number of files in the recovery set (4),
  their file ids (16 each), then the ids of files outside the recovery set;
- file description (``PAR 2.0\\0FileDesc``): file id (16), MD5 of the file (16), MD5 of its first
  16 KiB (16), its length (8), its name (ASCII or UTF-8 in practice, Latin-1 from some old
  Windows tools; NUL-padded to a multiple of 4);
- Unicode file name (``PAR 2.0\\0UniFileN``, optional): file id (16), the name in UTF-16LE, which
  then wins over the file description's;
- creator (``PAR 2.0\\0Creator\\0``): the tool's name, kept for information.

Other packets (recovery slices, checksums) are skipped; so are packets of another recovery set
than the first main packet's. Nothing read is trusted past its bounds: a packet whose length is not
a multiple of 4, is under 64 bytes or runs past the data is not read, and the search for the next
magic goes on from the next byte after this one's magic (the scan always moves forward, so it ends
after at most len(data) / 8 steps); a packet whose MD5 does not match is skipped the same way; at
most ``max_files`` distinct files are kept (10,000 by default), a name is cut to 1,024 bytes, and
a length past 2**48 is not believed. Each skip is counted in ``Par2Set.skipped``.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field

from edge.inspect._text import decode_name

MAGIC = b"PAR2\0PKT"
HEADER = struct.Struct("<8sQ16s16s16s")  # magic, length, packet md5, recovery set id, type
MAIN = b"PAR 2.0\0Main\0\0\0\0"
FILE_DESCRIPTION = b"PAR 2.0\0FileDesc"
UNICODE_NAME = b"PAR 2.0\0UniFileN"
CREATOR = b"PAR 2.0\0Creator\0"
KNOWN_OTHERS = (b"PAR 2.0\0RecvSlic", b"PAR 2.0\0IFSC\0\0\0\0")
MAX_FILES = 10_000
MAX_NAME = 1_024  # bytes of a name kept
MAX_FILE_SIZE = 2**48
MAX_PACKETS = 1_000_000  # a bound on the loop; data of a few MB never has that many
WANTED = (MAIN, FILE_DESCRIPTION, UNICODE_NAME, CREATOR)  # the packets read (and so hashed)
HASH_BUDGET = 2  # bytes hashed at most, per byte of the data


@dataclass(frozen=True, slots=True)
class Par2File:
    name: str
    size: int
    hash16k: str  # hex MD5 of the first 16 KiB: what identifies an obfuscated file
    md5: str  # hex MD5 of the whole file
    file_id: str  # hex


@dataclass(slots=True)
class Par2Set:
    files: list[Par2File] = field(default_factory=list)  # the recovery set's order, then the rest
    slice_size: int | None = None
    recovery_set_id: str | None = None
    creator: str | None = None
    packets: int = 0  # packets read
    # Packets not read, by why: unknown (type), bad_md5, bad_length, truncated (runs past the data),
    # other_set, too_many_files, bad_body (a body too short for its type, or an absurd length).
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


def is_par2(data: bytes) -> bool:
    return data.startswith(MAGIC)


def read_par2(data: bytes, max_files: int = MAX_FILES) -> Par2Set:
    """The files a par2 file's bytes (all or its beginning) describe."""
    result = Par2Set()
    names: dict[bytes, bytes] = {}  # file id -> raw name
    unicode_names: dict[bytes, str] = {}
    described: dict[bytes, tuple[bytes, bytes, int]] = {}  # file id -> md5, md5 16k, length
    order: list[bytes] = []
    recovery_set: bytes | None = None
    position, end = data.find(MAGIC), len(data)
    steps = hashed = 0
    max_hashed = HASH_BUDGET * end + 64 * 1024
    while position >= 0 and steps < MAX_PACKETS:
        steps += 1
        if end - position < HEADER.size:
            result.skip("truncated")
            break
        _, length, digest, set_id, kind = HEADER.unpack_from(data, position)
        if length < HEADER.size or length % 4:
            result.skip("bad_length")
            position = data.find(MAGIC, position + 8)
            continue
        if position + length > end:
            # Cut by the article's end (or a lie): either way its body is not here.
            result.skip("truncated")
            position = data.find(MAGIC, position + 8)
            continue
        if kind not in WANTED:
            # Recovery slices and the like: never read, so never hashed (their bodies are most of
            # a par2 volume); the next packet is looked for past this one's magic.
            if kind not in KNOWN_OTHERS:
                result.skip("unknown")
            position = data.find(MAGIC, position + 8)
            continue
        packet = memoryview(data)[position : position + length]
        hashed += length
        if hashed > max_hashed:
            # Packets that overlap (each claiming the rest of the data) would be hashed over and
            # over: a well-formed file hashes each byte once.
            result.skip("hash_budget")
            break
        if hashlib.md5(packet[32:]).digest() != digest:
            result.skip("bad_md5")
            position = data.find(MAGIC, position + 8)
            continue
        position = data.find(MAGIC, position + length)
        body = bytes(packet[HEADER.size :])
        if recovery_set is None and kind == MAIN:
            recovery_set = set_id
            result.recovery_set_id = set_id.hex()
        if recovery_set is not None and set_id != recovery_set:
            result.skip("other_set")
            continue
        result.packets += 1
        if kind == MAIN:
            _read_main(body, result, order)
        elif kind == FILE_DESCRIPTION:
            if len(body) < 56:
                result.skip("bad_body")
                continue
            file_id, md5, md5_16k = body[:16], body[16:32], body[32:48]
            (size,) = struct.unpack_from("<Q", body, 48)
            if size > MAX_FILE_SIZE:
                result.skip("bad_body")
                continue
            if file_id not in described and len(described) >= max_files:
                result.skip("too_many_files")
                continue
            described[file_id] = (md5, md5_16k, size)
            names[file_id] = body[56 : 56 + MAX_NAME].rstrip(b"\0")
        elif kind == UNICODE_NAME:
            if len(body) < 18:
                result.skip("bad_body")
                continue
            raw = body[16 : 16 + 2 * MAX_NAME]
            raw = raw[: len(raw) // 2 * 2]
            unicode_names[body[:16]] = raw.decode("utf-16-le", "replace").rstrip("\0")
        elif kind == CREATOR:
            result.creator = decode_name(body[:256].rstrip(b"\0"))
    listed = set(order)
    for file_id in order + [i for i in described if i not in listed]:
        if file_id not in described:
            continue  # in the main packet, but its description is not in these bytes
        md5, md5_16k, size = described[file_id]
        name = unicode_names.get(file_id) or decode_name(names[file_id])
        result.files.append(Par2File(name=name, size=size, hash16k=md5_16k.hex(), md5=md5.hex(), file_id=file_id.hex()))
    return result


def _read_main(body: bytes, result: Par2Set, order: list[bytes]) -> None:
    if len(body) < 12:
        result.skip("bad_body")
        return
    slice_size, count = struct.unpack_from("<QI", body, 0)
    ids = (len(body) - 12) // 16
    if count > ids or slice_size == 0 or slice_size % 4:
        result.skip("bad_body")
        return
    if result.slice_size is not None:
        return  # every volume repeats it: the first one read stands
    result.slice_size = slice_size
    seen = set(order)
    for index in range(min(ids, MAX_FILES)):
        file_id = body[12 + 16 * index : 28 + 16 * index]
        if file_id not in seen:
            seen.add(file_id)
            order.append(file_id)
