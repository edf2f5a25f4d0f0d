"""The record of PyTorch's own device-generic test files run on neuron and on CPU.

`python -m torchneuron.conformance.upstream RESULTS [--write docs/conformance.md]` reads the
JUnit XML files a run left in RESULTS (`<file>.neuron.xml` and `<file>.cpu.xml`, one pair per test
file, as the runner in docs/conformance.md writes them), pairs each neuron test with its CPU twin,
and prints (or writes between the markers of the page) per file pass / fail / skip on both devices
and the neuron-only failures grouped by error class, each with its reason.
"""

import argparse
import collections
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

BEGIN = "<!-- upstream-record:begin -->"
END = "<!-- upstream-record:end -->"

# Class names carry the device: TestFooPRIVATEUSE1 / TestFooNEURON on neuron, TestFooCPU on CPU.
_CLASS_DEVICE = re.compile(r"(PRIVATEUSE1|NEURON|CPU)$")

# Why a neuron-only failure class remains: (pattern on the error class, pattern on the test name,
# reason). First match wins; each was read from the failing tests of a run, not guessed.
REASONS = [
    (r"_ConvBackend\.Overrideable", r"",
     "not settable by a backend: PyTorch 2.13's _select_conv_backend returns the Slow* backends only for "
     "CPU and CUDA inputs (is_cpu() || is_cuda()) and Overrideable for any other device without cuDNN / "
     "MIOpen / oneDNN / MPS, with no hook; Overrideable is how convolution_overrideable reaches neuron's "
     "native convolution. The test asserts CPU's names (its backward and gradient checks then do not run)"),
    (r"'Sparse(neuron|PrivateUse1)'", r"",
     "a sparse op that neither neuron's sparse registrations nor the CPU fallback take"),
    (r"values for attribute 'shape' do not match", r"test_embedding_backward",
     "not a wrong answer: the second sparse gradient is added by the CPU fallback, whose copy leaves the "
     "values contiguous, so CPU's sparse add merges equal indices where CPU's own run (expanded values) "
     "appends them; the two gradients are equal after coalesce(). The test compares the uncoalesced form"),
    (r"Quantized(neuron|PrivateUse1)|quantized", r"",
     "quantized tensors have no neuron kernels"),
    (r"handle at most N dimensions", r"",
     "neuron kernels take at most 16 dimensions"),
    (r"do not handle dtype (UIntN|ComplexHalf)|ComplexHalf|complexN", r"complex32",
     "complex32 (ComplexHalf) has no neuron kernels"),
    (r"AcceleratorError: neuron:N: '[^']+' failed on the device", r"",
     "an index op whose range check stays on the device (embedding, embedding_bag, index_select, gather, "
     "scatter*, index_add / index_copy / index_fill, loss targets; indexing and take / put check at the "
     "call) raised at the next synchronization; here an earlier test's deliberately bad index"),
    (r"^RuntimeError: Comparing", r"test_basic_advanced_combined",
     "the deferred device error of the test before it (test_advancedindex's deliberately bad index, "
     "which that test exempts on CUDA as a device assert), raised at this test's first sync"),
    (r"RuntimeError not raised", r"test_embedding_bag_out_of_bounds_idx",
     "by design, a device-side check as CUDA's are: embedding_bag checks device-resident indices on "
     "the device, so the bad index raises torch.AcceleratorError (a RuntimeError) at the next "
     "synchronization, not at the call where the test expects CPU's error; the test skips CUDA (\"no "
     "out-of-bounds check on CUDA for perf.\"). Every call of the test raises at a synchronization"),
    (r"RuntimeError not raised|IndexError not raised", r"out_of_bounds|advancedindex|empty_ndim_index",
     "an index op whose range check stays on the device (embedding, embedding_bag, index_select, gather, "
     "scatter*, index_add / index_copy / index_fill, loss targets) raises at the next synchronization, "
     "as on CUDA, which these tests exempt where they were written for it"),
    (r"Scalars are not close", r"test_forward_nn_CrossEntropyLoss.*float16",
     "not a wrong answer: neuron's loss equals CPU's on the same inputs; the test's float16 reference "
     "differs from both, and neuron's generator draws other inputs than CPU's"),
    (r"False is not true", r"test_memory_format",
     "memory format: BatchNorm, GroupNorm, Conv2d / ConvTranspose2d and the padding modules return "
     "contiguous outputs (or gradients) where CPU keeps channels_last"),
    (r"derivative for aten::_scaled_dot_product_fused_attention_overrideable_backward", r"",
     "fused attention has no double backward (CPU's math attention is differentiable twice)"),
    (r"Tensor-likes are not close", r"EmbeddingBag_per_sample_weights.*float16",
     "not a wrong answer: embedding_bag equals CPU's bit for bit on equal inputs; the test's float16 "
     "reference rounds each product, and neuron's generator draws other per-sample weights (CPU fails "
     "this comparison for 6 % of random weights)"),
    (r"None mismatch: None is not <class 'torch\.\w+Storage'>", r"",
     "legacy typed-storage classes: for a PrivateUse1 tensor PyTorch looks up torch.neuron.FloatStorage "
     "(...), which neuron does not define, so storage_type() is None; the test expects CPU's "
     "torch.FloatStorage for every device but CUDA, which would name a CPU class for neuron memory"),
    (r"map_ is only implemented on CPU tensors|mapN_ is only implemented on CPU tensors", r"",
     "Tensor.map_ / map2_ take CPU tensors only, on every device but the CPU (CUDA's too)"),
    (r"more than one element of the written-to tensor", r"(index_fill|index_put|masked_fill)_mem_overlap",
     "an in-place write into an expanded (self-overlapping) tensor: CPU warns that this is deprecated and "
     "writes anyway, neuron refuses it with CPU's overlap error; the test expects the warning"),
    (r"RuntimeError not raised", r"test_copy_mem_overlap",
     "copy_ between partially overlapping neuron tensors reads the source through a temporary and "
     "succeeds (the right values), where CPU refuses it"),
    (r"lshift|rshift", r"test_shift_mem_overlap",
     "an in-place shift of a float tensor runs on the CPU fallback, whose copies no longer overlap, so "
     "CPU's dtype error comes first instead of its overlap error"),
    (r"", r"mem_overlap",
     "an out= or in-place write that overlaps its input is not rejected (or rejected with another "
     "message) by this op"),
    (r"non-deterministic error", r"",
     "the op has no nondeterminism alert on neuron (torch.use_deterministic_algorithms)"),
    (r"Timeout", r"test_Conv2d_backward_depthwise.*complex128",
     "the test ran past the 120 s per-test limit on the loaded 2-core machine: a complex128 convolution is "
     "float64 ones, which take the counted host route, and gradcheck calls it many times"),
    (r"Timeout", r"",
     "the test ran past the per-test time limit on neuron"),
    (r"channels_last|memory_format|is_contiguous", r"",
     "memory format: an output comes back contiguous where CPU keeps channels_last"),
    (r"_has_sufficient_memory|largeTensorTest", r"",
     "the large-tensor skip helper knows only cpu and cuda"),
    (r"does not match|DID NOT RAISE|not raised|to raise", r"",
     "an argument check, exception type or message text CPU has and neuron lacks"),
    (r"Warning|warning", r"",
     "a warning CPU gives and neuron does not"),
    (r"not close|not equal|mismatch|Mismatched elements", r"",
     "a value differs from CPU's (not yet analysed)"),
]


