"""onnxruntime-genai's model builder (onnxruntime_genai.models.builder), as a user turns a Hugging Face
decoder into the files onnxruntime-genai runs: each layer's attention one GroupQueryAttention (packed
QKV, rotary inside, the KV cache heads first), its norms SkipSimplifiedLayerNormalization. The model
is seeded random and saved with a word-level tokenizer of its vocabulary (the builder reads one);
the test data sets are PyTorch's logits and caches for the same steps:

    0  a prompt: batch 2, sequence 32, an empty cache (past length 0)
    1  a decoding step: batch 2, one token after that prompt's cache
    2  a later chunk of a prompt: batch 1, 5 tokens after 7 cached
    3  data set 1's step with the cache in a buffer of 64 rows, as onnxruntime-genai runs the
       model on CUDA (past and present share one buffer): the rows past each batch's length are
       zeros in the past, and the present's are expected zero too (the op leaves them unspecified;
       onnxruntime's CPU kernel zeroes them, and a kernel that writes the new rows in place keeps
       the past's)

With `precision` "fp16" the builder writes float16 weights, caches and logits; the expected
outputs are PyTorch's for the model in float16. Its file for `provider` "cuda" is the one
onnxruntime-genai runs on NVIDIA GPUs: GroupQueryAttention in float16 over a cache buffer shared
by past and present (genai_config.json's past_present_share_buffer), data set 3's form. Its CPU
file writes attention as MultiHeadAttention and RotaryEmbedding over a causal mask of ONNX ops
instead (onnxruntime 1.32 fails on that file's decoding step: "Shape mismatch attempting to
re-use buffer"), and has data sets 0 and 1 only: its causal mask, [S, S] expanded to the keys,
and its attention mask over the past's rows do not admit a later chunk or a cache buffer (its
graph's own shapes fail).
With `precision` "int4" the builder quantizes every MatMul's weight to MatMulNBits (4 bits, blocks of
32), as genai's int4 files ship, and each data set's expected outputs are onnxruntime's for the file
(with its graph optimizations off, each node as written, and the MatMulNBits at accuracy level 1,
float32 products: below), not PyTorch's.

With `expect` "onnxruntime" the expected outputs are onnxruntime's for the file: for a model the
builder writes other than the Hugging Face model computes (OLMo's parameter-free LayerNorm written as
SimplifiedLayerNormalization, an RMSNorm: onnxruntime's logits 0.19 from PyTorch's on the prompt,
measured). The builder also writes every norm's epsilon as 1e-6 where it does not find the config's
(Phi-2's layer_norm_eps, Nemotron's norm_eps: 8.3e-3 and 2.7e-2 from PyTorch's at their default
1e-5), so export.py gives those models epsilon 1e-6 and keeps PyTorch's outputs.

Where the builder gives a layer a window-sized cache (Gemma 2's sliding layers: GroupQueryAttention
with sliding_window_cache=1), that layer's past and present are buffers of the window's rows in
onnxruntime's layout (the keys from position T - W on once T > W keys were seen), its past filled
from the Hugging Face cache (which keeps the last W - 1 keys). The expected outputs are
onnxruntime's for the file (at fp32), or PyTorch's with the present in that layout (at fp16: the
file for CUDA runs on onnxruntime's CUDA kernels only); the present's rows after its keys are zero
(the op leaves them unspecified).

Without padding: the builder's attention reads each batch's length from the mask and takes the
cached keys as the first ones, which a left-padded Hugging Face cache is not.

A convolution layer's carry state (LFM2: CausalConvWithState, past.i.conv and present.i.conv) is
the last k - 1 inputs of its convolution; the Hugging Face cache keeps the last k (updated in place
by the next step, so it is copied when read), and starts from zeros.
Needs `pip install onnxruntime-genai` next to export.py's packages. Tooling only."""
import copy
import os
import subprocess
import sys
import tempfile

import onnx
import torch
from transformers import DynamicCache


