"""Every random choice of a CF-RAG run, derived from one ``seed``.

The paper gives no seeding scheme; this is ours: numpy's SeedSequence spawn tree.
"""

from __future__ import annotations

import numpy as np

# Every random choice of a run derives from ``seed`` through numpy's SeedSequence spawn
# tree: child r of SeedSequence(seed) (r = the role's index below) and, for calls that
# come in a group, its grandchild i. Streams of different roles or indices are
# independent by construction — the ad-hoc offsets used before (seed + 10 + j for
# hypotheses, seed + 20 for the synthesis) collided from the 11th hypothesis on
#. The order is fixed: children 0 and 1 were already the clustering and
# sampling streams, so those results do not change.
SEED_ROLES = ("clustering", "sampling", "counterfactual", "closed_book", "hypothesis", "synthesis")


def derive_seed(seed: int, role: str, index: int = 0) -> int:
    """The generator seed of call ``index`` of ``role``: the first 32-bit word of
    SeedSequence(seed).spawn(...)[role].spawn(...)[index] (= ``SeedSequence(seed,
    spawn_key=(role, index))``), masked to 31 bits — llama.cpp reads 0xFFFFFFFF as "pick a
    random seed", and servers may parse seeds as signed 32-bit integers."""
    ss = np.random.SeedSequence(seed, spawn_key=(SEED_ROLES.index(role), index))
    return int(ss.generate_state(1, np.uint32)[0]) & 0x7FFFFFFF


def stream_rng(seed: int, role: str) -> np.random.Generator:
    """The numpy generator of ``role`` ("clustering", "sampling"): child ``role`` of SeedSequence(seed)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(SEED_ROLES.index(role),)))
