"""The transformers oracle for mkc on a GPU machine (issue 18's correctness check).

Builds a random-init checkpoint shaped like one of mkc's embedded models (`--model`: llama1b,
the default, or llama3b; bf16, tied embeddings, rope_theta 5e5) or like a Llama-family model
mkc has no file for (`--model tinyllama`: TinyLlama-1.1B's shape, untied embeddings, rope_theta
1e4, vocabulary 32000; mkc then reads the checkpoint directory itself as its model, the one
`mkc model` writes; `--model mistral`: a small Mistral, model_type "mistral", whose sliding
window lies past the run; `--model llama2`: four of Llama-2-7B's layers, saved in f16;
`--model smollm`: SmolLM-135M, rows of 576 columns; `--model llama2_13b`: two of Llama-2-13B's
layers, 32 KiB pages; `--model linear`: four TinyLlama layers with linear RoPE scaling;
`--model padded`: four TinyLlama layers with an MLP of 5644 columns, which mkc zero-pads;
`--model dynamic`: four TinyLlama layers with dynamic NTK RoPE, plain within the context;
`--model openllama`: four of OpenLLaMA-3B's layers, heads of 100 that mkc zero-pads;
`--model yarn`: four TinyLlama layers with YaRN RoPE scaling), runs
`mkc run MODEL --weights DIR --logits-out` for each target, and teacher-forces
transformers over mkc's own tokens, loaded from the same checkpoint in fp32 and in bf16 (loaded
with from_pretrained, so RoPE's inv_freq stays f32). Passes when, per target, the median
relative L2 of mkc's logits against fp32 is at most that of transformers' bf16 run, with no
argmax disagreement on a step whose fp32 top-2 margin is clear.

usage: python3 tools/hf_check.py MKC_BINARY OUT_DIR
       [--model llama1b|llama3b|tinyllama|mistral|llama2|smollm|llama2_13b|linear|padded|dynamic|
        openllama|yarn]
       [TARGET ...]
"""
import os
import subprocess
import sys

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

CLEAR_MARGIN = 0.1  # logits: a top-2 gap above this is not a rounding question
PROMPT, TOKENS = 32, 48


# The embedded models' shapes (models/*.ron), as transformers configures them.
LLAMA3 = dict(vocab_size=128256, max_position_embeddings=131072, rope_theta=500000.0,
              tie_word_embeddings=True)
# TinyLlama-1.1B's shape; the RoPE and padding variants below take four of its layers.
TINYLLAMA = dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                 num_attention_heads=32, num_key_value_heads=4, head_dim=64, vocab_size=32000,
                 max_position_embeddings=2048, rope_theta=10000.0, tie_word_embeddings=False)
TINY4 = dict(TINYLLAMA, num_hidden_layers=4)
SHAPES = {
    "llama1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                    num_attention_heads=32, num_key_value_heads=8, head_dim=64, **LLAMA3),
    "llama3b": dict(hidden_size=3072, intermediate_size=8192, num_hidden_layers=28,
                    num_attention_heads=24, num_key_value_heads=8, head_dim=128, **LLAMA3),
    # No model file: mkc runs the checkpoint directory as its model.
    "tinyllama": TINYLLAMA,
    # A small Mistral (model_type "mistral", head_dim 128, a sliding window past the run).
    "mistral": dict(hidden_size=2048, intermediate_size=7168, num_hidden_layers=8,
                    num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                    vocab_size=32768, max_position_embeddings=32768, rope_theta=1000000.0,
                    tie_word_embeddings=False, sliding_window=4096),
    # Llama-2-7B's layer (MLP 11008: K chunks of 2752 columns; 32 KV heads; f16 as Meta saved
    # it, which mkc rounds to bf16), 4 of its 32 layers.
    "llama2": dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=4,
                   num_attention_heads=32, num_key_value_heads=32, head_dim=128,
                   vocab_size=32000, max_position_embeddings=4096, rope_theta=10000.0,
                   tie_word_embeddings=False),
    # SmolLM-135M: rows of 576 and 1536 columns (lane rounds of 256, the last partial).
    "smollm": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                   num_attention_heads=9, num_key_value_heads=3, head_dim=64,
                   vocab_size=49152, max_position_embeddings=2048, rope_theta=10000.0,
                   tie_word_embeddings=True),
    # Two of Llama-2-13B's layers: a gate and an up row of 5120 columns take 32 KiB pages.
    "llama2_13b": dict(hidden_size=5120, intermediate_size=13824, num_hidden_layers=2,
                       num_attention_heads=40, num_key_value_heads=40, head_dim=128,
                       vocab_size=32000, max_position_embeddings=4096, rope_theta=10000.0,
                       tie_word_embeddings=False),
    # Linear RoPE scaling (long-context Llama 2 fine-tunes), on four TinyLlama-shaped layers.
    "linear": dict(TINY4, max_position_embeddings=8192,
                   rope_scaling={"type": "linear", "factor": 4.0}),
    # An MLP width no shard count splits into whole 16-byte pieces (5644): mkc zero-pads it to
    # 5888 (checkpoint_intermediate), which must leave every logit as it was.
    "padded": dict(TINY4, intermediate_size=5644),
    # OpenLLaMA-3B's shape, four layers: heads of 100, which mkc zero-pads to 104
    # (checkpoint_head_dim), RoPE's frequencies and the score scale staying the checkpoint's.
    "openllama": dict(hidden_size=3200, intermediate_size=8640, num_hidden_layers=4,
                      num_attention_heads=32, num_key_value_heads=32, head_dim=100,
                      vocab_size=32000, max_position_embeddings=2048, rope_theta=10000.0,
                      tie_word_embeddings=False),
    # YaRN (long-context fine-tunes): frequencies ramped between kept and divided by the factor
    # over the pairs the betas bound, and q and k scaled by the attention factor.
    "yarn": dict(TINY4, max_position_embeddings=8192,
                 rope_scaling={"rope_type": "yarn", "factor": 4.0,
                               "original_max_position_embeddings": 2048}),
    # Dynamic NTK RoPE scaling: plain RoPE within the trained context, where mkc's run stays.
    "dynamic": dict(TINY4, rope_scaling={"type": "dynamic", "factor": 2.0}),
}
ARCH = {"mistral": (MistralConfig, MistralForCausalLM)}
SAVED_AS = {"llama2": torch.float16}
EMBEDDED = {"llama1b", "llama3b"}


