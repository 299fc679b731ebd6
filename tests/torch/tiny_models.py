"""Tiny random causal LMs built from ``transformers`` configs, and the checks run on them.

A model type's default config is shrunk with :data:`SMALL` (only keys the config, or one of its
sub-configs, has are changed: 2 layers, one of each layer type, hidden size 64, vocabulary
128; :data:`OVERRIDES` for sizes under keys of a model's own), seeded and built on the CPU;
nothing is downloaded. :func:`compare` runs the swap criterion: the swapped copy gives the
original's logits on a left-padded batch and the same greedy generation with a KV cache (8
tokens, step logits), within :data:`MODEL_ULPS`. :func:`control` makes the copy whose swapped
modules see doubled positions, which the comparisons must tell from the original.

In bfloat16 and float16 (``build_pair(..., dtype=)``: built as ``from_pretrained(dtype=)``
builds, under that default dtype, and swapped in it) the criterion is :func:`compare_16_bits`:
logits within :func:`tolerance_16_bits` and greedy tokens equal wherever the original's top-2
margin exceeds it (near-ties are returned, not failed).
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip(
    "transformers", reason="the tiny models are built from transformers configs"
)

from posenc.torch.hf import SwapReport, swap_positions  # noqa: E402
from tests.tolerance import assert_close_ulp  # noqa: E402

#: Logits in float32 ulps of their largest magnitude (see tests/tolerance.py): the swapped
#: tables differ from the model's float32 builds by an ulp or two of the angle, carried
#: through two layers with reductions of width up to 128 (hidden 64, MLP 128) summed in the
#: order the CPU kernel picks: about sqrt(k) to k ulps per layer, hence more than 8. Measured:
#: <= 13 ulps under ATen's default, avx2 and avx512 kernels (test_swap.py); a fixed 1e-4 was
#: 180 to 3700 ulps of these logits.
MODEL_ULPS = 64
PAD = 0
NEW_TOKENS = 8
SMALL = {
    "vocab_size": 128,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 512,
    "head_dim": 16,
    "moe_intermediate_size": 32,
    "num_experts": 4,
    "n_routed_experts": 4,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "first_k_dense_replace": 1,
    "n_group": 1,
    "topk_group": 1,
    "kv_lora_rank": 16,
    "q_lora_rank": 32,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "v_head_dim": 16,
    "num_kv_heads": 2,
    "initializer_range": 0.2,  # spread the logits so greedy choices are not near-ties
    # the same sizes under the names older configs use
    "n_embd": 64,
    "n_layer": 2,
    "n_head": 4,
    "n_inner": 128,
    "n_positions": 512,
    "n_ctx": 512,
    "d_model": 64,
    "n_layers": 2,
    "n_heads": 4,
    "num_layers": 2,
    "num_heads": 4,
    "attention_heads": 4,
    "ffn_dim": 128,
    "decoder_layers": 2,
    "decoder_attention_heads": 4,
    "decoder_ffn_dim": 128,
    "encoder_layers": 2,
    "encoder_attention_heads": 4,
    "encoder_ffn_dim": 128,
    "init_std": 0.2,
    "rotary_dim": 8,
}
_LAYER_COUNTS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "decoder_layers")
_DOTS3 = {  # head_dim: qk_nope_head_dim + qk_rope_head_dim
    "per_layer_config": {},
    "index_head_dim": 16,
    "index_n_heads": 4,
    "index_topk": 8,
    "head_dim": 16,
}
_GEMMA3N = {
    "intermediate_size": [128, 128],
    "activation_sparsity_pattern": [0.0, 0.0],
    "num_kv_shared_layers": 0,
    "laurel_rank": 8,
    "hidden_size_per_layer_input": 16,
    "vocab_size_per_layer_input": 128,
    "altup_num_inputs": 2,
}
_PER_LAYER_INPUT = {"vocab_size_per_layer_input": 128, "hidden_size_per_layer_input": 16}
_QSA = {
    "head_dim": 64,  # its default rotary sections [11, 11, 10] need 64 rotated channels
    "indexer_n_heads": 4,
    "indexer_kv_heads": 1,
    "indexer_head_dim": 64,  # at least the rotated channels
    "indexer_budget": 8,
    "indexer_compress_ratio": 4,
}
_MAMBA2 = {"mamba_n_heads": 8, "mamba_d_head": 16, "mamba_d_state": 16, "mamba_chunk_size": 16}
#: model type -> config keys of its own (sizes under names SMALL does not know)
OVERRIDES: dict[str, dict[str, Any]] = {
    "dbrx": {
        "d_model": 64,
        "n_heads": 4,
        "n_layers": 2,
        "max_seq_len": 512,
        "attn_config": {"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0},
        "ffn_config": {"ffn_hidden_size": 64, "moe_num_experts": 4, "moe_top_k": 2},
    },
    # one pass of each recurrent stack: at the default 2 x 3 cycles the float32 model's own
    # logits differ from a float64 run of it by 1.5e-4, more than the comparison allows
    "hrm_text": {"H_cycles": 1, "L_cycles": 1, "L_bp_cycles": [1]},
    # Kolibri 1.1 (transformers 5.25): its indexer's heads fit the two query heads of each key
    # head, and its index, KV-sharing and dense-MLP layer lists fit the two layers
    "kolibri1_1": {
        "index_num_heads": 2,
        "index_layers": [1],
        "kv_source_layers": [0, 1],
        "mlp_only_layers": [0],
        "index_topk": 8,
        "index_pool_size": 64,
        "index_compression": 4,
        "index_num_local_tokens": 4,
        "index_num_sink_tokens": 2,
    },
    # Inkling2 (5.24 on) and Inkling2-loop (5.25): the logits cover unpadded_vocab_size
    # tokens, which generation then embeds
    "inkling2_text": {"unpadded_vocab_size": 128},
    "inkling2_loop_text": {"unpadded_vocab_size": 128},
    # hybrids: one attention layer (their defaults have none in the first two layers); their
    # Mamba-2 layers sized like the rest (by default 128 heads, a state of 256 and chunks of 256
    # tokens, which the CPU path pads every input to: seconds per call)
    "bamba": {"attn_layer_indices": [1], **_MAMBA2},
    "falcon_h1": {**_MAMBA2, "mamba_d_ssm": 128},
    "granitemoehybrid": {
        "layer_types": ["linear_attention", "attention"],
        "position_embedding_type": "rope",
        **_MAMBA2,
    },
    "jamba": {"attn_layer_period": 2, "attn_layer_offset": 1},
    "recurrent_gemma": {"block_types": ["recurrent", "attention"]},
    "lfm2_moe": {"layer_types": ["conv", "full_attention"], "num_dense_layers": 1},
    "bailing_hybrid": {
        "num_expert_group": 1,
        "num_experts_per_token": 2,
        "linear_head_dim": 16,
        "linear_num_heads": 4,
        "layer_group_size": 2,
    },
    # multi-head latent attention with sizes under keys of their own
    "longcat_flash": {
        "ffn_hidden_size": 128,
        "expert_ffn_hidden_size": 32,
        "moe_topk": 2,
        "zero_expert_num": 2,
        "qk_head_dim": 16,
        "head_dim": 8,  # its rotary module's size: qk_rope_head_dim
    },
    "dots3_note": _DOTS3,
    "dots3_note_text": _DOTS3,
    "gemma3n_text": _GEMMA3N,
    "gemma3n": {"text_config": _GEMMA3N},
    "zaya": {"num_experts_per_tok": 1},  # the only value it supports
    "zamba2": {
        "hybrid_layer_ids": [1],
        "layers_block_type": ["linear_attention", "hybrid"],
        "attention_hidden_size": 128,
        "attention_head_dim": 32,
        "mamba_headdim": 16,
        "kv_channels": 16,
        "num_query_groups": 4,
        "use_mamba_kernels": False,
        "chunk_size": 16,
        "adapter_rank": 8,
    },
    "gpt_neo": {"attention_types": [[["global", "local"], 1]]},
    # one codebook: the prompts, (b, s), are then MusicGen's (b · codebooks, s) input ids
    "musicgen": {"num_codebooks": 1},
    "musicgen_melody": {"num_codebooks": 1},
    # the class default has no rope parameters for its layer type
    "cohere_compass_text": {
        "head_dim": 128,  # the rotary sections its checkpoints use need it
        "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 50000.0}},
    },
    # rotary sections [11, 11, 10] (the model's default) need 64 rotated channels
    "qwen3_5_text": {"head_dim": 256},
    "qwen3_5_moe_text": {"head_dim": 256},
    "qwen3_5": {"head_dim": 256},
    "qwen3_5_moe": {"head_dim": 256},
    # per-layer-input embeddings: a table of their own (vocabulary x layers x size)
    "gemma4_text": _PER_LAYER_INPUT,
    "gemma4": {"text_config": _PER_LAYER_INPUT},
    # the token indexer of the attention layers (its sizes have no default)
    "qwen4_exp_text": _QSA,
    "qwen4_exp": _QSA,
    # the hashed byte n-gram embeddings: one table of 500002 rows per n-gram size
    # models with no rotary module, under keys of their own
    "zamba": {
        # two hybrid layers: they share one attention block
        "num_hidden_layers": 3,
        "layers_block_type": ["linear_attention", "hybrid", "hybrid"],
        "attention_hidden_size": 128,
        "attention_head_dim": 32,
        "mamba_dt_rank": 8,
        "use_mamba_kernels": False,
    },
    "mamba2": {
        "num_heads": 8,
        "head_dim": 16,
        "n_groups": 1,
        "time_step_rank": 8,
        "chunk_size": 16,
    },
    "kimi_linear": {"num_experts_per_token": 2, "linear_head_dim": 16, "linear_num_heads": 4},
    # its cache rounds the key size up to a multiple of 64, its layers do not
    "xlstm": {"embedding_dim": 64, "num_blocks": 2, "chunk_size": 16, "qk_dim_factor": 1.0},
    "xmod": {"default_language": "en_XX"},
    # its sinusoidal variant (posenc's 'paper' table): learned tables are everywhere else
    "xlm": {"emb_dim": 64, "sinusoidal_embeddings": True},
    "reformer": {
        "is_decoder": True,
        "attention_head_size": 16,
        "attn_layers": ["local", "lsh"],
        "axial_pos_shape": [16, 32],
        "axial_pos_embds_dim": [16, 48],
        "feed_forward_size": 128,
        "local_attn_chunk_length": 16,
        "lsh_attn_chunk_length": 16,
        "num_buckets": 4,
    },
    # hidden_size_global: the global transformer's size, read by the byte-level encoder and
    # decoder; num_hidden_layers: BltConfig has none, but its forward builds its cache from it
    "blt": {
        "encoder_hash_byte_group_vocab": 64,
        "encoder_config": {"hidden_size_global": 64},
        "decoder_config": {"hidden_size_global": 64},
        "num_hidden_layers": 2,
    },
}
#: model type -> the parameters (by name suffix) set to 1 after building: initialised to zero,
#: they make the positions irrelevant (ZAYA scales its keys by ``qk_norm.temp``)
ZERO_AT_INIT = {"zaya": "qk_norm.temp"}
#: A model larger than this after shrinking keeps sizes under names SMALL does not know.
MAX_PARAMETERS = 20_000_000


def _shrunk(defaults: dict[str, Any]) -> dict[str, Any]:
    """The SMALL keys of ``defaults``, and of each sub-config it holds (as a dict)."""
    small = {k: v for k, v in SMALL.items() if k in defaults}
    if "kv_lora_rank" in defaults:  # multi-head latent attention: as many kv heads as heads
        small["num_key_value_heads"] = small["num_attention_heads"]
        small.pop("head_dim", None)
    if "head_dim" in small and not _fits(defaults.get("rope_parameters"), small["head_dim"]):
        small.pop("head_dim")  # its rotary sections or fraction need the real head size
    if isinstance(defaults.get("layer_types"), list):  # one layer of each type, at least two
        kinds = list(dict.fromkeys(defaults["layer_types"]))
        count = max(2, len(kinds))
        small["layer_types"] = (kinds * count)[:count]
        small.update({k: count for k in _LAYER_COUNTS if k in small})
        if isinstance(defaults.get("per_layer_config"), dict):
            small["per_layer_config"] = _per_layer(defaults, small["layer_types"])
    for key, value in defaults.items():
        if isinstance(value, dict) and "model_type" in value:
            small[key] = {**value, **_shrunk(value)}
    return small


def _per_layer(defaults: dict[str, Any], kinds: list[str]) -> dict[int, Any]:
    """The per-layer overrides of ``defaults`` for the layers ``kinds``: each layer gets those of
    the first default layer of its type."""
    table = {int(k): v for k, v in defaults["per_layer_config"].items()}
    first = {kind: i for i, kind in reversed(list(enumerate(defaults["layer_types"])))}
    return {i: table[first[kind]] for i, kind in enumerate(kinds) if first[kind] in table}


def _fits(rope: Any, head_dim: int) -> bool:
    """Whether rope parameters (per layer type or not) can rotate a head of ``head_dim``."""
    if not isinstance(rope, dict):
        return True
    if all(isinstance(v, dict) for v in rope.values()) and rope:
        return all(_fits(v, head_dim) for v in rope.values())
    rotated = int(head_dim * rope.get("partial_rotary_factor", 1.0))
    sections = rope.get("mrope_section") or ()
    return rotated % 2 == 0 and sum(sections) <= rotated // 2


def _merged(small: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``small`` updated with ``extra``, dicts merged key by key (an empty dict replaces)."""
    out = dict(small)
    for key, value in extra.items():
        both = isinstance(value, dict) and value and isinstance(out.get(key), dict)
        out[key] = _merged(out[key], value) if both else value
    return out


