"""zlib's CRC-32 of a large buffer on several cores: blocks checksummed in threads (zlib.crc32
releases the GIL) and combined. crc32(A + B) is crc32(A) carried over len(B) zero bytes, xor
crc32(B); carrying a CRC over n zero bytes is a multiplication by x^(8n) modulo the CRC polynomial,
done in the CRC's own bit-reflected representation (bit 31 is x^0)."""
from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

POLY = 0xEDB88320  # x^32 + x^26 + ... + 1, reflected
BLOCK = 1 << 24


def _mul(a: int, b: int) -> int:
    """a * b modulo POLY, both reflected."""
    out = 0
    for bit in range(31, -1, -1):
        if a >> bit & 1:
            out ^= b
        b = (b >> 1) ^ POLY if b & 1 else b >> 1
    return out


_SQUARES = [1 << 30]  # x^(2^k) modulo POLY for k = 0..63 (x^1 is bit 30)
for _ in range(63):
    _SQUARES.append(_mul(_SQUARES[-1], _SQUARES[-1]))


def _x8n(n: int) -> int:
    """x^(8 n) modulo POLY, by squares."""
    out, k = 1 << 31, 3  # x^0; 8 n = n * 2^3
    while n:
        if n & 1:
            out = _mul(_SQUARES[k], out)
        n >>= 1
        k += 1
    return out


def combine(crc_a: int, crc_b: int, len_b: int) -> int:
    """crc32(A + B) from crc32(A), crc32(B) and len(B)."""
    return _mul(_x8n(len_b), crc_a) ^ crc_b


def crc32(view: memoryview, done: Callable[[int, int], None] | None = None, workers: int | None = None) -> int:
    """zlib.crc32(view), BLOCK bytes per task; done(start, end) after each block (to release it)."""
    def block(at: int) -> int:
        c = zlib.crc32(view[at:at + BLOCK])
        if done:
            done(at, min(at + BLOCK, len(view)))
        return c

    starts = range(0, len(view), BLOCK)
    with ThreadPoolExecutor(workers or min(8, os.cpu_count() or 1)) as pool:
        crcs = list(pool.map(block, starts))
    out = 0
    for at, c in zip(starts, crcs):
        out = combine(out, c, min(BLOCK, len(view) - at))
    return out
