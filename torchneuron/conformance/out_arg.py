"""The `out=` check of an OpInfo sample: the op writes into a non-contiguous `out=` (every other
element of a wider buffer) on the CPU and on `neuron`; the values written, the strides the
output keeps and the untouched gaps between its elements must agree."""

from .reference import _leaves, _to_device, compare, max_abs_error

OUT_SAMPLES = 3  # samples per entry given the out= check
SENTINEL = 7  # what the buffers hold before the op writes, so unwritten elements show


def _strided_like(t, device):
    """(buffer, view): a buffer twice as wide as `t` in its last dim, filled with SENTINEL, and
    the every-other-element view of `t`'s shape into it (0-dim: a plain tensor, both)."""
    import torch
    if t.dim() == 0:
        buf = torch.full((), SENTINEL, dtype=t.dtype, device=device)
        return buf, buf
    shape = list(t.shape)
    buf = torch.full(shape[:-1] + [2 * shape[-1]], SENTINEL, dtype=t.dtype, device=device)
    return buf, buf[..., ::2]


def _outs(expected, device):
    """(buffers, out argument) shaped like the op's result: one tensor or a tuple of them."""
    pairs = [_strided_like(t, device) for t in _leaves(expected)]
    view = pairs[0][1] if len(pairs) == 1 and not isinstance(expected, (tuple, list)) \
        else tuple(v for _, v in pairs)
    return [b for b, _ in pairs], [v for _, v in pairs], view


def _gaps(bufs):
    """The buffers with the output's elements zeroed: what the op must leave alone."""
    out = []
    for b in bufs:
        g = b.detach().cpu().clone()
        if g.dim():
            g[..., ::2] = 0
        else:
            g.zero_()  # a 0-dim out= is all output
        out.append(g)
    return out


def check_out(op, sample, dtype, host_leaves=frozenset(), place=None):
    """Runs `sample` with a non-contiguous out= on CPU and neuron (inside the context `place`,
    which records the ops it runs); returns (status, detail, err) with status
    pass | mismatch | error | skipped and detail starting 'out=: '.

    The device's out= must keep CPU's shape and strides; the elements between must hold what
    they held before or what CPU's out= left there; the values must be CPU's out= values, CPU's
    functional result or the device's own functional result (whose difference from CPU the
    functional comparison judges). Where CPU's out= is wrong, matching it or the right answer
    both pass: the check is for an out= path the device gets wrong on its own.
    """
    import contextlib
    try:
        inp, args, kwargs = _to_device((sample.input, sample.args, sample.kwargs), "cpu")
        expected = op(inp, *args, **kwargs)
        leaves = _leaves(expected)
        if not leaves or (isinstance(expected, (tuple, list)) and len(leaves) != len(expected)):
            return "skipped", "out=: result is not tensors", None
        if any(t.is_sparse or t.numel() == 0 for t in leaves):
            return "skipped", "out=: empty or sparse result", None
        cpu_bufs, cpu_views, cpu_out = _outs(expected, "cpu")
        op(inp, *args, **kwargs, out=cpu_out)
    except Exception as exc:  # noqa: BLE001
        return "skipped", f"out=: CPU reference raised {type(exc).__name__}", None
    try:
        inp, args, kwargs = _to_device((sample.input, sample.args, sample.kwargs), "neuron",
                                       host_leaves=host_leaves)
        dev_bufs, dev_views, dev_out = _outs(expected, "neuron")
        with place if place is not None else contextlib.nullcontext():
            own = [t.detach().cpu() for t in _leaves(op(inp, *args, **kwargs))]
        with place.fallbacks_only() if place is not None else contextlib.nullcontext():
            op(inp, *args, **kwargs, out=dev_out)
        got_views = [v.detach().cpu() for v in dev_views]
    except Exception as exc:  # noqa: BLE001
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        return "error", f"out=: {type(exc).__name__}: {first}", None
    for c, d in zip(cpu_views, dev_views):
        if c.shape != d.shape or c.stride() != d.stride():
            return ("mismatch", f"out=: result has shape {tuple(d.shape)} strides {d.stride()}, CPU "
                    f"{tuple(c.shape)} {c.stride()}", None)
    # The gaps hold what they held before, or what CPU's out= left there (CPU 2.13's
    # narrow_copy and avg_pool3d write a non-contiguous out= as if it were contiguous; matmul
    # of a vector restrides it): either is CPU's behaviour or the right one.
    untouched = _gaps([b.fill_(SENTINEL) for b in _outs(expected, "cpu")[0]])
    gaps = _gaps(dev_bufs)
    if compare(gaps, untouched, "int64") is not None and compare(gaps, _gaps(cpu_bufs), "int64") is not None:
        return "mismatch", "out=: wrote between the elements of a non-contiguous out=", None
    # The values: CPU's out=, CPU's functional result (CPU 2.13's gelu never writes such an out=)
    # or the device's own functional result, which the functional comparison judges.
    why = compare(got_views, cpu_views, dtype)
    if why is not None and compare(got_views, leaves, dtype) is not None and \
            compare(got_views, own, "int64") is not None:
        return "mismatch", "out=: " + why, max_abs_error(got_views, cpu_views)
    return "pass", "", None


def out_phase(op, samples, probes, dtype_name, host_leaves_of, merge, heartbeat, place=None):
    """Runs check_out on the first OUT_SAMPLES samples of an op that takes out=; merges each
    result with `merge(status, detail, err)`; returns how many samples it compared."""
    if not getattr(op, "supports_out", False):
        return 0
    compared = 0
    for sample, probe in list(zip(samples, probes))[:OUT_SAMPLES]:
        heartbeat()
        status, detail, err = check_out(op, sample, dtype_name, host_leaves_of(sample, probe), place)
        compared += status != "skipped"
        if status != "skipped":
            merge(status, detail, err)
    return compared
