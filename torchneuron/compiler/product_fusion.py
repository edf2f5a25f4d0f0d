"""Orders a native program's steps so that kernels run fused with matrix products: a kernel that
first reads an mm's or bmm's product runs as its epilogue, on each block of the product's rows
while it is in cache, and a kernel that writes a product's first operand runs as its prologue,
each block of rows right before the product reads it. Steps are (kind, payload, values read,
values written), as native_program.py builds them."""

from __future__ import annotations


_VIEWS = {("aten::view", ""), ("aten::_unsafe_view", "")}


# Ops that only make a new view of their first argument: moving one moves no data.
_METADATA = _VIEWS | {("aten::permute", ""), ("aten::t", ""), ("aten::expand", ""), ("aten::unsqueeze", ""),
                      ("aten::squeeze", "dim"), ("aten::squeeze", "dims")}
# Views that keep a contiguous tensor contiguous (an expand that broadcasts does not, and the run
# time then launches the kernel alone).
_RESHAPES = _VIEWS | {("aten::expand", ""), ("aten::unsqueeze", ""), ("aten::squeeze", "dim"), ("aten::squeeze", "dims")}
_PRODUCTS = (("aten::mm", ""), ("aten::bmm", ""))


def _product_chain(steps, i):
    """(product and its views, view steps making them, first later step reading any of them or
    len(steps)) for the mm or bmm at step i."""
    chain, views, j = set(steps[i][3]), [], i + 1
    while j < len(steps):
        kind, payload, reads, writes = steps[j]
        if kind == "op" and payload[:2] in _VIEWS and reads and reads[0] in chain:
            chain.update(writes)
            views.append(j)
        elif any(v in chain for v in reads):
            break
        j += 1
    return chain, views, j


def _first_writes(steps) -> dict:
    """Value id -> the first step that writes it."""
    written_at = {}
    for position, step in enumerate(steps):
        for v in step[3]:
            written_at.setdefault(v, position)
    return written_at


def _runs_on_row_blocks(step, column_kernels) -> bool:
    """Whether a step is a kernel that can run block by block with a product's rows (as their
    epilogue or their prologue): a column kernel finishes no row before the last."""
    return step[0] == "kernel" and step[1][0] not in column_kernels


def _hoist_product_readers(steps, column_kernels):
    """Moves a kernel that is the first reader of an mm's or bmm's product up to right after
    it, with the views it reads, when everything else it reads exists by then (views of earlier
    values go before the mm): it then runs as the product's epilogue. AOTAutograd's backward
    puts the weight-gradient mm between an input-gradient mm and the activation backward that
    reads it. A moved kernel's outputs get buffers of their own: the memory plan assumed them
    written later, and the input they were to overwrite may now still be read."""
    written_at = _first_writes(steps)
    i = 0
    while i < len(steps):
        kind, payload = steps[i][:2]
        if kind != "op" or payload[:2] not in _PRODUCTS or payload[4]:  # [4]: folded
            i += 1
            continue
        chain, views, j = _product_chain(steps, i)
        if j == len(steps) or not _runs_on_row_blocks(steps[j], column_kernels) or views == list(range(i + 1, j)):
            i += 1  # nothing to read it, not a kernel that could, or already right after the mm
            continue
        kernel = steps[j]
        made_early = (lambda r: r in chain or written_at.get(r) is None or written_at[r] < i)
        if sum(v in chain for v in kernel[2]) != 1 or not all(made_early(r) for s in views for r in steps[s][2]):
            i += 1  # read twice (no epilogue then), or a view's size is computed later
            continue
        before, ok = [], True  # metadata steps between i and j making the kernel's other inputs
        for v in kernel[2]:
            at = written_at.get(v)
            if v in chain or at is None or at < i:
                continue
            step = steps[at]
            if i < at < j and step[0] == "op" and step[1][:2] in _METADATA and all(made_early(r) and r not in chain
                                                                                for r in step[2]):
                before.append(at)
            else:
                ok = False
                break
        if not ok:
            i += 1
            continue
        entry, reads, outputs, static_shape, reduce_dims = kernel[1]
        fresh = [(value, dtype, layout, -1, -1, form) for value, dtype, layout, _, _, form in outputs]
        moved = (entry, reads, fresh, static_shape, reduce_dims)
        before = sorted(set(before))
        rest = [s for s in range(i + 1, j) if s not in views and s not in before]
        order = list(range(i)) + before + [i] + views + [j] + rest + list(range(j + 1, len(steps)))
        steps = [steps[s] if s != j else (kernel[0], moved, kernel[2], kernel[3]) for s in order]
        written_at = _first_writes(steps)
        i = order.index(i) + 1
    return steps


