"""How an owner is named to a person: the same words in the Perfetto trace and the PNG, so a lane
in the picture can be found in the trace (SM -> CTA (x, y, z) -> "warp 3 (lane0)")."""
from __future__ import annotations

from .layout import Role


def cta_name(cta: int, grid) -> str:
    gx, gy = int(grid[0]), int(grid[1])
    return f"CTA ({cta % gx}, {cta // gx % gy}, {cta // (gx * gy)})"


def owner_name(role: Role, thread: int) -> str:
    who = {Role.THREAD: f"thread {thread}", Role.PREDICATE: f"thread {thread}", Role.LANE0: f"warp {thread // 32}",
           Role.WARPGROUP: f"warpgroup {thread // 128}", Role.CTA: "CTA leader"}[role]
    return f"{who} ({role.value})"
