"""Streamed decompression of request bodies, the size limit applied to the INFLATED bytes.

A 0.5 MB gzip body can hold 512 MiB of zeros: ``gzip.decompress`` would build all of it before
any limit could look. Here output is produced in bounded steps and decoding stops as soon as it
passes ``limit``, so memory stays under ``limit`` plus one step whatever the ratio.
Content codings: gzip (also x-gzip, several members), deflate (zlib-wrapped or raw), zstd
(``zstandard``), identity.
"""

from __future__ import annotations

import io
import zlib

from memoryhub.core.errors import InvalidInput, PayloadTooLarge

ENCODINGS = ("gzip", "deflate", "zstd", "identity")


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"the decompressed body is over the limit of {limit} bytes", code="payload_too_large"
    )


def _zlib(body: bytes, wbits: int, limit: int) -> bytes:
    out = bytearray()
    data = body
    while data:
        decoder = zlib.decompressobj(wbits)
        while data and not decoder.eof:
            # max_length bounds this step's output; 0 would mean "unbounded", never reached here.
            out += decoder.decompress(data, limit + 1 - len(out))
            if len(out) > limit:
                raise _too_large(limit)
            data = decoder.unconsumed_tail
        if not decoder.eof:
            raise zlib.error("truncated stream")
        # gzip allows several members one after another; zlib/raw streams have one.
        data = decoder.unused_data if wbits > 16 else b""
        if data and not data.strip(b"\x00"):
            break  # trailing padding
    return bytes(out)


def _zstd(body: bytes, limit: int) -> bytes:
    import zstandard

    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(body), read_across_frames=True)
    out = reader.read(limit + 1)
    if len(out) > limit:
        raise _too_large(limit)
    return out


def inflate(body: bytes, encoding: str, limit: int) -> bytes:
    """``body`` decoded from its Content-Encoding; InvalidInput (415 for an unknown coding, 400
    for a corrupt body) or PayloadTooLarge (413) when the decoded bytes pass ``limit``."""
    coding = (encoding or "").strip().lower()
    if coding in ("", "identity"):
        return body
    try:
        if coding in ("gzip", "x-gzip"):
            return _zlib(body, 16 + zlib.MAX_WBITS, limit)
        if coding == "deflate":
            try:
                return _zlib(body, zlib.MAX_WBITS, limit)
            except zlib.error:
                return _zlib(body, -zlib.MAX_WBITS, limit)  # raw deflate, as some clients send
        if coding == "zstd":
            return _zstd(body, limit)
    except PayloadTooLarge:
        raise
    except Exception as exc:  # zlib.error, zstandard.ZstdError: a corrupt or truncated body
        raise InvalidInput(f"the body is not valid {coding}: {exc}", code="invalid_body") from exc
    raise InvalidInput(
        f"unsupported Content-Encoding {encoding[:40]!r} (one of: {', '.join(ENCODINGS)})",
        code="unsupported_encoding",
        status=415,
    )
