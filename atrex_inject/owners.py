"""How an owner is named to a person: the same words in the Perfetto trace and the PNG, so a lane
in the picture can be found in the trace (SM -> CTA (x, y, z) -> "warp 3 (lane0)")."""
from __future__ import annotations


def cta_name(cta: int, grid) -> str:
    gx, gy = int(grid[0]), int(grid[1])
    return f"CTA ({cta % gx}, {cta // gx % gy}, {cta // (gx * gy)})"


def owner_name(role: str, thread: int) -> str:
    who = {"thread": f"thread {thread}", "predicate": f"thread {thread}", "lane0": f"warp {thread // 32}",
           "warpgroup": f"warpgroup {thread // 128}", "cta": "CTA leader"}[role]
    return f"{who} ({role})"
