"""The ledger's index of the servers with a free GPU: a tournament tree, searched rather than scanned.

Each leaf is a server: its free CPUs and memory and free GPUs while it has a free GPU (−inf, −inf
and +inf when it has none, so that it is never chosen); each inner node holds the most free CPUs,
the most free memory and the fewest free GPUs below it. :func:`next_with_room` finds the first
server from a given one on with room by descending the tree and skipping a subtree only where no
server can qualify (its largest free CPUs or memory fall short), so it finds exactly the server a
scan in index order finds, in about log₂(servers) steps where the scan took one per server.
:func:`fewest_free` finds the server with the fewest free GPUs (ties by index). The ledger's kernels
(:mod:`synergy_gym.sim.ledger_kernels`) call :func:`touch` whenever a server's free resources change.
"""

from __future__ import annotations

import numpy as np

from synergy_gym.sim.compiled import kernel

#: Columns of an index's nodes.
MAX_CPU, MAX_MEM, MIN_GPU = range(3)


def new_index(num_servers: int) -> np.ndarray:
    """An index's array for ``num_servers`` servers (to be filled by :func:`rebuild`)."""
    leaves = 1
    while leaves < num_servers:
        leaves *= 2
    return np.zeros((2 * leaves, 3))


@kernel
def rebuild(free_gpu, free_cpu, free_mem, index):
    """Fill the index from the free resources (every leaf, then every inner node)."""
    leaves = index.shape[0] // 2
    for i in range(leaves):
        _set_leaf(free_gpu, free_cpu, free_mem, index, i)
    for i in range(leaves - 1, 0, -1):
        _pull(index, i)


@kernel(inline=True)
def _set_leaf(free_gpu, free_cpu, free_mem, index, s):
    i = index.shape[0] // 2 + s
    if s < free_gpu.size and free_gpu[s] > 0:
        index[i, MAX_CPU] = free_cpu[s]
        index[i, MAX_MEM] = free_mem[s]
        index[i, MIN_GPU] = free_gpu[s]
    else:  # no free GPU (or no server): never chosen
        index[i, MAX_CPU] = -np.inf
        index[i, MAX_MEM] = -np.inf
        index[i, MIN_GPU] = np.inf


@kernel(inline=True)
def _pull(index, i):
    a, b = 2 * i, 2 * i + 1
    index[i, MAX_CPU] = max(index[a, MAX_CPU], index[b, MAX_CPU])
    index[i, MAX_MEM] = max(index[a, MAX_MEM], index[b, MAX_MEM])
    index[i, MIN_GPU] = min(index[a, MIN_GPU], index[b, MIN_GPU])


@kernel(inline=True)
def touch(free_gpu, free_cpu, free_mem, index, s):
    """Bring the index up to date after server ``s``'s free resources changed."""
    _set_leaf(free_gpu, free_cpu, free_mem, index, s)
    i = (index.shape[0] // 2 + s) // 2
    while i >= 1:
        cpu, mem, gpu = index[i, MAX_CPU], index[i, MAX_MEM], index[i, MIN_GPU]
        _pull(index, i)
        if index[i, MAX_CPU] == cpu and index[i, MAX_MEM] == mem and index[i, MIN_GPU] == gpu:
            return  # nothing above it changes either
        i //= 2


@kernel(inline=True)
def next_with_room(index, start, cpu, mem, slack):
    """The first server from ``start`` on with a free GPU, ``free_cpu + slack >= cpu`` and ``free_mem + slack >=
    mem`` (−1: none)."""
    leaves = index.shape[0] // 2
    if start >= leaves:
        return -1
    i = leaves + start
    while True:
        if index[i, MAX_CPU] + slack >= cpu and index[i, MAX_MEM] + slack >= mem:
            if i >= leaves:
                return i - leaves
            i = 2 * i  # some server below may qualify: its left half first
            continue
        while i & 1:  # the next subtree to the right
            i //= 2
        if i == 0:
            return -1
        i += 1


@kernel
def fewest_free(index):
    """The server with the fewest free GPUs but one at least (ties by index), or −1."""
    if index[1, MIN_GPU] == np.inf:
        return -1
    leaves = index.shape[0] // 2
    i = 1
    while i < leaves:
        i = 2 * i if index[2 * i, MIN_GPU] == index[i, MIN_GPU] else 2 * i + 1
    return i - leaves
