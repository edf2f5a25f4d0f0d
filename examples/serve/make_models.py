"""Tiny causal language models for serving tests and `make serve`, without the hub: a byte-level
BPE tokenizer trained on examples/data/corpus.txt and randomly initialised Llama (grouped-query
attention), Qwen2 (GQA with biases), GPT-2 and Gemma-2 (sliding window and logit soft-capping)
checkpoints built from configs, each in its own directory.

    python examples/serve/make_models.py [DIR]      (default build/serve/models)"""

import os
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (Gemma2Config, GPT2Config, LlamaConfig, PreTrainedTokenizerFast, Qwen2Config,
                          AutoModelForCausalLM)

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "data", "corpus.txt")
VOCAB = 512
BOS, EOS = "<s>", "</s>"
# A chat template for /v1/chat/completions: each message on its line, then the assistant's turn.
CHAT_TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"

# head_dim 64 everywhere, as vLLM's CPU attention requires (the benchmark runs these there too).
CONFIGS = {
    "tiny-llama": LlamaConfig(vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                              bos_token_id=0, eos_token_id=1, tie_word_embeddings=False),
    "tiny-qwen2": Qwen2Config(vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=512,
                              bos_token_id=0, eos_token_id=1, tie_word_embeddings=True),
    "tiny-gpt2": GPT2Config(vocab_size=VOCAB, n_embd=256, n_layer=2, n_head=4, n_positions=512, bos_token_id=0,
                            eos_token_id=1),
    "tiny-gemma2": Gemma2Config(vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                                max_position_embeddings=512, sliding_window=16, attn_logit_softcapping=5.0,
                                final_logit_softcapping=30.0, query_pre_attn_scalar=64, bos_token_id=0,
                                eos_token_id=1, pad_token_id=1),
}


def make_tokenizer():
    with open(CORPUS) as f:
        paragraphs = [p.strip() for p in f.read().split("\n\n") if p.strip()]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=[BOS, EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(paragraphs, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=BOS, eos_token=EOS)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def main(out):
    tokenizer = make_tokenizer()
    for name, config in CONFIGS.items():
        path = os.path.join(out, name)
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config)
        # Larger weights than the default init, so that greedy decoding is not one token repeated
        # (Gemma-2 scales its tied embeddings by sqrt(hidden size): smaller ones there).
        with torch.no_grad():
            for name, p in model.named_parameters():
                if p.dim() == 2:
                    small = config.model_type == "gemma2" and "embed" in name
                    p.normal_(0.0, 0.02 if small else 0.08)
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
        print(f"{name}: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters in {path}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join("build", "serve", "models"))
