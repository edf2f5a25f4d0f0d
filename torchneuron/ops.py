"""Op coverage of the neuron device, read from the dispatcher's registration table.

    python -m torchneuron.ops                          totals per placement and per family
    python -m torchneuron.ops --markdown PATH          the per-op table (docs/op-coverage.md)
    python -m torchneuron.ops --markdown PATH --all    also ops that are only decomposed or unsupported

The registrations in csrc/aten are the one source of truth: nothing here is kept by hand."""

import argparse
import collections
import os
import re
import sys

import torch

import torchneuron  # noqa: F401  (registers the neuron kernels with the dispatcher)

# Where a call of an op overload runs on neuron. A row lists its overloads' placements in this order and the op
# counts under the first: `exp`, which ATen writes as a call of `exp.out`, is a fallback if `exp.out` is.
PLACEMENTS = {
    "native": "own kernel, run as a command on the device queue",
    "view": "new metadata over the same storage; nothing runs",
    "composite": "composed on the host of native neuron ops (csrc/aten/ops/composite_ops.cpp)",
    "fallback": "no neuron kernel: copied to the CPU, run by ATen, copied back (counted, warned once)",
    "decomposed": "no neuron kernel; ATen decomposes it into other ops, each placed as its own row says",
    "unsupported": "no kernel for neuron or the CPU (other backends' ops, sparse or quantized layouts)",
}
LISTED = {"native", "view", "composite", "fallback"}  # rows shown without --all have one of these

# The table's sections, in order (ops of other namespaces follow), and the patterns that put an
# ATen op in one: searched in its name in this order, the first match wins, no match is the first.
FAMILIES = ("pointwise and other", "activations", "reductions", "matrix products", "linear algebra", "fft",
            "convolution", "pooling", "normalization", "attention", "losses", "indexing and scatter",
            "sorting and selection", "views and shape", "factories and memory", "random", "recurrent",
            "vision and resampling", "foreach and optimizers", "sparse and nested", "quantization", "backend-specific")
