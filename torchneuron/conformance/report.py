"""A conformance run's report: totals by status, the pass rate and native share, the most
frequent fallback ops, the Markdown summary, and the baseline passes a run lost."""


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
              "", "## Most frequent fallback ops", "", "| aten op | entries | calls |",
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
