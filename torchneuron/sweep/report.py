"""The sweep's report: totals, the most common reasons and fallback ops, and the Markdown table
with one row per model."""

from .pretrained import BF16_ATOL
from .run import ATOL, COLUMNS


def totals(rows):
    """Returns the sweep's counts: built and CPU reference (pass, error, unavailable) apart from
    the device's: loaded, forward/backward pass, mismatches, errors, skipped."""
    count = (lambda col, status: sum(r.get(col) == status for r in rows))
    return {"models": len(rows), "built": sum(bool(r.get("built")) for r in rows),
            "reference_pass": count("reference", "pass"),
            "reference_error": count("reference", "error"),
            "unavailable": count("reference", "unavailable"),
            "loaded": count("load", "pass"),
            "forward_pass": count("forward", "pass"), "backward_pass": count("backward", "pass"),
            "compile_pass": count("compile", "pass"),
            "compile_backward_pass": count("compile_backward", "pass"),
            "pretrained_pass": count("pretrained", "pass"),
            "graphs_compiled": sum(r.get("graphs_compiled", 0) for r in rows),
            "graphs_eager": sum(r.get("graphs_eager", 0) for r in rows),
            "models_with_eager_graphs": sum(r.get("graphs_eager", 0) > 0 for r in rows),
            "mismatch": sum(r["status"] == "mismatch" for r in rows),
            "error": sum(r["status"] == "error" for r in rows),
            "skipped": sum(r["status"] == "skipped" for r in rows),
            "pass": sum(r["status"] == "pass" for r in rows)}


def reference_classes(rows):
    """Returns [(class, models, examples)] of the CPU-reference failures: unavailable packages by
    package, build failures and reference failures by exception type."""
    agg = {}
    for r in rows:
        if r.get("reference") not in ("error", "unavailable"):
            continue
        why = r["reasons"].get("reference", "")
        if r["reference"] == "unavailable":
            key = "unavailable: " + why.split(":")[0]
        else:
            stage = "build" if why.startswith("tiny model could not be built") else "reference"
            text = why.split("raised ", 1)[-1] if stage == "reference" else why.split("CPU: ", 1)[-1]
            key = f"{stage}: {text.split(':')[0].strip()[:60]}"
        agg.setdefault(key, []).append(r["model"])
    return sorted(((k, len(v), v) for k, v in agg.items()), key=lambda t: (-t[1], t[0]))


def top_reasons(rows, n=10):
    """Returns [(reason, models)] for the most common non-pass reasons (first column per model)."""
    agg = {}
    for r in rows:
        if r.get("reference", "pass") != "pass":  # counted apart: reference_classes
            continue
        for column in COLUMNS:
            if r[column] in ("error", "mismatch", "skipped") and column in r["reasons"]:
                reason = r["reasons"][column][:120]
                agg[reason] = agg.get(reason, 0) + 1
                break
    return sorted(agg.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def top_fallbacks(rows, n=20):
    """Returns [(aten op, models using it, calls)] for the n most used fallback ops."""
    agg = {}
    for r in rows:
        for name, calls in r["fallback"].items():
            k, c = agg.get(name, (0, 0))
            agg[name] = (k + 1, c + calls)
    return sorted(((k, m, c) for k, (m, c) in agg.items()), key=lambda t: (-t[1], -t[2], t[0]))[:n]


def _cell(row, column):
    """Returns a Markdown cell: the status, plus the reason for anything not passing."""
    status, reason = row.get(column, "skipped"), row["reasons"].get(column, "")
    if status == "n/a":
        text = f"n/a ({reason})" if reason else status
    else:
        text = f"{status}: {reason[:80]}" if reason and status != "pass" else status
    return text.replace("|", "\\|")


def markdown(rows, elapsed=None, version=None, library="transformers"):
    """Returns the Markdown report: totals, top reasons and fallbacks, one row per model."""
    t = totals(rows)
    lines = [f"# torchneuron {library} sweep", ""]
    if version:
        lines += [f"{library} {version}; tolerance atol = rtol = {ATOL:g} (float32)", ""]
    if elapsed is not None:
        lines += [f"Run time: {elapsed:.1f} s", ""]
    lines += ["CPU reference (the harness: the tiny model built and run on the CPU, before any device "
              "column):", "", "| models | built | reference pass | reference error | unavailable (package) |",
              "| --- | --- | --- | --- | --- |",
              f"| {t['models']} | {t['built']} | {t['reference_pass']} | {t['reference_error']} "
              f"| {t['unavailable']} |", "", "Device (of the models whose CPU reference passed):", "",
              "| loaded | forward pass | backward pass | compile pass | compile backward pass "
              "| from_pretrained bf16 pass | mismatch | error | skipped |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
              f"| {t['loaded']} | {t['forward_pass']} | {t['backward_pass']} "
              f"| {t['compile_pass']} | {t['compile_backward_pass']} | {t['pretrained_pass']} "
              f"| {t['mismatch']} | {t['error']} | {t['skipped']} |", "",
              "from_pretrained bf16: the model saved (safetensors) and loaded with "
              "from_pretrained(dir, device_map=\"neuron\", dtype=torch.bfloat16), its forward "
              f"within atol = rtol = {BF16_ATOL:g} of the CPU's bfloat16 load.", "",
              f"Compiled graphs: {t['graphs_compiled']}; given back to run eagerly: {t['graphs_eager']} "
              f"(in {t['models_with_eager_graphs']} models; the reason is under `graphs_eager` in "
              "each row's reasons).",
              "", "## CPU-reference failures by class", "", "| class | models | examples |",
              "| --- | --- | --- |"]
    lines += [f"| {k.replace('|', chr(92) + '|')} | {n} | {', '.join(v[:6])} |"
              for k, n, v in reference_classes(rows)]
    lines += ["", "## Most common device reasons", "", "| reason | models |", "| --- | --- |"]
    lines += [f"| {r.replace('|', chr(92) + '|')} | {k} |" for r, k in top_reasons(rows)]
    lines += ["", "## Most used fallback ops", "", "| aten op | models | calls |",
              "| --- | --- | --- |"]
    lines += [f"| `{name}` | {m} | {c} |" for name, m, c in top_fallbacks(rows)]
    lines += ["", "## Models", "", "| model | reference | shrink | load | forward | backward | compile "
              "| compile backward | from_pretrained bf16 | fallbacks (op names) | max error | time (s) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        ops = [n.replace("aten::", "") for n in r["fallback"]]
        shown = ", ".join(ops[:8]) + (f", +{len(ops) - 8} more" if len(ops) > 8 else "")
        errs = [e for e in (r["forward_max_err"], r["backward_max_err"]) if e is not None]
        err = f"{max(errs):.2g}" if errs else ""
        shrink = (r.get("strategy") or "").replace("|", "\\|")
        cells = " | ".join([_cell(r, "reference"), shrink] + [_cell(r, c) for c in COLUMNS])
        lines.append(f"| {r['model']} | {cells} | {len(ops)}: {shown} | {err} | {r['time_s']} |")
    return "\n".join(lines) + "\n"