def _product_epilogues(steps, column_kernels) -> list[tuple[int, int, int]]:
    """(mm step, kernel step, kernel input) for each kernel that reads an mm's or bmm's product
    right after it, with only views of the product in between: the kernel then runs as the
    mm's epilogue (NativeProgram.fuse_product_epilogue)."""
    found = []
    for i, (kind, payload, _, _) in enumerate(steps):
        if kind != "op" or payload[:2] not in _PRODUCTS or payload[4]:  # [4]: folded
            continue
        chain, views, j = _product_chain(steps, i)
        if j == len(steps) or not _runs_on_row_blocks(steps[j], column_kernels) or views != list(range(i + 1, j)):
            continue
        reads = [n for n, v in enumerate(steps[j][1][1]) if v in chain]
        if len(reads) == 1:
            found.append((i, j, reads[0]))
    return found


def _operand_kernel(steps, written_at, value):
    """The step of the kernel whose output `value` is, through views that keep its memory order,
    or None."""
    at = written_at.get(value)
    # Not through transposes: the kernel writes rows, and a transposed operand's rows are columns.
    while at is not None and steps[at][0] == "op" and steps[at][1][:2] in _RESHAPES and steps[at][2]:
        at = written_at.get(steps[at][2][0])
    return at if at is not None and steps[at][0] == "kernel" else None


def _hoist_products_to_prologues(steps, column_kernels):
    """Moves an mm or bmm whose first operand a kernel writes up to right after that kernel,
    with the metadata steps making its operands, when everything else it reads exists by then:
    the kernel can then run as its prologue. The planner's order puts a graph's independent
    kernels first (the RMS norms of queries and keys, say) and their products after all of
    them. Moving an op only makes its fresh output exist earlier; the kernels it moves past are
    not moved. A move is kept only if more kernels fuse with products after it: the epilogue
    kernel of the product moved, or of another, may no longer be able to follow it."""
    fused, i = _fused_with_products(steps, column_kernels), 0
    while i < len(steps):
        kind, payload, reads = steps[i][:3]
        if kind != "op" or payload[:2] not in _PRODUCTS or payload[4] or not reads:  # [4]: folded
            i += 1
            continue
        written_at = _first_writes(steps)
        k = _operand_kernel(steps, written_at, reads[0])
        if k is None or k > i or not _runs_on_row_blocks(steps[k], column_kernels):
            i += 1
            continue
        # The metadata steps after the kernel that make the product's operands, and whether all
        # else it reads comes from before the kernel.
        needed, pending, movable = set(), list(reads), True
        while pending and movable:
            at = written_at.get(pending.pop())
            if at is None or at <= k or at in needed:
                continue
            if steps[at][0] == "op" and steps[at][1][:2] in _METADATA or steps[at][0] == "int":
                needed.add(at)
                pending.extend(steps[at][2])
            else:
                movable = False
        between = range(k + 1, i)
        if not movable or all(s in needed for s in between):
            i += 1
            continue
        rest = [s for s in between if s not in needed]
        order = list(range(k + 1)) + sorted(needed) + [i] + rest + list(range(i + 1, len(steps)))
        moved = [steps[s] for s in order]
        fused_if_moved = _fused_with_products(moved, column_kernels)
        if fused_if_moved > fused:
            steps, fused = moved, fused_if_moved
        i += 1
    return steps


def _fused_with_products(steps, column_kernels) -> int:
    """How many kernels run as epilogues or prologues of products in this order of steps."""
    steps = _hoist_product_readers(steps, column_kernels)
    epilogues = _product_epilogues(steps, column_kernels)
    return len(epilogues) + len(_product_prologues(steps, epilogues, column_kernels))


def _product_prologues(steps, epilogues, column_kernels) -> list[tuple[int, int]]:
    """(kernel step, mm step) for each kernel whose output, through views that keep its memory
    order, is the first operand of a later mm or bmm with only metadata steps in between (they
    neither read nor write data): the kernel then writes each block of the operand's rows as the
    product's prologue (NativeProgram.fuse_product_prologue). A kernel that is an epilogue stays
    one."""
    epilogue_kernels = {j for _, j, _ in epilogues}
    written_at = _first_writes(steps)
    found, taken = [], set()
    for i, (kind, payload, reads, _) in enumerate(steps):
        if kind != "op" or payload[:2] not in _PRODUCTS or payload[4] or not reads:  # [4]: folded
            continue
        at = _operand_kernel(steps, written_at, reads[0])
        if at is None or not _runs_on_row_blocks(steps[at], column_kernels) or at in epilogue_kernels or at in taken:
            continue
        if all(steps[s][0] == "int" or (steps[s][0] == "op" and steps[s][1][:2] in _METADATA) for s in range(at + 1, i)):
            found.append((at, i))
            taken.add(at)
    return found