def main():
    mkc, out = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    model = "llama1b"
    if args[:1] == ["--model"]:
        model, args = args[1], args[2:]
    if model not in SHAPES:
        sys.exit(f"--model {model}: the check knows {', '.join(SHAPES)}")
    targets = args or ["persistent", "pdl"]
    ckpt = os.path.join(out, "ckpt")
    torch.manual_seed(0)
    config_class, model_class = ARCH.get(model, (LlamaConfig, LlamaForCausalLM))
    cfg = config_class(rms_norm_eps=1e-5, **SHAPES[model])
    model_class(cfg).to(SAVED_AS.get(model, torch.bfloat16)).save_pretrained(ckpt)
    rng = np.random.default_rng(1)
    prompt = [int(t) for t in rng.integers(0, cfg.vocab_size, PROMPT)]
    oracles = {}
    for name, dtype in [("fp32", torch.float32), ("bf16", torch.bfloat16)]:
        oracles[name] = model_class.from_pretrained(ckpt, dtype=dtype).cuda().eval()
    ok = True
    for target in targets:
        npy = os.path.join(out, f"logits_{target}.npy")
        run = subprocess.run([mkc, "run", model if model in EMBEDDED else ckpt, "--weights", ckpt,
                              "--target", target,
                              "--prompt-ids", ",".join(map(str, prompt)), "--tokens", str(TOKENS),
                              "--logits-out", npy], capture_output=True, text=True)
        print(run.stdout + run.stderr)
        if run.returncode != 0:
            print(f"{target}: mkc run failed ({run.returncode})")
            ok = False
            continue
        line = next(l for l in run.stdout.splitlines() if l.strip().startswith("tokens:"))
        tokens = [int(t) for t in line.split(":", 1)[1].split(",")]
        mine = np.load(npy)
        ids = torch.tensor([prompt + tokens], device="cuda")
        ref = {}
        with torch.no_grad():
            for name, m in oracles.items():
                ref[name] = m(ids).logits[0, PROMPT:PROMPT + len(mine)].float().cpu().numpy()
        rel = lambda a, b: np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1)
        mkc_err, bf16_err = rel(mine, ref["fp32"]), rel(ref["bf16"], ref["fp32"])
        top2 = np.sort(ref["fp32"], axis=1)[:, -2:]
        clear = (top2[:, 1] - top2[:, 0]) > CLEAR_MARGIN
        disagree = int(np.sum((mine.argmax(1) != ref["fp32"].argmax(1)) & clear))
        passed = np.median(mkc_err) <= np.median(bf16_err) and disagree == 0
        ok &= passed
        print(f"{target}: {len(mine)} steps, median rel L2 vs fp32: mkc {np.median(mkc_err):.4f}, "
              f"transformers bf16 {np.median(bf16_err):.4f}; {disagree} disagreements on "
              f"{int(clear.sum())} clear steps: {'PASSED' if passed else 'FAILED'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
