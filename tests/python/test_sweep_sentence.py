"""The model sweep's sentence-transformers corpus (torchneuron/sweep/sentence.py): cases built as
users build them, each column compared with the same model on the CPU."""

import pytest
import sentence_transformers  # noqa: F401  (make test installs it: a broken install fails, never skips)

from torchneuron.sweep import sentence


@pytest.mark.parametrize("case", ["bi:bert:weightedmean", "cross:bert"])
def test_case_passes_every_column_against_the_cpu(case):
    row = sentence.run_case(case)
    assert row["reference"] == "pass", row["reasons"]
    for column in ("load", "forward", "backward", "compile", "pretrained"):
        assert row[column] == "pass", (column, row["reasons"])
    assert row["forward_max_err"] is not None and row["backward_max_err"] is not None
    assert row["fallback"] == {} and row["status"] == "pass"
    assert row["graphs_compiled"] >= 1 and row["graphs_eager"] == 0, row["reasons"]


def test_case_names_cover_every_kind_and_unknown_cases_are_refused():
    names = sentence.cases()
    assert {n.split(":")[0] for n in names} == {"bi", "cross", "sparse", "static"}
    assert len(names) == len(set(names))
    with pytest.raises(SystemExit, match="unknown cases bi:nope"):
        sentence.main(["--cases", "bi:nope"])


def test_tokenizer_is_trained_here_with_bert_special_tokens():
    tok = sentence.tokenizer()
    ids = tok(sentence.PAIRS[0][0], sentence.PAIRS[0][1])["input_ids"]
    assert ids[0] == tok.cls_token_id and ids.count(tok.sep_token_id) == 2
    assert tok.unk_token_id not in ids  # every word of the corpus is in the vocabulary