FAMILY_RULES = tuple((family, re.compile(pattern)) for family, pattern in (
    ("sparse and nested", r"sparse|nested|jagged|coo|csr|csc|bsr|bsc|^_?(values|indices|coalesced?|is_coalesced)$"
     r"|^(crow|ccol|col|row)_indices|^_?to_dense|^hspmm|^smm$"),
    ("quantization", r"quant|^q_|^int_repr|^_make_per|^_empty_(affine|per_channel)|int[48]pack|^_scaled_mm|^_int_mm"),
    ("backend-specific", r"^_?(cudnn|miopen|mkldnn|mps|nnpack|fbgemm|cufft|cslt|use_cudnn)|^to_mkldnn|_for_cpu"),
    ("foreach and optimizers", r"^_foreach_|^_fused_(adam|adamw|sgd|adagrad)$|^_amp_"),
    ("indexing and scatter", r"^_?embedding"),
    ("fft", r"fft|^i?stft$"),
    ("linear algebra", r"^_?linalg_|cholesky|^_?lu_|^lu$|triangular_solve|geqrf|ormqr|orgqr|^qr$|^svd$|^_?slogdet"
     r"|^_?det$|^logdet|^inverse|^pinverse|^matrix_(power|exp)"),
    ("matrix products", r"mm$|mm_|^(dot|vdot|mv|addmv|addr|outer|ger|inner|kron|matmul|einsum|tensordot|bilinear"
     r"|linear|chain_matmul|_trilinear|cross)$|^_?linear_backward|^_?cdist|^_euclidean_dist|^_?pdist"),
    ("attention", r"attention|scaled_dot_product|^_flash|^_efficient|multi_head|transformer|rescale_qkv|^_fused_sdp"),
    ("convolution", r"conv(olution|_|\d|$)|^_?slow_conv|^thnn_conv|^im2col|^col2im"),
    ("pooling", r"pool"),
    ("reductions", r"^(nansum|sum|mean|nanmean|prod|amax|amin|_?aminmax|max|min|argmax|argmin|all|any|count_nonzero"
     r"|logsumexp|norm|frobenius_norm|nuclear_norm|trace|equal|allclose|dist|histc|bincount)$"
     r"|^_?cum|^_?logcumsumexp|^_sum|^sum_to|^_?std(_|$)|^_?var(_|$)|^_?histogram"),
    ("normalization", r"norm($|_)"),
    ("losses", r"loss|^nll|^_?ctc|^binary_cross_entropy|^cross_entropy|^kl_div"),
    ("activations", r"relu|elu$|elu_|gelu|silu|mish|sigmoid|softplus|hardtanh|hardswish|shrink|^threshold|^glu|prelu"
     r"|^tanh_backward|softmax"),
    ("random", r"^rand|^normal|^uniform|^bernoulli|^multinomial|^poisson$|^binomial|^_standard_gamma"
     r"|^_sample_dirichlet|^_dirichlet_grad|^exponential|^geometric|^cauchy|^log_normal|dropout"),
    ("views and shape", r"view|^as_strided|^_?reshape|^expand|squeeze|^permute|^transpose|^t$|^narrow|^select|^slice"
     r"|split|^unbind|^chunk|^diag|^_?flatten|^unflatten|^unfold|^move(dim|axis)|^swap|^_?cat$|^concat|^_?stack$"
     r"|^[hvd]stack|^flip|^roll|^rot90|^tril$|^triu$|^repeat|^tile|^block_diag|^broadcast|^atleast|^(column|row)_stack"
     r"|^ravel|^numpy_T|^m[TH]$|^matrix_H|^adjoint|^real$|^imag$|^_?conj|^_neg_view|^resolve|^complex$|^polar$"),
    ("indexing and scatter", r"index|gather|scatter|^take|^put$|^masked_|nonzero|^searchsorted|^bucketize"),
    ("sorting and selection", r"sort|topk|kthvalue|median|^mode$|unique|^isin$"),
    ("recurrent", r"lstm|gru|^rnn_|^_thnn_fused|pack_padded|pad_packed"),
    ("vision and resampling", r"upsample|grid_sampler|affine_grid|pad|pixel_(un)?shuffle|channel_shuffle"),
    ("factories and memory", r"^(_?empty|zero|ones|full|eye|arange|range|linspace|logspace|scalar_tensor"
     r"|tri[lu]_indices|from_file|clone|fill|_?copy(_|$)|_to_copy|resize|_resize_output|set|lift|detach|alias"
     r"|_?pin_memory|is_pinned|_local_scalar_dense|new_|_has_compatible|_efficientzerotensor|contiguous|to$)|_window$"),
))
_TORCH_DIR = os.path.dirname(torch.__file__)
_has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key


def registration_file(op):
    """Returns the source file that registered `op`'s neuron (PrivateUse1) kernel, or ''."""
    match = re.search(r"^PrivateUse1: registered at (.+?):\d+\b", torch._C._dispatch_dump(op), re.MULTILINE)
    return match.group(1) if match else ""


def _is_view(op):
    name, _, overload = op.partition(".")
    try:
        schema = torch._C._get_schema(name, overload)
    except RuntimeError:  # an implementation registered without a schema
        return False
    return any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


def placement(op):
    """Returns where a full op name ('aten::add.Tensor') runs on neuron: one of PLACEMENTS."""
    path = registration_file(op) if _has_kernel(op, "PrivateUse1") else None
    # torch registers a few PrivateUse1 kernels itself (c10d's collectives): those are not ours.
    if path is not None and "torch/csrc/" not in path and not path.startswith(_TORCH_DIR):
        if os.path.splitext(os.path.basename(path))[0] == "composite_ops":
            return "composite"
        return "view" if _is_view(op) else "native"
    composites = ("CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")
    if any(_has_kernel(op, key) for key in composites):
        return "decomposed"
    return "fallback" if _has_kernel(op, "CPU") else "unsupported"


def family(namespace, name):
    """Returns the section of the coverage table an op belongs to."""
    if namespace != "aten":
        return f"{namespace} namespace"
    return next((section for section, pattern in FAMILY_RULES if pattern.search(name)), FAMILIES[0])


