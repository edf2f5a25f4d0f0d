"""A conformance run's report: totals by status, the pass rate and native share, the most
frequent fallback ops, failures by category and class, the Markdown summary, and the baseline
passes a run lost."""

import re


def totals(entries):
    """Returns counts by status plus pass rate and zero-fallback share of run entries."""
    counts = {s: 0 for s in ("pass", "mismatch", "error", "skipped")}
    for e in entries:
        counts[e["status"]] += 1
    ran = [e for e in entries if e["status"] in ("pass", "mismatch")]
    tested = len(entries) - counts["skipped"]
    counts["total"] = len(entries)
    counts["pass_rate"] = round(counts["pass"] / tested, 4) if tested else None
    counts["zero_fallback_share"] = (
        round(sum(not e["fallback"] for e in ran) / len(ran), 4) if ran else None)
    return counts


def totals_by_dtype(entries):
    """Returns {dtype: totals()} in the order the dtypes first appear."""
    groups = {}
    for e in entries:
        groups.setdefault(e["dtype"], []).append(e)
    return {d: totals(group) for d, group in groups.items()}


# A failing entry's category, from its status and error text: first match wins.
_CATEGORIES = [
    ("crash or timeout", re.compile(r"^(worker died|timeout after)")),
    ("missing kernel", re.compile(r"do not handle dtype|not implemented for|NotImplementedError|"
                                  r"no kernel|could not run|not supported on neuron|"
                                  r"does not support|unsupported dtype", re.I)),
]


def failure_category(entry):
    """'wrong answer' (a mismatch), 'missing kernel', 'crash or timeout' or 'error'."""
    if entry["status"] == "mismatch":
        return "wrong answer"
    for name, pattern in _CATEGORIES:
        if pattern.search(entry.get("detail", "")):
            return name
    return "error"


def _failure_class(entry):
    """An error text with its numbers, shapes and quoted names blurred, so like failures group."""
    text = entry.get("detail", "")
    text = re.sub(r"\[[^\]]*\]|\([^)]*\)", "[...]", text)
    text = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", text)
    return text[:110]