def _key(classname, name, device):
    """The device-free identity of a test: its class without suffix, its name without device."""
    cls = _CLASS_DEVICE.sub("", classname.rsplit(".", 1)[-1])
    token = "_neuron" if device == "neuron" else "_cpu"
    i = name.rfind(token)
    if i >= 0 and (i + len(token) == len(name) or name[i + len(token)] in "_["):
        name = name[:i] + "_DEVICE" + name[i + len(token):]
    return cls, name


def _error_class(text):
    """A short, number-free label for an error message, so equal causes group together."""
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "(no message)")
    line = re.sub(r"0x[0-9a-f]+", "ADDR", line)
    line = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", line)
    line = re.sub(r"'[^']{40,}'", "'…'", line)
    return line[:140]


def read_junit(path, device):
    """{test key: (status, error class)} for one JUnit XML file; status pass / fail / skip."""
    results = {}
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        # Only device-generic classes count; a file's plain TestCase classes run on CPU alone.
        if not _CLASS_DEVICE.search(case.get("classname", "")):
            continue
        key = _key(case.get("classname", ""), case.get("name", ""), device)
        status, err = "pass", ""
        for child in case:
            if child.tag in ("failure", "error"):
                status = "fail"
                err = _error_class(child.get("message") or child.text)
                break
            if child.tag == "skipped":
                status = "skip"
        # A test can be reported twice (a teardown error); a failure wins.
        if results.get(key, ("",))[0] != "fail":
            results[key] = (status, err)
    return results


