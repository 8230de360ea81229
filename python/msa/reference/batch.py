"""Sequences, positions and query blocks of a varlen batch (spec: "Sequences", "Query blocks"),
and the checks of the batch arguments and the block table."""

from typing import List, NamedTuple, Optional, Tuple

import torch

from ._common import _ints, _require


class Sequence(NamedTuple):
    """One sequence of a varlen batch: packed query tokens [q_begin, q_begin + q_len),
    kv_len cached tokens including this step's."""
    index: int
    q_begin: int
    q_len: int
    kv_len: int

    @property
    def pos0(self) -> int:
        """Position of the first query: kv_len - q_len."""
        return self.kv_len - self.q_len

    def n_blocks(self, Bs: int) -> int:
        """Logical KV blocks holding tokens: ceil(kv_len / Bs)."""
        return -(-self.kv_len // Bs)

    def position(self, t: int) -> int:
        """Position of packed query token t."""
        return self.pos0 + (t - self.q_begin)


class QueryBlock(NamedTuple):
    """The queries of one sequence with equal floor(pos / Qb): packed tokens
    [t_begin, t_end) at positions p0 .. p1."""
    seq: int
    t_begin: int
    t_end: int
    p0: int
    p1: int


def sequences(cu_q, kv_len, *, T: Optional[int] = None,
              max_tokens: Optional[int] = None) -> List[Sequence]:
    """Validates cu_q [B+1] and kv_len [B] (cu_q[0] = 0, non-decreasing, cu_q[B] = T when T
    is given, 0 <= q_len <= kv_len <= max_tokens when given) and returns the sequences."""
    cu, kl = _ints(cu_q), _ints(kv_len)
    _require(len(cu) == len(kl) + 1, "cu_q", f"must have B+1 = {len(kl) + 1} entries, got {len(cu)}")
    _require(cu[0] == 0, "cu_q", f"cu_q[0] must be 0, got {cu[0]}")
    if T is not None:
        _require(cu[-1] == T, "cu_q", f"cu_q[B] = {cu[-1]} but there are {T} query tokens")
    seqs = []
    for b, n_kv in enumerate(kl):
        q_len = cu[b + 1] - cu[b]
        _require(q_len >= 0, "cu_q", f"must be non-decreasing at {b}")
        _require(n_kv >= q_len, "kv_len", f"kv_len[{b}] = {n_kv} < q_len = {q_len}")
        if max_tokens is not None:
            _require(n_kv <= max_tokens, "kv_len", f"kv_len[{b}] = {n_kv} > max_blocks * Bs = {max_tokens}")
        seqs.append(Sequence(b, cu[b], q_len, n_kv))
    return seqs


def _check_qb(Qb: int) -> None:
    _require(Qb >= 1 and Qb <= 128 and Qb & (Qb - 1) == 0, "Qb",
             f"must be 1 or a power of two up to 128, got {Qb}")


def _query_blocks_of(seqs: List[Sequence], Qb: int) -> List[QueryBlock]:
    blocks = []
    for s in seqs:
        if s.q_len == 0:
            continue
        last_pos = s.pos0 + s.q_len - 1
        for group in range(s.pos0 // Qb, last_pos // Qb + 1):
            p0, p1 = max(s.pos0, group * Qb), min(last_pos, group * Qb + Qb - 1)
            blocks.append(QueryBlock(s.index, s.q_begin + p0 - s.pos0, s.q_begin + p1 - s.pos0 + 1, p0, p1))
    return blocks


def query_blocks(cu_q, kv_len, Qb: int = 1) -> List[QueryBlock]:
    """The query blocks in the contract's order: sequence by sequence, in position order."""
    _check_qb(Qb)
    return _query_blocks_of(sequences(cu_q, kv_len), Qb)


def count_query_blocks(cu_q, kv_len, Qb: int = 1) -> int:
    """NQ: the number of query blocks (ops::count_query_blocks)."""
    return len(query_blocks(cu_q, kv_len, Qb))


def token_positions(cu_q, kv_len) -> torch.Tensor:
    """pos of every packed query token, int64 [T]: kv_len[b] - q_len[b] + i."""
    seqs = sequences(cu_q, kv_len)
    return torch.tensor([s.position(t) for s in seqs for t in range(s.q_begin, s.q_begin + s.q_len)],
                        dtype=torch.long)


def token_query_block(cu_q, kv_len, Qb: int = 1) -> torch.Tensor:
    """The query block of every packed query token, int32 [T]."""
    blocks = query_blocks(cu_q, kv_len, Qb)
    T = blocks[-1].t_end if blocks else 0
    out = torch.empty(T, dtype=torch.int32)
    for n, qb in enumerate(blocks):
        out[qb.t_begin:qb.t_end] = n
    return out


def _batch(cu_q, kv_len, T: Optional[int], Bs: int, max_blocks: int) -> List[Sequence]:
    _require(Bs >= 1, "Bs", f"must be >= 1, got {Bs}")
    return sequences(cu_q, kv_len, T=T, max_tokens=max_blocks * Bs)


def _batch_query_blocks(seqs: List[Sequence], Qb: int, NQ: Optional[int]) -> List[QueryBlock]:
    _check_qb(Qb)
    blocks = _query_blocks_of(seqs, Qb)
    if NQ is not None:
        _require(NQ == len(blocks), "NQ", f"is {NQ} but cu_q, kv_len and Qb give {len(blocks)} query blocks")
    return blocks


def _check_block_table(block_table: torch.Tensor, seqs: List[Sequence], Bs: int, P: int) -> None:
    """Every entry that can be read (c < ceil(kv_len / Bs)) is a page id in [0, P)."""
    _require(block_table.dim() == 2 and block_table.shape[0] == len(seqs), "block_table",
             f"must be [B][max_blocks] with B = {len(seqs)}, got {tuple(block_table.shape)}")
    for s in seqs:
        for c, page in enumerate(_ints(block_table[s.index, :s.n_blocks(Bs)])):
            _require(0 <= page < P, "block_table", f"block_table[{s.index}][{c}] = {page} is not a page in [0, {P})")


def _slots(block_table: torch.Tensor, seq: Sequence, tokens: torch.Tensor,
           Bs: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """(page, slot) of each cached token position of `seq`: token s of logical block s // Bs
    sits in slot s % Bs of page block_table[b][s // Bs]."""
    pages = block_table[seq.index].long()[tokens // Bs]
    return pages, tokens % Bs


def _valid_tokens(seq: Sequence) -> torch.Tensor:
    """Positions 0 .. kv_len-1: the only slots ever read (slack slots past kv_len are not)."""
    return torch.arange(seq.kv_len, dtype=torch.long)