def failure_classes(entries, n=15):
    """Returns [(category, class text, entries, [example 'op dtype'])], most frequent first."""
    agg = {}
    for e in entries:
        if e["status"] not in ("mismatch", "error"):
            continue
        key = (failure_category(e), _failure_class(e))
        agg.setdefault(key, []).append(f"{e['op']} {e['dtype']}")
    rows = sorted(agg.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return [(cat, text, len(ex), ex[:4]) for (cat, text), ex in rows[:n]]


def _pct(x):
    return "n/a" if x is None else f"{100 * x:.1f}%"


def dtype_table(entries):
    """Markdown rows: per dtype, entries by status, pass rate and native share."""
    lines = ["| dtype | pass | mismatch | error | skipped | pass rate | native share |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for d, t in list(totals_by_dtype(entries).items()) + [("all", totals(entries))]:
        lines.append(f"| {d} | {t['pass']} | {t['mismatch']} | {t['error']} | {t['skipped']} | "
                     f"{_pct(t['pass_rate'])} | {_pct(t['zero_fallback_share'])} |")
    return lines


def suite_of(entry):
    """'OpInfo', 'module_db' or 'optim_db': where an entry comes from."""
    op = entry["op"]
    return "module_db" if op.startswith("module:") else "optim_db" if op.startswith("optim:") else "OpInfo"


def suite_table(entries):
    """Markdown rows: per suite (OpInfo, module_db, optim_db), entries by status, pass rate and
    native share."""
    groups = {}
    for e in entries:
        groups.setdefault(suite_of(e), []).append(e)
    lines = ["| suite | pass | mismatch | error | skipped | pass rate | native share |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, group in groups.items():
        t = totals(group)
        lines.append(f"| {name} | {t['pass']} | {t['mismatch']} | {t['error']} | {t['skipped']} | "
                     f"{_pct(t['pass_rate'])} | {_pct(t['zero_fallback_share'])} |")
    return lines


def top_fallbacks(entries, n=20):
    """Returns [(aten op, entries using it, calls)] for the n most frequent fallback ops."""
    agg = {}
    for e in entries:
        for name, calls in e.get("fallback", {}).items():
            k, c = agg.get(name, (0, 0))
            agg[name] = (k + 1, c + calls)
    return sorted(((k, v[0], v[1]) for k, v in agg.items()), key=lambda r: (-r[1], -r[2], r[0]))[:n]


def markdown(entries, elapsed=None):
    """Returns the Markdown summary of a run."""
    t = totals(entries)
    lines = ["# torchneuron OpInfo conformance", ""]
    if elapsed is not None:
        lines += [f"Run time: {elapsed:.1f} s", ""]
    lines += ["| status | entries |", "| --- | --- |"]
    lines += [f"| {s} | {t[s]} |" for s in ("pass", "mismatch", "error", "skipped", "total")]
    rate = "n/a" if t["pass_rate"] is None else f"{100 * t['pass_rate']:.1f}%"
    share = "n/a" if t["zero_fallback_share"] is None else f"{100 * t['zero_fallback_share']:.1f}%"
    arbitrated = [e for e in entries if e.get("float64_arbitrated") and e["status"] == "pass"]
    lines += ["", f"Pass rate (of entries not skipped): {rate}",
              f"Native share (entries that ran, pass or mismatch, with zero CPU fallbacks): {share}",
              f"Entries passed on a float64 reference (device and CPU differ, the device matches "
              f"float64): {len(arbitrated)}"
              + (" (" + ", ".join(f"{e['op']} {e['dtype']}" for e in arbitrated[:10]) + ")"
                 if arbitrated else ""),
              "", "## By suite", ""] + suite_table(entries) + ["", "## By dtype", ""] + dtype_table(entries) + [
              "", "## Failures by class", "", "| category | class | entries | e.g. |",
              "| --- | --- | --- | --- |"]
    for cat, text, count, examples in failure_classes(entries):
        text = text.replace("|", "\\|")
        lines.append(f"| {cat} | {text} | {count} | {', '.join(examples)} |")
    lines += ["", "## Most frequent fallback ops", "", "| aten op | entries | calls |",
              "| --- | --- | --- |"]
    lines += [f"| `{n}` | {k} | {c} |" for n, k, c in top_fallbacks(entries)]
    bad = [e for e in entries if e["status"] in ("mismatch", "error")]
    bad.sort(key=lambda e: (e["status"] != "mismatch", -(e.get("max_abs_err") or 0.0), e["op"]))
    lines += ["", "## Worst mismatches and errors", "", "| op | dtype | status | max abs err | detail |",
              "| --- | --- | --- | --- | --- |"]
    for e in bad[:20]:
        err = "" if e.get("max_abs_err") is None else f"{e['max_abs_err']:.3g}"
        detail = e["detail"].replace("|", "\\|")[:160]
        lines.append(f"| {e['op']} | {e['dtype']} | {e['status']} | {err} | {detail} |")
    return "\n".join(lines) + "\n"


def regressions(entries, baseline):
    """Returns ['op|dtype: was pass, now X'] for baseline passes that no longer pass in this run."""
    now = {f"{e['op']}|{e['dtype']}": e for e in entries}
    out = []
    for key, status in sorted(baseline.items()):
        if status == "pass" and key in now and now[key]["status"] != "pass":
            e = now[key]
            out.append(f"{key}: was pass, now {e['status']} {e['detail']}".rstrip())
    return out


DOC_BEGIN = "<!-- opinfo-record:begin -->"
DOC_END = "<!-- opinfo-record:end -->"


def doc_record(entries, elapsed=None):
    """The record `--write-doc` puts between the markers of docs/conformance.md: per dtype (and
    per suite: OpInfo, modules, optimizers) counts, pass rate and native share, failure classes
    and the most frequent fallbacks."""
    import datetime
    t = totals(entries)
    when = datetime.date.today().isoformat()
    run = f", {elapsed / 60:.0f} min of run time on 2 workers" if elapsed else ""
    lines = [f"Generated by `python -m torchneuron.conformance ... --write-doc` ({when}{run}): "
             f"{t['total']} entries, {t['pass']} pass, {t['mismatch']} mismatch, {t['error']} error, "
             f"{t['skipped']} skipped; {_pct(t['pass_rate'])} of the entries that ran pass, "
             f"{_pct(t['zero_fallback_share'])} with no CPU fallback.", ""]
    lines += suite_table(entries) + [""] + dtype_table(entries)
    classes = failure_classes(entries, n=20)
    if classes:
        lines += ["", "| category | failure class | entries | e.g. |", "| --- | --- | --- | --- |"]
        for cat, text, count, examples in classes:
            text = text.replace("|", "\\|")
            lines.append(f"| {cat} | {text} | {count} | {', '.join(examples)} |")
    lines += ["", "| most frequent fallback op | entries | calls |", "| --- | --- | --- |"]
    lines += [f"| `{n}` | {k} | {c} |" for n, k, c in top_fallbacks(entries, 12)]
    return "\n".join(lines) + "\n"
