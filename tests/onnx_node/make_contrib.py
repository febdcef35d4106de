#!/usr/bin/env python3
"""Writes node tests in ONNX's layout (model.onnx, test_data_set_0/) for the onnxruntime contrib ops
stitch reads (compiler/importer/contrib_ops.h): SkipLayerNormalization, SkipSimplifiedLayerNormalization,
BiasGelu, Gelu, FastGelu, QuickGelu, EmbedLayerNormalization, Attention, MultiHeadAttention,
RotaryEmbedding, MatMulNBits, GroupQueryAttention and MoE of the com.microsoft domain, and onnxruntime's
default-domain LayerNormalization below opset 17 and SimplifiedLayerNormalization. Expected outputs come from onnxruntime's CPU kernels, the ops'
definition, never from stitch. Tooling only; the files are committed.

    python3 -m venv venv && venv/bin/pip install onnx numpy onnxruntime
    venv/bin/python tests/onnx_node/make_contrib.py tests/onnx_node/contrib
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ELEM = {np.float32: TensorProto.FLOAT, np.int32: TensorProto.INT32, np.int64: TensorProto.INT64,
        np.uint8: TensorProto.UINT8}
RNG = np.random.default_rng(7)


def one_node_model(name, op, inputs, attrs, outputs, domain, opset, int_outputs, initializers=()):
    """The model of one `op` node of graph inputs (name -> array, None leaves an optional input out;
    those named in `initializers` are the model's constants), each named output (`""` leaves one
    out) a graph output; and the inputs given that are graph inputs."""
    names = [n if x is not None else "" for n, x in inputs]
    while names and names[-1] == "":
        names.pop()
    given = [(n, x) for n, x in inputs if x is not None and n not in initializers]
    consts = [numpy_helper.from_array(x, n) for n, x in inputs if x is not None and n in initializers]
    node = helper.make_node(op, names, list(outputs), name=op.lower(), domain=domain, **attrs)
    graph = helper.make_graph(
        [node], name, [helper.make_tensor_value_info(n, ELEM[x.dtype.type], list(x.shape)) for n, x in given],
        [helper.make_tensor_value_info(o, TensorProto.INT32 if o in int_outputs else TensorProto.FLOAT, None)
         for o in outputs if o], initializer=consts)
    # The contrib domain is imported by every case, as by every model onnxruntime's optimizer
    # writes; the node tests take it to mean that the expected outputs are onnxruntime's.
    imports = [helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 8  # readable by the libonnx the project builds with
    return model, given


def case(out, name, op, inputs, attrs, outputs=("y",), domain="com.microsoft", opset=17, int_outputs=(),
         oracle_inputs=None, initializers=(), unspecified=None, oracle_attrs=None):
    """One `op` node of `inputs` (one_node_model), its expected outputs onnxruntime's for it, or for
    the same node of `oracle_inputs` (the same values in another layout, where onnxruntime's CPU
    kernel does not implement the form written; with `oracle_attrs` in place of `attrs` when that
    layout is an attribute's). `unspecified`, when given, zeroes the parts of
    the outputs that the op leaves unspecified (a function of the list of outputs, in place)."""
    model, given = one_node_model(name, op, inputs, attrs, outputs, domain, opset, int_outputs, initializers)
    run_model, run_given = model, given
    if oracle_inputs is not None:
        run_model, run_given = one_node_model(name, op, oracle_inputs, oracle_attrs or attrs, outputs, domain, opset,
                                              int_outputs)
    outs = [o for o in outputs if o]
    sess = ort.InferenceSession(run_model.SerializeToString(), providers=["CPUExecutionProvider"])
    ys = sess.run(None, dict(run_given))
    if unspecified:
        unspecified(ys)
    d = os.path.join(out, name, "test_data_set_0")
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(out, name, "model.onnx"))
    for i, (n, x) in enumerate(given):
        onnx.save_tensor(numpy_helper.from_array(x, n), os.path.join(d, f"input_{i}.pb"))
    for i, (o, y) in enumerate(zip(outs, ys)):
        onnx.save_tensor(numpy_helper.from_array(y, o), os.path.join(d, f"output_{i}.pb"))
    print(f"{name}: {[list(x.shape) for _, x in given]} -> {[list(y.shape) for y in ys]}")


def f32(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def main():
    out = sys.argv[1]
    B, S, H = 2, 5, 16
    x, skip, gamma, beta, bias = f32(B, S, H, scale=2), f32(B, S, H), f32(H), f32(H), f32(H)
    case(out, "test_contrib_skip_layer_norm", "SkipLayerNormalization",
         [("x", x), ("skip", skip), ("gamma", gamma), ("beta", beta), ("bias", bias)], {"epsilon": 1e-5},
         outputs=("y", "mean", "inv_std_var", "sum"))
    case(out, "test_contrib_skip_layer_norm_broadcast_skip", "SkipLayerNormalization",
         [("x", x), ("skip", skip[:1]), ("gamma", gamma)], {"epsilon": 1e-5})
    case(out, "test_contrib_skip_simplified_layer_norm", "SkipSimplifiedLayerNormalization",
         [("x", x), ("skip", skip), ("gamma", gamma), ("bias", bias)], {"epsilon": 1e-6},
         outputs=("y", "", "", "sum"))
    case(out, "test_contrib_simplified_layer_norm_opset14", "SimplifiedLayerNormalization",
         [("x", x), ("scale", gamma)], {"epsilon": 1e-6, "axis": -1}, domain="", opset=14)
    case(out, "test_contrib_layer_norm_opset14", "LayerNormalization",
         [("x", x), ("scale", gamma), ("b", beta)], {"epsilon": 1e-5, "axis": -1},
         outputs=("y", "mean", "inv_std_var"), domain="", opset=14)
    wide = f32(B, S, H, scale=3)
    case(out, "test_contrib_bias_gelu", "BiasGelu", [("x", wide), ("bias", bias)], {})
    case(out, "test_contrib_gelu", "Gelu", [("x", wide)], {})
    case(out, "test_contrib_fast_gelu", "FastGelu", [("x", wide), ("bias", bias)], {})
    case(out, "test_contrib_fast_gelu_no_bias", "FastGelu", [("x", wide)], {})
    case(out, "test_contrib_quick_gelu", "QuickGelu", [("x", wide)], {"alpha": 1.5})

    V, P = 11, 9
    ids = RNG.integers(0, V, (B, S)).astype(np.int32)
    seg = RNG.integers(0, 2, (B, S)).astype(np.int32)
    mask = np.array([[1, 1, 0, 1, 1], [1, 1, 1, 0, 0]], np.int32)
    emb = [("input_ids", ids), ("segment_ids", seg), ("word_embedding", f32(V, H)), ("position_embedding", f32(P, H)),
           ("segment_embedding", f32(2, H)), ("gamma", gamma), ("beta", beta)]
    case(out, "test_contrib_embed_layer_norm", "EmbedLayerNormalization", emb + [("mask", mask)], {"epsilon": 1e-5},
         outputs=("y", "mask_index", "embedding_sum"), int_outputs=("mask_index",))
    positions = np.array([[3, 4, 5, 6, 0], [8, 7, 6, 5, 4]], np.int32)
    no_seg = [emb[0], ("segment_ids", None), emb[2], emb[3], ("segment_embedding", None), emb[5], emb[6]]
    case(out, "test_contrib_embed_layer_norm_position_ids", "EmbedLayerNormalization",
         no_seg + [("mask", None), ("position_ids", positions)], {"epsilon": 1e-5}, outputs=("y", "mask_index"),
         int_outputs=("mask_index",))

    # Attention: x [B, S, 16] through packed Q, K, V weights into 2 heads of 8.
    heads = 2
    w, b = f32(H, 3 * H, scale=0.3), f32(3 * H)
    att = [("x", x), ("weights", w), ("bias", b)]
    left_padded = np.array([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]], np.int32)
    case(out, "test_contrib_attention_mask_2d", "Attention", att + [("mask_index", mask)], {"num_heads": heads})
    case(out, "test_contrib_attention_causal_mask_2d", "Attention", att + [("mask_index", left_padded)],
         {"num_heads": heads, "unidirectional": 1})
    case(out, "test_contrib_attention_mask_end", "Attention", att + [("mask_index", np.array([3, 5], np.int32))],
         {"num_heads": heads})
    mask3 = (RNG.random((B, S, S)) > 0.3).astype(np.int32)
    mask3[:, :, 0] = 1
    case(out, "test_contrib_attention_mask_3d", "Attention", att + [("mask_index", mask3)],
         {"num_heads": heads, "mask_filter_value": -1000.0})
    case(out, "test_contrib_attention_bias_scale", "Attention",
         att + [("mask_index", None), ("past", None), ("attention_bias", f32(1, heads, S, S))],
         {"num_heads": heads, "scale": 0.2})
    case(out, "test_contrib_attention_qkv_sizes", "Attention",
         [("x", x), ("weights", f32(H, 2 * H + 32, scale=0.3)), ("bias", f32(2 * H + 32))],
         {"num_heads": heads, "qkv_hidden_sizes": [H, H, 32]})
    case(out, "test_contrib_attention_present_no_past", "Attention", att, {"num_heads": heads, "unidirectional": 1},
         outputs=("y", "present"))
    past_len = 3
    case(out, "test_contrib_attention_past", "Attention",
         att + [("mask_index", np.ones((B, past_len + S), np.int32)), ("past", f32(2, B, heads, past_len, H // heads))],
         {"num_heads": heads, "unidirectional": 1}, outputs=("y", "present"))
    multi_head_attention(out, B, S, H)
    rotary_embedding(out, B, S, H)
    matmul_nbits(out, B, S)
    group_query_attention(out)
    window_cache(out)
    head_sinks(out)
    mixture_of_experts(out)
    causal_conv_with_state(out)


def matmul_nbits(out, B, S):
    """MatMulNBits: random packed weights (their values are any integers of the width), per-block
    scales, zero points absent, packed or float; K not a multiple of the block in the first."""
    N = 8
    def weights(K, bits, block):
        blocks = (K + block - 1) // block
        packed = RNG.integers(0, 256, (N, blocks, block * bits // 8)).astype(np.uint8)
        scales = (RNG.random((N, blocks)) * 0.1 + 0.01).astype(np.float32)
        return blocks, packed, scales
    K = 40
    blocks, packed, scales = weights(K, 4, 16)
    case(out, "test_contrib_matmul_nbits_4bit_bias", "MatMulNBits",
         [("A", f32(B, S, K)), ("B", packed), ("scales", scales), ("zero_points", None), ("g_idx", None),
          ("bias", f32(N))], {"K": K, "N": N, "bits": 4, "block_size": 16}, initializers=("B", "scales", "bias"))
    zp = RNG.integers(0, 256, (N, (blocks * 4 + 7) // 8)).astype(np.uint8)
    case(out, "test_contrib_matmul_nbits_4bit_packed_zero_points", "MatMulNBits",
         [("A", f32(B, S, K)), ("B", packed), ("scales", scales), ("zero_points", zp)],
         {"K": K, "N": N, "bits": 4, "block_size": 16}, initializers=("B", "scales", "zero_points"))
    case(out, "test_contrib_matmul_nbits_4bit_float_zero_points", "MatMulNBits",
         [("A", f32(B, S, K)), ("B", packed), ("scales", scales),
          ("zero_points", (RNG.random((N, blocks)) * 15).astype(np.float32))],
         {"K": K, "N": N, "bits": 4, "block_size": 16}, initializers=("B", "scales", "zero_points"))
    K = 64
    blocks, packed, scales = weights(K, 8, 32)
    case(out, "test_contrib_matmul_nbits_8bit", "MatMulNBits",
         [("A", f32(B * S, K)), ("B", packed), ("scales", scales),
          ("zero_points", RNG.integers(0, 256, (N, blocks)).astype(np.uint8))],
         {"K": K, "N": N, "bits": 8, "block_size": 32}, initializers=("B", "scales", "zero_points"))
    blocks, packed, scales = weights(K, 2, 16)
    case(out, "test_contrib_matmul_nbits_2bit", "MatMulNBits",
         [("A", f32(B, S, K)), ("B", packed), ("scales", scales)], {"K": K, "N": N, "bits": 2, "block_size": 16},
         initializers=("B", "scales"))


def rotary_embedding(out, B, S, H):
    """RotaryEmbedding: [B, S, 16] of 2 heads of 8 with position ids, and without num_heads at an
    offset; heads first [B, 2, S, 8]; interleaved over the first 4 of each head."""
    heads, positions = 2, 12
    x, x4 = f32(B, S, H), f32(B, heads, S, H // heads)
    cos, sin = f32(positions, H // heads // 2), f32(positions, H // heads // 2)
    ids = RNG.integers(0, positions, (B, S)).astype(np.int64)
    case(out, "test_contrib_rotary_position_ids", "RotaryEmbedding",
         [("input", x), ("position_ids", ids), ("cos_cache", cos), ("sin_cache", sin)], {"num_heads": heads})
    case(out, "test_contrib_rotary_offset_no_heads", "RotaryEmbedding",
         [("input", x), ("position_ids", np.array([4], np.int64)), ("cos_cache", cos), ("sin_cache", sin)], {})
    case(out, "test_contrib_rotary_heads_first", "RotaryEmbedding",
         [("input", x4), ("position_ids", ids), ("cos_cache", cos), ("sin_cache", sin)], {})
    case(out, "test_contrib_rotary_interleaved_partial", "RotaryEmbedding",
         [("input", x), ("position_ids", ids), ("cos_cache", cos[:, :2].copy()), ("sin_cache", sin[:, :2].copy())],
         {"num_heads": heads, "rotary_embedding_dim": 4, "interleaved": 1})


def multi_head_attention(out, B, S, H):
    """MultiHeadAttention's forms: Q, K and V [B, S or L, 16] of 2 heads of 8 with a packed bias and
    each key mask; K and V heads first (the bias Q's alone); a past and the present; Q, K and V
    packed, and K and V packed (onnxruntime's CPU kernel reads neither: their expected outputs are
    its outputs for the same values unpacked)."""
    heads, L, P = 2, 7, 3
    hd = H // heads
    q, k, v, bias = f32(B, S, H), f32(B, L, H), f32(B, L, H), f32(3 * H)
    mha = [("query", q), ("key", k), ("value", v), ("bias", bias)]
    mask = np.array([[1, 1, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0]], np.int32)
    case(out, "test_contrib_mha_cross_mask_2d", "MultiHeadAttention", mha + [("key_padding_mask", mask)],
         {"num_heads": heads})
    case(out, "test_contrib_mha_mask_end", "MultiHeadAttention",
         mha + [("key_padding_mask", np.array([4, 7], np.int32))], {"num_heads": heads})
    mask3 = (RNG.random((B, S, L)) > 0.3).astype(np.int32)
    mask3[:, :, 0] = 1
    case(out, "test_contrib_mha_mask_3d", "MultiHeadAttention", mha + [("key_padding_mask", mask3)],
         {"num_heads": heads, "mask_filter_value": -1000.0})
    kh, vh = f32(B, heads, L, hd), f32(B, heads, L, hd)
    case(out, "test_contrib_mha_heads_first_bias", "MultiHeadAttention",
         [("query", q), ("key", kh), ("value", vh), ("bias", bias), ("key_padding_mask", None),
          ("attention_bias", f32(1, heads, S, L))], {"num_heads": heads, "scale": 0.25},
         outputs=("y", "present_key", "present_value"))
    ks, vs = f32(B, S, H), f32(B, S, H)
    past_mask = np.ones((B, P + S), np.int32)
    past_mask[1, 1] = 0
    case(out, "test_contrib_mha_past", "MultiHeadAttention",
         [("query", q), ("key", ks), ("value", vs), ("bias", bias), ("key_padding_mask", past_mask),
          ("attention_bias", f32(B, 1, S, P + S)), ("past_key", f32(B, heads, P, hd)),
          ("past_value", f32(B, heads, P, hd))], {"num_heads": heads},
         outputs=("y", "present_key", "present_value"))
    case(out, "test_contrib_mha_present_no_past", "MultiHeadAttention", [("query", q), ("key", ks), ("value", vs)],
         {"num_heads": heads}, outputs=("y", "present_key", "present_value"))
    packed = f32(B, S, heads, 3, hd)
    unpacked = [packed[:, :, :, i].reshape(B, S, H) for i in range(3)]
    case(out, "test_contrib_mha_packed_qkv", "MultiHeadAttention", [("query", packed)], {"num_heads": heads},
         oracle_inputs=[("query", unpacked[0]), ("key", unpacked[1]), ("value", unpacked[2])])
    packed_kv = f32(B, L, heads, 2, hd)
    case(out, "test_contrib_mha_packed_kv", "MultiHeadAttention",
         [("query", q), ("key", packed_kv), ("value", None), ("bias", None), ("key_padding_mask", mask)],
         {"num_heads": heads},
         oracle_inputs=[("query", q), ("key", packed_kv[:, :, :, 0].reshape(B, L, H)),
                        ("value", packed_kv[:, :, :, 1].reshape(B, L, H)), ("bias", None),
                        ("key_padding_mask", mask)])


def group_query_attention(out):
    """GroupQueryAttention: 4 query heads over 2 KV heads. A first prompt without a past; a decode
    step of ragged batches (past rows at and after each batch's length zero: onnxruntime zeroes
    those rows of the present, which the op leaves unspecified); a cache longer than the keys (a
    shared buffer) with a local window, softcap and scale; packed Q, K and V with a partial rotary
    embedding in a later chunk of one batch; a first prompt with position ids (their first value
    the offset), an attention bias, interleaved rotation and softcap; a prompt with a local window;
    a bidirectional prompt; a right-padded prompt. total_sequence_length and the caches are constants, as in the model
    builder's files (there the length is read from the attention mask's shape)."""
    N, Nkv = 4, 2
    gqa = {"num_heads": N, "kv_num_heads": Nkv}
    present = ("y", "present_key", "present_value")
    consts = ("total_sequence_length", "cos_cache", "sin_cache")

    def inputs(q, k, v, past, seqlens, total, *rest):
        pk, pv = past if past is not None else (None, None)
        return [("query", q), ("key", k), ("value", v), ("past_key", pk), ("past_value", pv),
                ("seqlens_k", np.array(seqlens, np.int32)), ("total_sequence_length", np.array(total, np.int32)),
                *rest]

    def qkv(B, S, H):
        return f32(B, S, N * H), f32(B, S, Nkv * H), f32(B, S, Nkv * H)

    def past(lengths, P, H):
        pk, pv = f32(len(lengths), Nkv, P, H), f32(len(lengths), Nkv, P, H)
        for b, n in enumerate(lengths):
            pk[b, :, n:] = 0
            pv[b, :, n:] = 0
        return pk, pv

    B, S, H = 2, 5, 16
    case(out, "test_contrib_gqa_prompt", "GroupQueryAttention", inputs(*qkv(B, S, H), None, [S - 1] * B, S), gqa,
         outputs=present, initializers=consts)
    case(out, "test_contrib_gqa_decode_ragged", "GroupQueryAttention",
         inputs(*qkv(B, 1, H), past([6, 3], 6, H), [6, 3], 7), gqa, outputs=present, initializers=consts)
    case(out, "test_contrib_gqa_shared_buffer_window_softcap", "GroupQueryAttention",
         inputs(*qkv(B, 1, H), past([5, 2], 8, H), [5, 2], 6), {**gqa, "local_window_size": 3, "softcap": 2.0,
                                                                 "scale": 0.3},
         outputs=present, initializers=consts)
    H = 32  # the caches rotate 16 of each head's 32 values
    rot = [("cos_cache", f32(16, 8)), ("sin_cache", f32(16, 8))]
    case(out, "test_contrib_gqa_packed_rotary_chunk", "GroupQueryAttention",
         inputs(f32(1, 3, (N + 2 * Nkv) * H), None, None, past([4], 4, H), [6], 7, *rot),
         {**gqa, "do_rotary": 1}, outputs=present, initializers=consts)
    H, S = 16, 4
    case(out, "test_contrib_gqa_position_ids_bias", "GroupQueryAttention",
         inputs(*qkv(B, S, H), past([0, 0], 0, H), [S - 1] * B, S, *rot,
                ("position_ids", np.array([[2, 3, 4, 5], [7, 1, 1, 1]], np.int64)),
                ("attention_bias", f32(B, 1, S, S))),
         {**gqa, "do_rotary": 1, "rotary_interleaved": 1, "softcap": 1.5}, outputs=present, initializers=consts)
    S = 6
    case(out, "test_contrib_gqa_prompt_window", "GroupQueryAttention", inputs(*qkv(B, S, H), None, [S - 1] * B, S),
         {**gqa, "local_window_size": 2}, initializers=consts)
    case(out, "test_contrib_gqa_bidirectional", "GroupQueryAttention", inputs(*qkv(B, S, H), None, [S - 1] * B, S),
         {**gqa, "causal": 0}, initializers=consts)
    # A batched first prompt, right-padded: batch 1's 3 tokens, then 2 of padding (whose rows see
    # the 3 keys); rotated, with a window of 2.
    S = 5
    case(out, "test_contrib_gqa_prompt_right_padded", "GroupQueryAttention",
         inputs(*qkv(B, S, H), None, [S - 1, 2], S, *rot), {**gqa, "do_rotary": 1, "local_window_size": 2},
         outputs=present, initializers=consts)


def window_cache(out):
    """GroupQueryAttention with sliding_window_cache=1: the caches are buffers of C rows (at least the
    window W) that hold the keys from position start(T) on, T the keys seen: 0 while T <= C, else
    T - W - (T - C - 1) mod (C - W + 1) (measured: onnxruntime keeps the last W - 1 keys, moved to
    the front, when the buffer would overflow). The pasts are written in that layout, rows after
    the keys zero; the present's rows after its keys are zero in the expected outputs, since
    onnxruntime leaves them unspecified (uninitialised memory in some runs). Cases: a first prompt
    longer than the buffer; a decoding step of ragged batches, one past the eviction; a rotated
    chunk with softcap that evicts; a buffer exactly the window's size."""
    N, Nkv = 4, 2
    present = ("y", "present_key", "present_value")
    consts = ("total_sequence_length", "cos_cache", "sin_cache")

    def start(T, C, W):
        return 0 if T <= C else T - W - (T - C - 1) % (C - W + 1)

    def run(name, B, S, H, C, W, lens, extra=(), attrs=None):
        past = [n - S for n in lens] if S != max(lens) else [0] * B
        pk, pv = f32(B, Nkv, C, H), f32(B, Nkv, C, H)
        for b, L in enumerate(past):
            held = L - start(L, C, W)
            pk[b, :, held:] = 0
            pv[b, :, held:] = 0

        def blank(ys):
            for b, T in enumerate(lens):
                held = T - start(T, C, W)
                ys[1][b, :, held:] = 0
                ys[2][b, :, held:] = 0

        inputs = [("query", f32(B, S, N * H)), ("key", f32(B, S, Nkv * H)), ("value", f32(B, S, Nkv * H)),
                  ("past_key", pk), ("past_value", pv), ("seqlens_k", np.array([n - 1 for n in lens], np.int32)),
                  ("total_sequence_length", np.array(max(lens), np.int32)), *extra]
        case(out, name, "GroupQueryAttention", inputs,
             {"num_heads": N, "kv_num_heads": Nkv, "local_window_size": W, "sliding_window_cache": 1,
              **(attrs or {})},
             outputs=present, initializers=consts, unspecified=blank)

    H = 16
    run("test_contrib_gqa_window_cache_prompt", 2, 8, H, 6, 4, [8, 8])
    run("test_contrib_gqa_window_cache_decode_ragged", 2, 1, H, 6, 4, [10, 6])
    rot = [("cos_cache", f32(16, 8)), ("sin_cache", f32(16, 8))]
    run("test_contrib_gqa_window_cache_rotary_chunk", 1, 3, H, 6, 4, [10], rot, {"do_rotary": 1, "softcap": 2.0})
    run("test_contrib_gqa_window_cache_window_sized", 2, 1, H, 4, 4, [10, 3])


def head_sinks(out):
    """GroupQueryAttention with head sinks (gpt-oss): a logit per head that joins each row of its
    softmax with no value, so the row's weights sum to less than 1; smooth_softmax=1's sinks are 0.
    A prompt; a decoding step of ragged batches with a window over a shared buffer; smooth_softmax;
    gpt-oss's sliding layers (a window-sized cache, rotated)."""
    N, Nkv, B = 4, 2, 2
    gqa = {"num_heads": N, "kv_num_heads": Nkv}
    present = ("y", "present_key", "present_value")
    consts = ("total_sequence_length", "cos_cache", "sin_cache", "head_sink")

    def sinks():
        return [("position_ids", None), ("attention_bias", None),
                ("head_sink", (2 * RNG.standard_normal(N)).astype(np.float32))]

    def inputs(S, H, P, lens, total, rest):
        pk = pv = None
        if P:
            pk, pv = f32(B, Nkv, P, H), f32(B, Nkv, P, H)
            for b, n in enumerate(lens):
                pk[b, :, n:] = 0
                pv[b, :, n:] = 0
        return [("query", f32(B, S, N * H)), ("key", f32(B, S, Nkv * H)), ("value", f32(B, S, Nkv * H)),
                ("past_key", pk), ("past_value", pv), ("seqlens_k", np.array(lens, np.int32)),
                ("total_sequence_length", np.array(total, np.int32)), *rest]

    H, S = 16, 5
    none = [("cos_cache", None), ("sin_cache", None)]
    case(out, "test_contrib_gqa_head_sink_prompt", "GroupQueryAttention",
         inputs(S, H, 0, [S - 1] * B, S, none + sinks()), gqa, outputs=present, initializers=consts)
    case(out, "test_contrib_gqa_head_sink_decode_window", "GroupQueryAttention",
         inputs(1, H, 8, [5, 2], 6, none + sinks()), {**gqa, "local_window_size": 3}, outputs=present,
         initializers=consts)
    case(out, "test_contrib_gqa_smooth_softmax", "GroupQueryAttention", inputs(S, H, 0, [S - 1] * B, S, []),
         {**gqa, "smooth_softmax": 1}, initializers=consts)
    # A window-sized cache of 6 rows, a window of 4: the layout window_cache() describes.
    C, W, lens = 6, 4, [10, 6]
    start = [0 if T <= C else T - W - (T - C - 1) % (C - W + 1) for T in lens]
    pk, pv = f32(B, Nkv, C, H), f32(B, Nkv, C, H)
    for b, T in enumerate(lens):
        L = T - 1
        held = L - (0 if L <= C else L - W - (L - C - 1) % (C - W + 1))
        pk[b, :, held:] = 0
        pv[b, :, held:] = 0

    def blank(ys):
        for b, T in enumerate(lens):
            ys[1][b, :, T - start[b]:] = 0
            ys[2][b, :, T - start[b]:] = 0

    case(out, "test_contrib_gqa_window_cache_head_sink", "GroupQueryAttention",
         [("query", f32(B, 1, N * H)), ("key", f32(B, 1, Nkv * H)), ("value", f32(B, 1, Nkv * H)),
          ("past_key", pk), ("past_value", pv), ("seqlens_k", np.array([n - 1 for n in lens], np.int32)),
          ("total_sequence_length", np.array(max(lens), np.int32)), ("cos_cache", f32(16, 8)),
          ("sin_cache", f32(16, 8)), *sinks()],
         {**gqa, "local_window_size": W, "sliding_window_cache": 1, "do_rotary": 1}, outputs=present,
         initializers=consts, unspecified=blank)


def mixture_of_experts(out):
    """MoE: 4 experts of hidden 8, intermediate 6. gpt-oss's form (swiglu interleaved, clamped at a
    limit low enough to bind, alpha 1.702, beta 1, the top 2 normalized, biases; 3-D input, the
    weights constants as the model builder writes them); relu with the top 1 and no biases; gelu;
    silu over all 4 experts, unnormalized; identity; swiglu's concatenated [g | l] (swiglu_fusion=2)
    and fc3 forms (0), whose expected outputs are onnxruntime's for the same weights interleaved
    (its CPU kernel reads only swiglu_fusion=1)."""
    E, H, F = 4, 8, 6
    weights = ("fc1_experts_weights", "fc1_experts_bias", "fc2_experts_weights", "fc2_experts_bias",
               "fc3_experts_weights", "fc3_experts_bias")

    def inputs(x, F1, bias=True, fc3=None):
        T = x.shape[0] * (x.shape[1] if x.ndim == 3 else 1)
        return [("input", x), ("router_probs", f32(T, E, scale=2)), ("fc1_experts_weights", f32(E, F1, H, scale=0.5)),
                ("fc1_experts_bias", f32(E, F1) if bias else None), ("fc2_experts_weights", f32(E, H, F, scale=0.5)),
                ("fc2_experts_bias", f32(E, H) if bias else None), *(fc3 or [])]

    def interleaved(g, l):  # [.., F, ..] twice as [.., 2F, ..]: g0, l0, g1, l1, ..
        return np.stack([g, l], axis=2).reshape(g.shape[0], 2 * g.shape[1], *g.shape[2:])

    gptoss = {"activation_type": "swiglu", "swiglu_fusion": 1, "swiglu_limit": 1.5, "activation_alpha": 1.702,
              "activation_beta": 1.0, "k": 2, "normalize_routing_weights": 1}
    case(out, "test_contrib_moe_swiglu_interleaved", "MoE", inputs(f32(2, 3, H), 2 * F), gptoss,
         initializers=weights)
    case(out, "test_contrib_moe_relu_top1", "MoE", inputs(f32(5, H), F, bias=False), {"k": 1})
    case(out, "test_contrib_moe_gelu", "MoE", inputs(f32(5, H), F), {"k": 2, "activation_type": "gelu"},
         initializers=weights)
    case(out, "test_contrib_moe_silu_all_experts", "MoE", inputs(f32(5, H), F),
         {"k": E, "activation_type": "silu"}, initializers=weights)
    case(out, "test_contrib_moe_identity", "MoE", inputs(f32(5, H), F), {"k": 3, "activation_type": "identity",
                                                                        "normalize_routing_weights": 1})
    concat = inputs(f32(2, 3, H), 2 * F)
    w1, b1 = concat[2][1], concat[3][1]
    as_pairs = [concat[0], concat[1], ("fc1_experts_weights", interleaved(w1[:, :F], w1[:, F:])),
                ("fc1_experts_bias", interleaved(b1[:, :F], b1[:, F:])), concat[4], concat[5]]
    case(out, "test_contrib_moe_swiglu_concatenated", "MoE", concat, {**gptoss, "swiglu_fusion": 2},
         initializers=weights, oracle_inputs=as_pairs, oracle_attrs=gptoss)
    split = inputs(f32(5, H), F, fc3=[("fc3_experts_weights", f32(E, F, H, scale=0.5)),
                                       ("fc3_experts_bias", f32(E, F))])
    fused = [split[0], split[1], ("fc1_experts_weights", interleaved(split[2][1], split[6][1])),
             ("fc1_experts_bias", interleaved(split[3][1], split[7][1])), split[4], split[5]]
    case(out, "test_contrib_moe_swiglu_fc3", "MoE", split, {**gptoss, "swiglu_fusion": 0}, initializers=weights,
         oracle_inputs=fused, oracle_attrs=gptoss)


def causal_conv_with_state(out):
    """CausalConvWithState (LFM2's convolution layers, Mamba's and Gated DeltaNet's preprocessing): a
    depthwise causal convolution over the last axis, its carry state the last (k - 1) * dilation
    positions. A prompt with a bias and no past; a decoding step after a past, SiLU; a dilated
    chunk; the channels-last layout with swish."""
    state = ("y", "present_state")

    def conv(name, x, k, attrs, past=None, bias=True, channels=None):
        C = channels or x.shape[1]
        case(out, name, "CausalConvWithState",
             [("input", x), ("weight", f32(C, 1, k)), ("bias", f32(C) if bias else None), ("past_state", past)],
             {"ndim": 1, **attrs}, outputs=state, initializers=("weight", "bias"))

    conv("test_contrib_causal_conv_prompt", f32(2, 6, 5), 3, {})
    conv("test_contrib_causal_conv_step_silu", f32(2, 6, 1), 3, {"activation": "silu"}, past=f32(2, 6, 2), bias=False)
    conv("test_contrib_causal_conv_dilated_chunk", f32(1, 4, 5), 3, {"dilation": 2}, past=f32(1, 4, 4))
    conv("test_contrib_causal_conv_channels_last", f32(2, 5, 6), 3, {"channels_last": 1, "activation": "swish"},
         past=f32(2, 2, 6), channels=6)


if __name__ == "__main__":
    main()