def save_tokenizer(path, vocab):
    import transformers as tf
    from tokenizers import Tokenizer, models, pre_tokenizers
    words = {f"t{i}": i for i in range(vocab)}
    tok = Tokenizer(models.WordLevel(words, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tf.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0", bos_token="t1",
                               eos_token="t2").save_pretrained(path)


def export_genai(make_model, save_case, out, precision="fp32", provider="cpu", expect="pytorch"):
    torch.manual_seed(0)
    model = make_model().eval()
    cfg = model.config
    with tempfile.TemporaryDirectory() as tmp:
        hf = os.path.join(tmp, "hf")
        model.save_pretrained(hf)
        save_tokenizer(hf, cfg.vocab_size)
        subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-m", "local", "-i", hf,
                        "-o", out, "-p", precision, "-e", provider, "-c", os.path.join(tmp, "cache")],
                       check=True, stdout=subprocess.DEVNULL)
    graph = onnx.load(os.path.join(out, "model.onnx"), load_external_data=False).graph
    names_in = [i.name for i in graph.input]
    half = {i.name for i in graph.input if i.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16}
    names_out = [o.name for o in graph.output]
    layers = cfg.num_hidden_layers
    heads_kv = cfg.num_key_value_heads
    head = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads

    # Layers with a window-sized cache: their past and present names, and the window.
    windowed = {}
    for node in graph.node:
        attrs = {a.name: a.i for a in node.attribute}
        if node.op_type == "GroupQueryAttention" and attrs.get("sliding_window_cache", 0):
            for past_name, present_name in zip(node.input[3:5], node.output[1:3]):
                windowed[past_name] = (present_name, attrs["local_window_size"])

    oracle = None  # PyTorch's outputs; else onnxruntime's
    if precision == "fp16":
        model = model.half()  # the builder's float16 weights are these roundings
    elif precision != "fp32" or windowed or expect == "onnxruntime":  # fp32 window caches: its layout
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        # The builder asks for accuracy_level 4, which lets onnxruntime quantize A to int8 blocks
        # (1.6e-2 apart from the float product on these logits, measured); the op's value is the
        # float product of A and the dequantized weight: onnxruntime's at level 1 (float32).
        file = onnx.load(os.path.join(out, "model.onnx"))
        for node in file.graph.node:
            for a in node.attribute:
                if node.op_type == "MatMulNBits" and a.name == "accuracy_level":
                    a.i = 1
        oracle = ort.InferenceSession(file.SerializeToString(), so, providers=["CPUExecutionProvider"])

    # Convolution layers' carry states (LFM2: CausalConvWithState), [B, C, k - 1] as declared.
    conv_state = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim]
                  for i in graph.input if i.name.startswith("past.") and i.name.endswith(".conv")}

    def fresh_cache():  # layers of their own kinds where some hold convolution states
        return DynamicCache(config=cfg) if conv_state else DynamicCache()

    def cache_of(c):
        kv = {}
        for i in range(layers):
            layer = c.layers[i]
            if hasattr(layer, "conv_states"):  # PyTorch keeps the last k inputs; the state is the last k - 1
                kv[f"conv.{i}"] = layer.conv_states[0][..., 1:].clone()  # the step updates it in place
            else:
                kv[f"key.{i}"], kv[f"value.{i}"] = layer.keys, layer.values
        return kv

    def grown(t, rows):  # [B, Nkv, T, H] with zero rows after it up to `rows`
        return t if rows is None else torch.nn.functional.pad(t, (0, 0, 0, rows - t.shape[2]))

    def window_buffer(t, seen, window):
        """The last keys of `seen` (t [B, Nkv, n, H], positions seen - n on) in a buffer of `window`
        rows holding the positions from max(seen - window, 0) on, zeros after them."""
        first, start = seen - t.shape[2], max(seen - window, 0)
        buf = torch.zeros(t.shape[0], t.shape[1], window, t.shape[3], dtype=t.dtype)
        for p in range(max(first, start), seen):
            buf[:, :, p - start] = t[:, :, p - first]
        return buf

    def step(k, ids, past, rows=None):
        """Runs `ids` after `past` (a DynamicCache or None) and saves data set k; with `rows`, the
        past and present caches are given in buffers of that many rows."""
        batch, seq = ids.shape
        cached = 0 if past is None else past.get_seq_length()
        mask = torch.ones(batch, cached + seq, dtype=torch.int64)
        empty = torch.zeros(batch, heads_kv, 0, head, dtype=model.dtype)
        before = cache_of(past) if past is not None else {}
        with torch.no_grad():
            r = model(input_ids=ids, attention_mask=mask, past_key_values=past if past is not None else fresh_cache(),
                      use_cache=True)
        after = cache_of(r.past_key_values)
        # position_ids: read by the float16 files (attention as MultiHeadAttention there)
        feeds = {"input_ids": ids, "attention_mask": mask,
                 "position_ids": torch.arange(cached, cached + seq).expand(batch, seq).contiguous()}
        for i in range(layers):
            for part in ("key", "value"):
                name, t = f"past_key_values.{i}.{part}", before.get(f"{part}.{i}", empty)
                feeds[name] = window_buffer(t, cached, windowed[name][1]) if name in windowed else grown(t, rows)
            if f"past.{i}.conv" in conv_state:  # zeros before the first input
                _, channels, held = conv_state[f"past.{i}.conv"]
                feeds[f"past.{i}.conv"] = before.get(f"conv.{i}", torch.zeros(batch, channels, held, dtype=model.dtype))
        feeds = {n: t.half() if n in half else t for n, t in feeds.items()}
        results = {"logits": r.logits}
        for i in range(layers):
            if f"conv.{i}" in after:
                results[f"present.{i}.conv"] = after[f"conv.{i}"]
                continue
            for part in ("key", "value"):
                name = f"past_key_values.{i}.{part}"
                if name in windowed:  # the past's keys and this step's, in the window's layout
                    t = torch.cat([before.get(f"{part}.{i}", empty), after[f"{part}.{i}"][:, :, -seq:]], 2)
                    results[windowed[name][0]] = window_buffer(t, cached + seq, windowed[name][1])
                else:
                    results[f"present.{i}.{part}"] = grown(after[f"{part}.{i}"], rows)
        outs = [results[n] for n in names_out]
        if oracle is not None:
            outs = oracle.run(None, {n: feeds[n].numpy() for n in names_in})
            for present_name, window in windowed.values():
                o = names_out.index(present_name)
                outs[o][:, :, min(cached + seq, window):] = 0
        save_case(out, names_in, [feeds[n] for n in names_in], names_out, outs, k)
        return r.past_key_values

    g = torch.Generator().manual_seed(1)
    tokens = lambda b, s: torch.randint(0, cfg.vocab_size, (b, s), generator=g)  # noqa: E731
    prompt = tokens(2, 32)
    with torch.no_grad():
        cache = model(input_ids=prompt, use_cache=True).past_key_values
    step(0, prompt, None)
    token = tokens(2, 1)
    step(1, token, copy.deepcopy(cache))
    with torch.no_grad():
        chunk_cache = model(input_ids=tokens(1, 7), use_cache=True).past_key_values
    if not any(n.op_type == "GroupQueryAttention" for n in graph.node):
        return  # the float16 CPU file: its mask is [S, S] expanded to the keys, over the past's rows
    step(2, tokens(1, 5), chunk_cache)
    step(3, token, cache, rows=64)