#: model type -> generation settings its generate() needs and its default config lacks
#: (MusicGen pads its delay pattern with the decoder start token and reads
#: num_return_sequences unguarded).
GENERATION: dict[str, dict[str, Any]] = {
    "musicgen": {"decoder_start_token_id": 1, "num_return_sequences": 1},
    "musicgen_melody": {"decoder_start_token_id": 1, "num_return_sequences": 1},
}


def model_class(model_type: str) -> Any:
    """The causal LM class of ``model_type`` (``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``)."""
    auto = importlib.import_module("transformers.models.auto.modeling_auto")
    return getattr(transformers, auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type])


def tiny_config(model_type: str) -> Any:
    """The default config of the model type's causal LM, shrunk (only keys the config has are
    changed)."""
    config_class = model_class(model_type).config_class
    small = _merged(_shrunk(config_class().to_dict()), OVERRIDES.get(model_type, {}))
    config = config_class(**small)
    config.pad_token_id = PAD
    for name in ("bos_token_id", "eos_token_id"):
        if getattr(config, name, None) is not None:
            setattr(config, name, 1)
    return config


@contextmanager
def default_dtype(dtype: Any) -> Iterator[None]:
    """Build under ``dtype`` as ``from_pretrained(dtype=)`` does (buffers a model makes in
    float32 on purpose, as the rotary modules' ``inv_freq``, stay float32)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype or previous)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def build_pair(model_type: str, dtype: Any = None) -> tuple[Any, Any, SwapReport]:
    """``(original, swapped, report)``: a seeded tiny model and its swapped copy, built in
    ``dtype`` (default float32) and swapped in it."""
    config, cls = tiny_config(model_type), model_class(model_type)
    with torch.device("meta"):
        size = sum(p.numel() for p in cls(config).parameters())
    if size > MAX_PARAMETERS:
        raise ValueError(f"{size:,} parameters after shrinking (sizes under other config keys)")
    torch.manual_seed(0)
    with default_dtype(dtype):
        original = cls(config).eval()
    with torch.no_grad():
        for name, parameter in original.named_parameters():
            if name.endswith(ZERO_AT_INIT.get(model_type, "\0")):
                parameter.fill_(1.0)
    for key, value in GENERATION.get(model_type, {}).items():
        setattr(original.generation_config, key, value)
    swapped = copy.deepcopy(original)
    return original, swapped, swap_positions(swapped)


def prompts() -> tuple[torch.Tensor, torch.Tensor]:
    """A left-padded batch: three pads in the first row."""
    gen = torch.Generator().manual_seed(5)
    ids = torch.randint(2, SMALL["vocab_size"], (2, 9), generator=gen)
    ids[0, :3] = PAD
    return ids, ids.ne(PAD).long()


def logits(model: Any) -> torch.Tensor:
    """The logits of the left-padded batch at its tokens (padding rows are not compared)."""
    ids, mask = prompts()
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask).logits
    return out[mask.bool()]


def generate(model: Any, **inputs: Any) -> Any:
    """Greedy generation with a KV cache: :data:`NEW_TOKENS` tokens and their step logits."""
    if not inputs:
        ids, mask = prompts()
        inputs = {"input_ids": ids, "attention_mask": mask, "pad_token_id": PAD}
    return model.generate(
        **inputs,
        max_new_tokens=NEW_TOKENS,
        min_new_tokens=NEW_TOKENS,
        do_sample=False,
        use_cache=True,
        output_logits=True,
        return_dict_in_generate=True,
    )


def assert_same_generation(ours: Any, theirs: Any) -> None:
    """The same tokens, and step logits within :data:`MODEL_ULPS`."""
    assert torch.equal(ours.sequences, theirs.sequences)
    assert len(ours.logits) == len(theirs.logits) == NEW_TOKENS
    for a, b in zip(ours.logits, theirs.logits, strict=True):
        assert_close_ulp(a, b, ulps=MODEL_ULPS, what="step logits")


@dataclass(frozen=True)
class Outputs:
    """A model's left-padded :func:`logits` and its greedy :func:`generate` output: computed
    once for an original model, which every comparison (the swap's, the control's) reuses.
    Both are deterministic (eval mode, no sampling), so reusing them changes no result."""

    logits: torch.Tensor
    generation: Any


def outputs(model: Any) -> Outputs:
    return Outputs(logits(model), generate(model))


def compare(original: Any, swapped: Any, expected: Outputs | None = None) -> None:
    """The swap criterion: left-padded logits and cached greedy generation agree
    (``expected``: the original's :func:`outputs`, when computed before)."""
    expected = outputs(original) if expected is None else expected
    assert_close_ulp(logits(swapped), expected.logits, ulps=MODEL_ULPS, what="logits")
    assert_same_generation(generate(swapped), expected.generation)


#: k of :func:`tolerance_16_bits`.
K_16_BITS = 16


def tolerance_16_bits(dtype: Any, reference: torch.Tensor) -> float:
    """The largest change of 16-bit logits a swap may make: ``k · ulp(dtype) · max|logits|``.

    The error model: posenc rounds its float64 table once to ``dtype``; the model's module
    computes it in float32 and rounds once (some round twice: the table, then its product
    with the attention factor). The two tables differ by at most one unit in the last place
    of ``dtype``, ``ε`` relative to 1 (``torch.finfo(dtype).eps``; cos and sin are at most 1,
    times the attention factor). Propagated: each rotated channel sums two products, so a
    rotated query or key moves by at most ``2ε`` of its size and their product, the
    attention logit, by ``4ε``; softmax and the 16-bit rounding of every result this moves
    (one more ulp each) at most double it, ``8ε`` per attention layer; the tiny models have
    two layers, in sequence, so ``k = 16``. Relative to the largest logit: the residual
    stream carries each layer's change to the output unscaled by anything larger than the
    logits themselves.
    """
    return K_16_BITS * float(torch.finfo(dtype).eps) * float(reference.float().abs().max())


def _top2_margin(step: torch.Tensor) -> torch.Tensor:
    """Per row of step logits ``(b, vocab)``: the largest minus the second largest."""
    top = step.float().topk(2, dim=-1).values
    return top[..., 0] - top[..., 1]


def compare_16_bits(
    original: Any, swapped: Any, dtype: Any, expected: Outputs | None = None
) -> list[str]:
    """The 16-bit swap criterion; returns the near-ties it did not fail.

    Left-padded logits within :func:`tolerance_16_bits`; cached greedy generation: while a
    row's tokens agree, its step logits within the bound and its next token equal wherever
    the original's top-2 margin exceeds the bound; a different token at a smaller margin is a
    near-tie (listed, and the row is compared no further: its prefixes now differ).
    ``expected``: the original's :func:`outputs`, when computed before.
    """
    expected = outputs(original) if expected is None else expected
    reference = expected.logits
    bound = tolerance_16_bits(dtype, reference)
    largest = float(reference.float().abs().max())

    def within_bound(ours: Any, theirs: Any, what: str) -> None:
        # K_16_BITS ulps of dtype at the largest logit (the error model: tolerance_16_bits)
        assert_close_ulp(ours, theirs, ulps=K_16_BITS, dtype=dtype, scale=largest, what=what)

    within_bound(logits(swapped), reference, "left-padded logits")
    ours, theirs = generate(swapped), expected.generation
    # (b, s), or MusicGen's (b, codebooks, s): one row per row of step logits
    mine, their = (g.sequences.reshape(-1, g.sequences.shape[-1]) for g in (ours, theirs))
    start = mine.shape[1] - NEW_TOKENS
    ties: list[str] = []
    for row in range(mine.shape[0]):
        for step, (a, b) in enumerate(zip(ours.logits, theirs.logits, strict=True)):
            within_bound(a[row], b[row], f"row {row}, step {step} logits")
            token, expected = mine[row, start + step], their[row, start + step]
            if token == expected:
                continue
            margin = float(_top2_margin(b[row]))
            assert margin <= bound, (
                f"row {row}, step {step}: token {int(token)}, the original's {int(expected)} "
                f"(top-2 margin {margin:.3g} > bound {bound:.3g})"
            )
            ties.append(f"row {row} step {step} (margin {margin:.2g} <= {bound:.2g})")
            break
    return ties


class _Wrapper(torch.nn.Module):
    """A module around ``inner`` whose other attributes are ``inner``'s (models read some)."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.inner, name)


class DoubledPositions(_Wrapper):
    """A swapped rotary module fed ``2 · position_ids`` (a control that must change the output)."""

    def forward(self, x: Any, position_ids: Any, *rest: Any, **kwargs: Any) -> Any:
        return self.inner(x, position_ids * 2, *rest, **kwargs)


def doubled(model: Any, names: list[str]) -> Any:
    """A copy of ``model`` whose rotary modules ``names`` see doubled positions."""
    out = copy.deepcopy(model)
    for name in names:
        parent, _, child = name.rpartition(".")
        module = out.get_submodule(parent) if parent else out
        setattr(module, child, DoubledPositions(getattr(module, child)))
    return out


class DoubledTable(_Wrapper):
    """A sinusoidal encoder whose rows are those of twice the positions asked for."""

    def encoding(self, what: Any, *, offset: Any = 0, **kwargs: Any) -> Any:
        positions = torch.arange(what) if isinstance(what, int) else what
        return self.inner.encoding(2 * (positions + offset), **kwargs)

    def _encode(self, name: str, positions: Any, offset: Any = 0, *rest: Any) -> Any:
        return self.inner._encode(name, 2 * (torch.as_tensor(positions) + offset), 0, *rest)


class DoubledDistances(_Wrapper):
    """A relative-logits module fed doubled positions (or distances, and position ids)."""

    def forward(self, states: Any, *positions: Any) -> Any:
        return self.inner(states, *(2 * p for p in positions))


#: the replacements of relative logits, which :func:`control` feeds doubled distances
RELATIVE_LOGITS = ("RelativeLogitsPositions", "RelativeBiasPositions")


def control(swapped: Any, report: SwapReport) -> Any:
    """A copy of ``swapped`` whose replaced modules (rotary, absolute or relative logits) see
    doubled positions: the comparisons must tell it from the original."""
    out = doubled(swapped, [r.name for r in report.replaced if r.kind == "rotary"])
    for record in report.replaced:
        if record.kind == "absolute":
            module = out.get_submodule(record.name)
            module.sinusoidal = DoubledTable(module.sinusoidal)
        elif record.replacement in RELATIVE_LOGITS:
            parent, _, child = record.name.rpartition(".")
            holder = out.get_submodule(parent)
            setattr(holder, child, DoubledDistances(getattr(holder, child)))
    return out
