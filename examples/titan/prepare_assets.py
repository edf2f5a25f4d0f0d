"""Makes TorchTitan's inputs without the hub: a byte-level BPE tokenizer (vocabulary 2048, the
llama3 debug model's) trained with `tokenizers` on examples/data/corpus.txt, and the same text as
a local JSON-lines dataset. Pass them as --hf_assets_path DIR/tokenizer and
--dataloader.dataset-path DIR/dataset (with --dataloader.dataset c4_test, whose loader reads a
local directory).

    python examples/titan/prepare_assets.py [DIR]      (default build/titan)"""

import json
import os
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "data", "corpus.txt")
BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"


def main(out):
    with open(CORPUS) as f:
        paragraphs = [p.strip() for p in f.read().split("\n\n") if p.strip()]
    tokenizer_dir, dataset_dir = os.path.join(out, "tokenizer"), os.path.join(out, "dataset")
    os.makedirs(tokenizer_dir, exist_ok=True)
    os.makedirs(dataset_dir, exist_ok=True)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2048, special_tokens=[BOS, EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(paragraphs, trainer=trainer)
    tokenizer.save(os.path.join(tokenizer_dir, "tokenizer.json"))
    with open(os.path.join(tokenizer_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": BOS, "eos_token": EOS, "add_bos_token": True, "add_eos_token": False}, f)
    with open(os.path.join(dataset_dir, "train.json"), "w") as f:
        for p in paragraphs:
            f.write(json.dumps({"text": p}) + "\n")
    print(f"tokenizer ({tokenizer.get_vocab_size()} tokens) in {tokenizer_dir}; {len(paragraphs)} documents in {dataset_dir}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join("build", "titan"))
