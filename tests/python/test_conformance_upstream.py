"""torchneuron.conformance.upstream: the record of PyTorch's own test files, from JUnit XML."""

import pytest

from torchneuron.conformance import upstream

NEURON_XML = """<testsuites><testsuite>
<testcase classname="test_x.TestFooPRIVATEUSE1" name="test_a_neuron_float32"/>
<testcase classname="test_x.TestFooPRIVATEUSE1" name="test_b_neuron"><failure message="RuntimeError: bad 12 of 30">t</failure></testcase>
<testcase classname="test_x.TestBarNEURON" name="test_c_neuron_uint16"><failure message="RuntimeError: bad 7 of 9">t</failure></testcase>
<testcase classname="test_x.TestBarNEURON" name="test_d_neuron"><skipped message="Only runs on cpu"/></testcase>
<testcase classname="test_x.TestBarNEURON" name="test_e_out_of_bounds_neuron"><error message="AssertionError: IndexError not raised"/></testcase>
<testcase classname="test_x.TestPlain" name="test_plain"/>
</testsuite></testsuites>"""

CPU_XML = """<testsuites><testsuite>
<testcase classname="test_x.TestFooCPU" name="test_a_cpu_float32"/>
<testcase classname="test_x.TestFooCPU" name="test_b_cpu"/>
<testcase classname="test_x.TestBarCPU" name="test_c_cpu_uint16"><failure message="RuntimeError: fails on CPU too">t</failure></testcase>
<testcase classname="test_x.TestBarCPU" name="test_d_cpu"/>
<testcase classname="test_x.TestBarCPU" name="test_e_out_of_bounds_cpu"/>
<testcase classname="test_x.TestPlain" name="test_plain"><failure message="not counted">t</failure></testcase>
</testsuite></testsuites>"""


@pytest.fixture
def results(tmp_path):
    (tmp_path / "test_x.neuron.xml").write_text(NEURON_XML)
    (tmp_path / "test_x.cpu.xml").write_text(CPU_XML)
    (tmp_path / "nn.test_y.neuron.xml").write_text(NEURON_XML.replace("test_x", "test_y"))
    return tmp_path


def test_counts_pair_neuron_tests_with_their_cpu_twins(results):
    files, only = upstream.summarize(results)
    by_file = {f["file"]: f for f in files}
    x = by_file["test_x"]
    assert x["neuron"] == [1, 3, 1]  # the plain TestCase class is not counted
    assert x["cpu"] == [4, 1, 0]
    assert x["neuron_only"] == 2  # test_b and test_e; test_c fails on CPU too
    assert by_file["nn/test_y"]["cpu"] == [0, 0, 0]  # no CPU run: nothing is neuron-only
    assert by_file["nn/test_y"]["neuron_only"] == 0
    assert only["RuntimeError: bad N of N"] == ["test_x::TestFoo::test_b_DEVICE"]
    assert only["AssertionError: IndexError not raised"] == ["test_x::TestBar::test_e_out_of_bounds_DEVICE"]


def test_render_and_reasons(results):
    text = upstream.render(*upstream.summarize(results))
    assert "| test_x | 1 | 3 | 1 | 4 | 1 | 0 | 2 |" in text
    assert "Neuron-only failures: 2 of the 4 tests CPU passes (50.00 %)." in text
    assert "raises at the next synchronization" in text  # the reason found for IndexError not raised
    assert "not yet analysed" in text  # and none for an unknown error
    assert upstream.reason_for("AssertionError: Tensor-likes are not close!",
                               ["nn/test_embedding::T::test_EmbeddingBag_per_sample_weights_and_offsets_DEVICE_int32_int32_float16"]
                               ).startswith("not a wrong answer")
    # embedding_bag's deferred device-side check is named as such, not as a missing check
    assert upstream.reason_for("AssertionError: RuntimeError not raised",
                               ["nn/test_embedding::T::test_embedding_bag_out_of_bounds_idx_padding_idx0_mode_sum_DEVICE_float32_int32"]
                               ).startswith("by design, a device-side check")


def test_write_between_markers(results, tmp_path):
    page = tmp_path / "page.md"
    page.write_text(f"# head\n{upstream.BEGIN}\nold\n{upstream.END}\ntail\n")
    assert upstream.main([str(results), "--write", str(page)]) == 0
    body = page.read_text()
    assert body.startswith("# head\n") and body.endswith(f"{upstream.END}\ntail\n")
    assert "old" not in body and "| test_x |" in body
    page.write_text("no markers")
    with pytest.raises(SystemExit):
        upstream.main([str(results), "--write", str(page)])