def reason_for(error_class, tests=()):
    """The documented reason for a neuron-only failure class (or that none is known yet)."""
    for error_pattern, test_pattern, reason in REASONS:
        if re.search(error_pattern, error_class) and (
                not test_pattern or any(re.search(test_pattern, t) for t in tests)):
            return reason
    return "not yet analysed"


def summarize(results_dir):
    """Per file counts on both devices and the neuron-only failures, from a results folder."""
    files, only = [], collections.defaultdict(list)
    for neuron_xml in sorted(Path(results_dir).glob("*.neuron.xml")):
        stem = neuron_xml.name[: -len(".neuron.xml")]
        cpu_xml = neuron_xml.with_name(stem + ".cpu.xml")
        neuron = read_junit(neuron_xml, "neuron")
        cpu = read_junit(cpu_xml, "cpu") if cpu_xml.exists() else {}
        count = lambda res, s: sum(1 for v in res.values() if v[0] == s)  # noqa: E731
        row = {"file": stem.replace(".", "/"),
               "neuron": [count(neuron, s) for s in ("pass", "fail", "skip")],
               "cpu": [count(cpu, s) for s in ("pass", "fail", "skip")]}
        fails = [(k, v[1]) for k, v in neuron.items() if v[0] == "fail" and cpu.get(k, ("",))[0] == "pass"]
        row["neuron_only"] = len(fails)
        files.append(row)
        for (cls, name), err in fails:
            only[err].append(f"{row['file']}::{cls}::{name}")
    return files, only


def render(files, only, examples=2):
    """The Markdown record: the per-file table and the neuron-only failure classes."""
    out = ["| file | neuron pass | fail | skip | CPU pass | fail | skip | neuron-only failures |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    tot = [0] * 7
    for r in files:
        vals = r["neuron"] + r["cpu"] + [r["neuron_only"]]
        tot = [a + b for a, b in zip(tot, vals)]
        out.append(f"| {r['file']} | " + " | ".join(f"{v:,}" for v in vals) + " |")
    out.append("| **total** | " + " | ".join(f"**{v:,}**" for v in tot) + " |")
    cpu_pass, n_only = tot[3], tot[6]
    share = 100.0 * n_only / cpu_pass if cpu_pass else 0.0
    out += ["", f"Neuron-only failures: {n_only:,} of the {cpu_pass:,} tests CPU passes "
            f"({share:.2f} %).", ""]
    if only:
        # One row per (error class, reason): a reason keyed on test names splits a class.
        rows = collections.defaultdict(list)
        for err, tests in only.items():
            for t in tests:
                rows[(err, reason_for(err, [t]))].append(t)
        out += ["| tests | error class | reason | e.g. |", "| ---: | --- | --- | --- |"]
        for (err, reason), tests in sorted(rows.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            eg = "<br>".join(f"`{t}`" for t in sorted(tests)[:examples])
            safe = err.replace("|", "\\|").replace("`", "'")
            out.append(f"| {len(tests)} | `{safe}` | {reason} | {eg} |")
    return "\n".join(out) + "\n"


def write_between_markers(page, text, begin=BEGIN, end=END):
    """Replace what lies between the record's markers in `page` (markers must exist)."""
    path = Path(page)
    body = path.read_text()
    if begin not in body or end not in body:
        raise SystemExit(f"{page} has no {begin} / {end} markers; add them where the record goes")
    head, rest = body.split(begin, 1)
    tail = rest.split(end, 1)[1]
    path.write_text(head + begin + "\n" + text + end + tail)


def main(argv=None):
    """Command line: summarize a results folder, print it or write it into a page."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="folder with <file>.neuron.xml and <file>.cpu.xml")
    ap.add_argument("--write", metavar="PAGE", help="write the record between the page's markers")
    ap.add_argument("--examples", type=int, default=2, help="example tests per failure class")
    args = ap.parse_args(argv)
    files, only = summarize(args.results)
    text = render(files, only, args.examples)
    if args.write:
        write_between_markers(args.write, text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
