"""The multi-core CRC-32 equals zlib's on buffers around its block size, and combines as zlib's would."""
from __future__ import annotations

import random
import zlib

import pytest

from atrex_inject import crc


@pytest.mark.parametrize("size", [0, 1, 4097, crc.BLOCK - 1, crc.BLOCK, 2 * crc.BLOCK + 13])
def test_crc32_equals_zlib(size):
    data = random.Random(size).randbytes(size)
    released = []
    assert crc.crc32(memoryview(data), lambda a, b: released.append((a, b)), workers=3) == zlib.crc32(data)
    assert sorted(released) == [(a, min(a + crc.BLOCK, size)) for a in range(0, size, crc.BLOCK)]


def test_combine():
    rng = random.Random(1)
    for n_a, n_b in ((0, 5), (5, 0), (1000, 1), (3, 70000)):
        a, b = rng.randbytes(n_a), rng.randbytes(n_b)
        assert crc.combine(zlib.crc32(a), zlib.crc32(b), n_b) == zlib.crc32(a + b)
