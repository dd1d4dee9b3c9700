"""The changed blocks between two lists of lines: what a plan's text edits are (`availability`) and
how `fix` maps its output back onto a file whose literal tables it left out (`summary`)."""

from __future__ import annotations

import difflib

# past this many changed lines the O(N·D) diff gives way to difflib (a plan edits a few statements)
MYERS_MAX_D = 4000
# up to this many changed lines the whole-file Myers diff is exact and cheap; past it, anchored
EXACT_MAX_D = 200


def changed_blocks(a: list[str], b: list[str]) -> list[tuple[int, int, int, int]]:
    """(a_start, a_end, b_start, b_end) of every block where `b` differs from `a`.

    Myers' O(N·D) diff (a shortest edit) when at most EXACT_MAX_D lines change. Past that, lines
    that occur once in each and in the same order anchor the diff (patience diff), and Myers runs
    between anchors. Myers alone is O(N·D) on the whole file, and D grows with the
    number of fixed methods: quadratic in a class of thousands of them. difflib's SequenceMatcher
    (autojunk off) is quadratic in repeated lines: a 10 000-line table of equal rows in a fixable
    file made `check` spend 9 of its 11 s there."""
    exact = _myers(a, b, EXACT_MAX_D)
    if exact is not None:
        return exact
    blocks: list[tuple[int, int, int, int]] = []
    x = y = 0
    for ax, by in [*_anchors(a, b), (len(a), len(b))]:
        gap_a, gap_b = a[x:ax], b[y:by]
        gap = _myers(gap_a, gap_b, MYERS_MAX_D)
        if gap is None:
            matcher = difflib.SequenceMatcher(None, gap_a, gap_b, autojunk=False)
            gap = [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]
        for i1, i2, j1, j2 in gap:
            block = (x + i1, x + i2, y + j1, y + j2)
            if blocks and blocks[-1][1] == block[0] and blocks[-1][3] == block[2]:
                first = blocks.pop()
                block = (first[0], block[1], first[2], block[3])
            blocks.append(block)
        x, y = ax + 1, by + 1
    return blocks


def _anchors(a: list[str], b: list[str]) -> list[tuple[int, int]]:
    """(i, j) pairs of lines unique in `a` and in `b`, equal, in increasing order of both: the
    longest such chain (patience sorting)."""
    count_a: dict[str, int] = {}
    for line in a:
        count_a[line] = count_a.get(line, 0) + 1
    count_b: dict[str, int] = {}
    where_b: dict[str, int] = {}
    for j, line in enumerate(b):
        count_b[line] = count_b.get(line, 0) + 1
        where_b[line] = j
    pairs = [(i, where_b[line]) for i, line in enumerate(a) if count_a[line] == 1 and count_b.get(line) == 1]
    # longest increasing subsequence of the j's (pairs are in increasing i)
    tails: list[int] = []  # index into pairs of the smallest tail of each chain length
    previous: list[int] = [-1] * len(pairs)
    for index, (_, j) in enumerate(pairs):
        position = _bisect_tails(pairs, tails, j)
        if position > 0:
            previous[index] = tails[position - 1]
        if position == len(tails):
            tails.append(index)
        else:
            tails[position] = index
    chain: list[tuple[int, int]] = []
    at = tails[-1] if tails else -1
    while at >= 0:
        chain.append(pairs[at])
        at = previous[at]
    return chain[::-1]


def _bisect_tails(pairs: list[tuple[int, int]], tails: list[int], j: int) -> int:
    low, high = 0, len(tails)
    while low < high:
        middle = (low + high) // 2
        if pairs[tails[middle]][1] < j:
            low = middle + 1
        else:
            high = middle
    return low


def _myers(a: list[str], b: list[str], max_d: int) -> list[tuple[int, int, int, int]] | None:
    """Myers' O(N·D) diff of `a` and `b`; None when more than `max_d` lines change."""
    n, m = len(a), len(b)
    frontier: dict[int, int] = {1: 0}
    trace: list[dict[int, int]] = []
    for d in range(min(n + m, max_d) + 1):
        trace.append(dict(frontier))
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and frontier[k - 1] < frontier[k + 1]):
                x = frontier[k + 1]
            else:
                x = frontier[k - 1] + 1
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            frontier[k] = x
            if x >= n and y >= m:
                return _blocks(_backtrack(trace, n, m), n, m)
    return None


def _backtrack(trace: list[dict[int, int]], n: int, m: int) -> list[tuple[int, int]]:
    """The (x, y) points where each run of equal lines starts, last first."""
    x, y = n, m
    snakes: list[tuple[int, int]] = []
    for d in range(len(trace) - 1, -1, -1):
        frontier = trace[d]
        k = x - y
        if d == 0:
            snakes.append((0, 0))
            break
        prev_k = k + 1 if k == -d or (k != d and frontier[k - 1] < frontier[k + 1]) else k - 1
        prev_x = frontier[prev_k]
        prev_y = prev_x - prev_k
        mid_x, mid_y = (prev_x, prev_y + 1) if prev_k == k + 1 else (prev_x + 1, prev_y)
        snakes.append((mid_x, mid_y))
        x, y = prev_x, prev_y
    return snakes


def _blocks(snakes: list[tuple[int, int]], n: int, m: int) -> list[tuple[int, int, int, int]]:
    """Changed blocks from the path's points: between points, one insertion or deletion each;
    runs of single steps merge into one block."""
    points = list(reversed(snakes))
    blocks: list[tuple[int, int, int, int]] = []
    # walk the path: from each point the run of equal lines, then one step to the next point
    for (x, y), nxt in zip(points, [*points[1:], None], strict=False):
        if nxt is None:
            break
        nx, ny = nxt
        # the step into `nxt` is a deletion (x advances) or an insertion (y advances); equal
        # lines lie between (x, y) and the step's start
        step_from = (nx - 1, ny) if nx - x > ny - y else (nx, ny - 1)
        i, j = step_from
        if blocks and blocks[-1][1] == i and blocks[-1][3] == j:
            first = blocks.pop()
            blocks.append((first[0], nx, first[2], ny))
        else:
            blocks.append((i, nx, j, ny))
    return blocks