def coverage():
    """Returns {(namespace, family): {op: {overload: placement}}}: all ATen ops, and ops torchneuron adds."""
    table = collections.defaultdict(lambda: collections.defaultdict(dict))
    for op in sorted(torch._C._dispatch_get_all_op_names()):
        namespace, _, full = op.partition("::")
        where = placement(op)
        if namespace != "aten" and where not in ("native", "view", "composite"):
            continue
        name, _, overload = full.partition(".")
        # add, add_ and add.out share a row (labels default, _, out); dunder ops keep their names.
        group = name[:-1] if name.endswith("_") and not name.endswith("__") else name
        label = ("_" + ("." if overload else "") if name != group else "") + overload
        table[(namespace, family(namespace, group))][group][label or "default"] = where
    order = {name: i for i, name in enumerate(FAMILIES)}  # ATen's families first, in FAMILIES order
    return dict(sorted(table.items(), key=lambda item: (item[0][0] != "aten", order.get(item[0][1], 0), item[0])))


def _placements_of(overloads):
    return [p for p in PLACEMENTS if p in overloads.values()]


def totals(table):
    """Returns {placement: [ops, overloads]}; an op counts under the first placement its row shows."""
    counts = {p: [0, 0] for p in PLACEMENTS}
    for ops in table.values():
        for overloads in ops.values():
            counts[_placements_of(overloads)[0]][0] += 1
            for where in overloads.values():
                counts[where][1] += 1
    return counts


def summary(table):
    """Returns the plain-text summary: totals per placement, then op counts per family."""
    lines = [f"op coverage of the neuron device (torch {torch.__version__})", ""]
    lines.append(f"{'placement':<12}{'ops':>6}{'overloads':>11}  meaning")
    lines += [f"{p:<12}{ops:>6}{n:>11}  {PLACEMENTS[p]}" for p, (ops, n) in totals(table).items()]
    lines += ["", f"{'ops per family':<28}" + "".join(f"{p:>12}" for p in PLACEMENTS)]
    for key, ops in table.items():
        counts = totals({key: ops})
        lines.append(f"{key[1]:<28}" + "".join(f"{counts[p][0]:>12}" for p in PLACEMENTS))
    return "\n".join(lines)


def _row(op, overloads):
    placements = _placements_of(overloads)
    by_placement = {p: ", ".join(f"`{label}`" for label, where in overloads.items() if where == p) for p in placements}
    detail = by_placement[placements[0]] if len(placements) == 1 else "; ".join(
        f"{p}: {labels}" for p, labels in by_placement.items())
    return f"| `{op}` | {', '.join(placements)} | {detail} |"


def markdown(table, include_all=False):
    """Returns the Markdown coverage page: totals, then one table per family."""
    lines = [
        "# Op coverage",
        "",
        f"Generated from the dispatcher's registrations (torch {torch.__version__}) by "
        "`python -m torchneuron.ops --markdown docs/op-coverage.md`; do not edit by hand.",
        "",
        "A native op can still take the counted CPU fallback for a dtype or an argument its kernel does not "
        "cover; `torchneuron.fallback_report()` lists what ran on the CPU in a process.",
        "",
        "| placement | ops | overloads | meaning |",
        "| --- | ---: | ---: | --- |",
        *(f"| {p} | {ops} | {n} | {PLACEMENTS[p]} |" for p, (ops, n) in totals(table).items()),
    ]
    if not include_all:
        lines += ["", "Ops that are only decomposed or unsupported are counted above; `--all` lists them too."]
    for key, ops in table.items():
        rows = [_row(op, overloads) for op, overloads in sorted(ops.items())
                if include_all or LISTED & set(overloads.values())]
        if rows:
            lines += ["", f"## {key[1]}", "", "| op | placement | overloads |", "| --- | --- | --- |", *rows]
    return "\n".join(lines) + "\n"


def main(argv=None):
    """Prints the coverage summary; with --markdown PATH also writes the per-op table there."""
    parser = argparse.ArgumentParser(prog="python -m torchneuron.ops", description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", metavar="PATH", help="write the per-op Markdown table to PATH")
    parser.add_argument("--all", action="store_true", help="also list ops that are only decomposed or unsupported")
    args = parser.parse_args(argv)
    table = coverage()
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(markdown(table, include_all=args.all))
        print(f"wrote {args.markdown}")
    print(summary(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
