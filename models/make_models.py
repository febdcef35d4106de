#!/usr/bin/env python3
"""Makes the small real-architecture models in models/ with their test data.

Each model is a PyTorch module with seeded random weights, exported to ONNX
the way users export them, with test_data_set_0/ holding inputs and the
outputs PyTorch itself computed (never stitch's own interpreter):

  bert_tiny   HuggingFace BertModel, 2 layers, TorchScript exporter, opset 17,
              dynamic batch/sequence axes (Shape->Gather->Concat->Reshape chains)
  gpt2_tiny   HuggingFace GPT2Model, 2 layers, causal mask, TorchScript, opset 14
  llama_tiny  HuggingFace LlamaModel, 2 layers (RMSNorm, rotary embedding, SiLU
              gating, causal mask), torch.export-based exporter, opset 18
  gpt2_tiny_f16   gpt2_tiny's config in float16 (weights and compute), torch.export-based
              exporter, opset 18 (the TorchScript exporter casts a half GPT-2 to float32 after
              its first layer norm and declares a float32 output)
  llama_tiny_bf16 llama_tiny's config in bfloat16, torch.export-based exporter, opset 18
  mixtral_tiny  a Mixtral of llama_tiny's size with 4 experts a layer (the top 2 of each token's
              router softmax), torch.export-based exporter, opset 18: transformers gathers each
              routed token's expert weights (GatherND) for a batched MatMul; PyTorch's outputs
  qwen2_moe_tiny  a Qwen2-MoE of mixtral_tiny's size: 4 routed experts of width 32 (the top 2) and
              a shared expert of width 64 gated per token by a sigmoid, torch.export-based
              exporter, opset 18; PyTorch's outputs
  glm4_moe_tiny  a GLM-4-MoE of mixtral_tiny's size (DeepSeek-V3's router): a dense first layer,
              then 4 routed experts of width 32 chosen by sigmoid scores plus a correction bias (the
              top 2, their scores gathered and renormalized) and a shared expert of width 32,
              torch.export-based exporter, opset 18; PyTorch's outputs
  deepseek_v3_tiny  DeepSeek-V3 at mixtral_tiny's size with its routing limited to groups: 8
              experts of width 16 in 4 groups (each group's score the sum of its top 2, the best 2
              groups kept), the top 2 experts, a shared expert, a dense first layer, multi-head
              latent attention; torch.export-based exporter, opset 18; PyTorch's outputs
  deepseek_v4_tiny  DeepSeek-V4 at llama_tiny's size (4 experts of width 32, the top 2): the
              hyper-connections' 4 residual streams mixed per token by a 4 x 4 matrix normalized by
              20 Sinkhorn steps; torch.export-based exporter, opset 18; PyTorch's outputs
  llama_tiny_dec  llama_tiny's config, one step of incremental decoding: the next token, the
              attention mask [batch, past + 1] (so torch.export names its length) and each
              layer's cached keys and values from a prefill of 16 tokens -> the last hidden state
              and the present keys and values; torch.export-based exporter, opset 18
  cnn_small   torchvision-style CNN: conv/BN/ReLU stem, max pool, residual
              blocks, depthwise conv with squeeze-excite and HardSwish
              (MobileNetV3-like), global pool, linear head; TorchScript, opset 13
  seg_small   a small encoder-decoder segmentation net whose feature maps are resampled four
              ways (Resize: bilinear up, nearest to a size, antialiased bilinear down, bicubic
              with corners aligned), softmax over classes; torch.export-based exporter, opset 18
  unet_small  a small UNet as diffusion models build it: residual blocks of GroupNorm (4 groups),
              SiLU and 3x3 convolutions, a strided convolution down, nearest 2x up, a skip
              concatenation, GroupNorm + SiLU before the output convolution; torch.export-based
              exporter, opset 18 (GroupNorm as a Reshape into groups, InstanceNormalization,
              a Reshape back, the channel weight and bias)
  bert_tiny_qdq, cnn_small_qdq  bert_tiny and cnn_small quantized to the QDQ form by ONNX
              Runtime's static quantizer (uint8 activations, int8 weights, cnn_small's per output
              channel); expected outputs from onnxruntime running the QuantizeLinear and
              DequantizeLinear nodes as written (graph optimizations off)
  bert_tiny_dyn  bert_tiny through ONNX Runtime's dynamic quantizer (quantize_dynamic: int8
              weights, each MatMul's activation quantized at run time by DynamicQuantizeLinear, the
              product a MatMulInteger made float and scaled); expected outputs from onnxruntime
  cnn_small_qop  cnn_small through ONNX Runtime's static quantizer in the operator format
              (QLinearConv with int8 weights per output channel; the other ops stay float between
              QuantizeLinear and DequantizeLinear); expected outputs from onnxruntime
  gpt2_tiny_ort, llama_tiny_ort  gpt2_tiny and llama_tiny rewritten by onnxruntime's transformer
              optimizer: SkipLayerNormalization (its sum of input and skip read by the next
              layer), FastGelu and onnxruntime's LayerNormalization below opset 17 (gpt2_tiny is
              opset 14); SimplifiedLayerNormalization and SkipSimplifiedLayerNormalization
              (llama_tiny's RMSNorms); PyTorch's outputs, as for the models they are made from
  qwen3_tiny_genai  a Qwen3 of llama_tiny's size (per-head Q/K RMSNorms) through onnxruntime-genai's
              model builder: GroupQueryAttention (packed QKV, rotary inside, a KV cache),
              SkipSimplifiedLayerNormalization, logits; data sets for a prompt (2 x 32, empty cache),
              a decoding step after it, a chunk after a cache, and the step with past and present
              in one 64-row buffer (the KV cache written in place), PyTorch's outputs
  gptoss_tiny_genai  a gpt-oss of the same size through the same builder: its experts one
              com.microsoft::MoE per layer (4 of them, the top 2, a clamped swiglu with biases),
              head sinks in GroupQueryAttention, a window-sized cache (8 rows) in its first layer;
              the same four data sets, onnxruntime's outputs (its window-sized cache's layout)
  bert_legacy_ort  a BERT of bert_tiny's size written as transformers wrote it before its mask
              rewrites (an additive -10000 mask), TorchScript at opset 14, through the same
              optimizer, which recognises its attention and embeddings: EmbedLayerNormalization
              (its mask index read by both layers), Attention, SkipLayerNormalization, BiasGelu

Needs (tooling only, not the compiler): pip install torch transformers onnx onnxscript onnxruntime
onnxruntime-genai
Run: python3 models/make_models.py [--out models] [--only NAME ...]
"""
import argparse
import os
import warnings

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from cnn_modules import SegSmall, SmallCNN, UNetSmall, randomize_batchnorm, randomize_groupnorm

warnings.filterwarnings("ignore")


def to_numpy(t):
    """numpy has no bfloat16: through ml_dtypes' (onnx's own dependency), which onnx saves as BFLOAT16.
    Arrays (onnxruntime's outputs) pass as they are."""
    if isinstance(t, np.ndarray):
        return t
    t = t.detach()
    if t.dtype == torch.bfloat16:
        import ml_dtypes
        return t.float().numpy().astype(ml_dtypes.bfloat16)  # exact: every bfloat16 is a float
    return t.numpy()


def save_test_data(out_dir, name, inputs, input_names, outputs, output_names, k=0):
    d = os.path.join(out_dir, name, f"test_data_set_{k}")
    os.makedirs(d, exist_ok=True)
    for i, (n, t) in enumerate(zip(input_names, inputs)):
        onnx.save_tensor(numpy_helper.from_array(to_numpy(t), n), os.path.join(d, f"input_{i}.pb"))
    for i, (n, t) in enumerate(zip(output_names, outputs)):
        onnx.save_tensor(numpy_helper.from_array(to_numpy(t), n), os.path.join(d, f"output_{i}.pb"))


def export(module, inputs, out_dir, name, input_names, output_names, dynamic_axes, opset, dynamo=False):
    module.eval()
    with torch.no_grad():
        outputs = module(*inputs)
    if not isinstance(outputs, (tuple, list)):
        outputs = (outputs,)
    path = os.path.join(out_dir, name, "model.onnx")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if dynamo:
        dims = {}
        shapes = []
        for n in input_names:
            axes = dynamic_axes.get(n, {})
            shapes.append({a: dims.setdefault(s, torch.export.Dim(s, min=1, max=1024)) for a, s in axes.items()})
        prog = torch.onnx.export(module, tuple(inputs), None, input_names=input_names, output_names=output_names,
                                 dynamic_shapes=tuple(shapes), opset_version=opset, dynamo=True)
        prog.save(path, external_data=False)
    else:
        torch.onnx.export(module, tuple(inputs), path, input_names=input_names, output_names=output_names,
                          dynamic_axes=dynamic_axes, opset_version=opset, dynamo=False)
    onnx.checker.check_model(onnx.load(path))
    save_test_data(out_dir, name, inputs, input_names, outputs, output_names)
    print(f"{name}: {os.path.getsize(path)} bytes, opset {opset}")


def quantize_qdq(out_dir, src, name, per_channel, how="qdq"):
    """`src` quantized by ONNX Runtime's quantizer: `how` "qdq" (the QDQ form of its static quantizer,
    calibrated on its own test inputs: uint8 activations and int8 weights, per output channel with
    `per_channel`), "operator" (the same in the operator format: QLinearConv for each Conv) or
    "dynamic" (quantize_dynamic: int8 weights, MatMulInteger). The expected outputs are onnxruntime's
    with its graph optimizations off, which runs each node as written (the optimized session runs
    integer kernels that round elsewhere)."""
    import glob
    import shutil

    import onnxruntime as ort
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                          quantize_static)

    src_dir, d = os.path.join(out_dir, src), os.path.join(out_dir, name)
    model = onnx.load(os.path.join(src_dir, "model.onnx"))
    inits = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    files = sorted(glob.glob(os.path.join(src_dir, "test_data_set_0", "input_*.pb")))
    feed = {n: numpy_helper.to_array(onnx.load_tensor(f)) for n, f in zip(names, files)}

    class Once(CalibrationDataReader):
        def __init__(self):
            self.left = [feed]

        def get_next(self):
            return self.left.pop() if self.left else None

    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    path = os.path.join(d, "model.onnx")
    if how == "dynamic":
        quantize_dynamic(os.path.join(src_dir, "model.onnx"), path, weight_type=QuantType.QInt8)
    else:
        # The operator format quantizes only the convolutions: its other operators (QLinearAdd,
        # QGemm...) are ONNX Runtime's own (domain com.microsoft), not ONNX's.
        quantize_static(os.path.join(src_dir, "model.onnx"), path, Once(),
                        quant_format=QuantFormat.QDQ if how == "qdq" else QuantFormat.QOperator,
                        per_channel=per_channel, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        op_types_to_quantize=None if how == "qdq" else ["Conv"])
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for f in files:
        shutil.copy(f, os.path.join(d, "test_data_set_0"))
    for i, (o, t) in enumerate(zip(sess.get_outputs(), sess.run(None, feed))):
        onnx.save_tensor(numpy_helper.from_array(t, o.name), os.path.join(d, "test_data_set_0", f"output_{i}.pb"))
    print(f"{name}: {os.path.getsize(path)} bytes, {how} quantization of {src}")


def ort_optimized(src_dir, d, model_type):
    """The model in `src_dir` rewritten into `d` by onnxruntime's transformer optimizer
    (optimize_model, its fusions only: opt_level 0), as `optimum-cli export onnx --optimize`
    writes its files: onnxruntime's contrib ops in place of each layer's
    normalizations, GELU and, where it recognises them, attention and embeddings. Its expected
    outputs stay PyTorch's (the data set of `src_dir`, copied)."""
    import shutil

    from onnxruntime.transformers.optimizer import optimize_model

    src, name = os.path.basename(src_dir), os.path.basename(d)
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(os.path.join(src_dir, "test_data_set_0"), os.path.join(d, "test_data_set_0"))
    path = os.path.join(d, "model.onnx")
    optimize_model(os.path.join(src_dir, "model.onnx"), model_type=model_type, num_heads=4, hidden_size=64,
                   opt_level=0).save_model_to_file(path)
    ops = sorted({n.op_type for n in onnx.load(path).graph.node if n.domain == "com.microsoft"})
    print(f"{name}: {os.path.getsize(path)} bytes, {src} with {', '.join(ops)}")


class LegacyBert(torch.nn.Module):
    """BERT as earlier transformers versions wrote it, before their attention-mask rewrites: the mask
    made additive as (1 - mask) * -10000 and added to the scaled scores, segment ids of zeros and a
    buffer of positions. onnxruntime's transformer optimizer recognises this form and writes its
    Attention and EmbedLayerNormalization ops, which it does not for transformers 5's BERT exports."""

    def __init__(self, vocab=1000, hidden=128, heads=4, ffn=512, layers=2, positions=64):
        super().__init__()
        self.heads, self.head = heads, hidden // heads
        self.words, self.positions = torch.nn.Embedding(vocab, hidden), torch.nn.Embedding(positions, hidden)
        self.segments, self.norm = torch.nn.Embedding(2, hidden), torch.nn.LayerNorm(hidden, eps=1e-12)
        lin = torch.nn.Linear
        self.layers = torch.nn.ModuleList(torch.nn.ModuleDict({
            "q": lin(hidden, hidden), "k": lin(hidden, hidden), "v": lin(hidden, hidden), "o": lin(hidden, hidden),
            "norm1": torch.nn.LayerNorm(hidden, eps=1e-12), "up": lin(hidden, ffn), "down": lin(ffn, hidden),
            "norm2": torch.nn.LayerNorm(hidden, eps=1e-12)}) for _ in range(layers))
        self.register_buffer("position_ids", torch.arange(positions).expand((1, -1)))

    def split(self, x):
        return x.view(x.size(0), x.size(1), self.heads, self.head).permute(0, 2, 1, 3)

    def forward(self, input_ids, attention_mask):
        x = self.words(input_ids) + self.segments(torch.zeros_like(input_ids))
        x = self.norm(x + self.positions(self.position_ids[:, :input_ids.size(1)]))
        additive = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
        for l in self.layers:
            q, k, v = self.split(l["q"](x)), self.split(l["k"](x)), self.split(l["v"](x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / (self.head ** 0.5) + additive
            c = torch.matmul(torch.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).contiguous()
            x = l["norm1"](l["o"](c.view(c.size(0), c.size(1), -1)) + x)
            x = l["norm2"](l["down"](torch.nn.functional.gelu(l["up"](x))) + x)
        return {"last_hidden_state": x}


class LegacyWrapper(torch.nn.Module):
    """LegacyBert's last hidden state as a tensor."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids, attention_mask)["last_hidden_state"]


class HFWrapper(torch.nn.Module):
    """Calls a HuggingFace model with keyword arguments and returns a tuple."""

    def __init__(self, model, keys):
        super().__init__()
        self.model, self.keys = model, keys

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        return tuple(getattr(out, k) for k in self.keys)


class DecodeStep(torch.nn.Module):
    """One decoding step: (input_ids, attention_mask, key_0, value_0, key_1, ...) -> (last hidden
    state, present key_0, present value_0, ...), the cache a transformers DynamicCache."""

    def __init__(self, model, layers):
        super().__init__()
        self.model, self.layers = model, layers

    def forward(self, input_ids, attention_mask, *cache):
        from transformers import DynamicCache
        c = DynamicCache()
        for i in range(self.layers):
            c.update(cache[2 * i], cache[2 * i + 1], i)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, past_key_values=c, use_cache=True)
        present = out.past_key_values.layers
        return (out.last_hidden_state, *[t for i in range(self.layers) for t in (present[i].keys, present[i].values)])


def export_decode_step(model, layers, out_dir, name, gen, batch=2, past=16):
    """A prefill of `past` tokens makes the cache; the step's mask pads the second sequence's first 3."""
    model.eval()
    prefix = torch.randint(0, model.config.vocab_size, (batch, past), generator=gen)
    mask = torch.ones(batch, past + 1, dtype=torch.long)
    mask[1, :3] = 0
    with torch.no_grad():
        pre = model(input_ids=prefix, attention_mask=mask[:, :past], use_cache=True).past_key_values
    cache = [t for i in range(layers) for t in (pre.layers[i].keys, pre.layers[i].values)]
    token = torch.randint(0, model.config.vocab_size, (batch, 1), generator=gen)
    step = DecodeStep(model, layers).eval()
    inputs = [token, mask, *cache]
    with torch.no_grad():
        outputs = step(*inputs)
    kv = [f"{k}_{i}" for i in range(layers) for k in ("key", "value")]
    input_names = ["input_ids", "attention_mask"] + [f"past_{n}" for n in kv]
    output_names = ["last_hidden_state"] + [f"present_{n}" for n in kv]
    b, p = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("past", min=1, max=1024)
    shapes = ({0: b}, {0: b, 1: p + 1}, tuple({0: b, 2: p} for _ in cache))  # *cache is one tuple
    path = os.path.join(out_dir, name, "model.onnx")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    prog = torch.onnx.export(step, tuple(inputs), None, input_names=input_names, output_names=output_names,
                             dynamic_shapes=shapes, opset_version=18, dynamo=True)
    prog.save(path, external_data=False)
    onnx.checker.check_model(onnx.load(path))
    save_test_data(out_dir, name, inputs, input_names, outputs, output_names)
    print(f"{name}: {os.path.getsize(path)} bytes, opset 18")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--only", nargs="+", help="write only these models (the others' weights stay as they are)")
    args = ap.parse_args()
    want = lambda name: not args.only or name in args.only
    from transformers import BertConfig, BertModel, GPT2Config, GPT2Model, LlamaConfig, LlamaModel

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 100, (2, 16), generator=gen)
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 11:] = 0  # a padded sequence exercises the attention mask
    seq_axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}

    def drawn_apart(seed, make):
        """make() under a seed of its own: the models after it draw as they did before it was added."""
        rng = torch.get_rng_state()
        torch.manual_seed(seed)
        model = make()
        torch.set_rng_state(rng)
        return model

    def random_correction_bias(model):
        """DeepSeek-V3's router bias drawn at random, as training leaves it (zero by default)."""
        with torch.no_grad():
            for name, buf in model.named_buffers():
                if name.endswith("e_score_correction_bias"):
                    buf.copy_(torch.randn(buf.shape) * 0.5)
        return model

    def export_hidden(model, name):  # a transformers decoder's last hidden state, torch.export, opset 18
        export(HFWrapper(model, ["last_hidden_state"]), [ids, gmask], args.out, name,
               ["input_ids", "attention_mask"], ["last_hidden_state"], seq_axes, 18, dynamo=True)

    bert = BertModel(BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=128, max_position_embeddings=64), add_pooling_layer=True)
    if want("bert_tiny"):
        export(HFWrapper(bert, ["last_hidden_state", "pooler_output"]), [ids, mask], args.out, "bert_tiny",
               ["input_ids", "attention_mask"], ["last_hidden_state", "pooler_output"], seq_axes, 17)

    gpt2 = GPT2Model(GPT2Config(vocab_size=100, n_embd=64, n_layer=2, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0))
    gmask = torch.ones(2, 16, dtype=torch.long)
    if want("gpt2_tiny"):
        export(HFWrapper(gpt2, ["last_hidden_state"]), [ids, gmask], args.out, "gpt2_tiny",
               ["input_ids", "attention_mask"], ["last_hidden_state"], seq_axes, 14)

    llama = LlamaModel(LlamaConfig(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))
    if want("llama_tiny"):
        export(HFWrapper(llama, ["last_hidden_state"]), [ids, gmask], args.out, "llama_tiny",
               ["input_ids", "attention_mask"], ["last_hidden_state"], seq_axes, 18, dynamo=True)

    cnn = SmallCNN()
    randomize_batchnorm(cnn, gen)
    img = torch.randn(2, 3, 32, 32, generator=gen)
    if want("cnn_small"):
        export(cnn, [img], args.out, "cnn_small", ["image"], ["probabilities"], {"image": {0: "batch"}}, 13)
    seg = SegSmall()
    randomize_batchnorm(seg, gen)
    seg_img = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(6))
    if want("seg_small"):
        export(seg, [seg_img], args.out, "seg_small", ["image"], ["probabilities"], {"image": {0: "batch"}}, 18,
               dynamo=True)

    unet = UNetSmall()
    randomize_groupnorm(unet, torch.Generator().manual_seed(7))
    unet_img = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(8))
    if want("unet_small"):
        export(unet, [unet_img], args.out, "unet_small", ["image"], ["output"], {"image": {0: "batch"}}, 18,
               dynamo=True)

    # Half precision, as models are deployed on GPUs: the same configs with weights and compute in
    # float16 and bfloat16, PyTorch's CPU kernels computing the expected outputs in that type.
    torch.manual_seed(3)
    gpt2_h = GPT2Model(GPT2Config(vocab_size=100, n_embd=64, n_layer=2, n_head=4, n_positions=64, bos_token_id=0,
                                  eos_token_id=0)).to(torch.float16)
    if want("gpt2_tiny_f16"):
        export(HFWrapper(gpt2_h, ["last_hidden_state"]), [ids, gmask], args.out, "gpt2_tiny_f16",
               ["input_ids", "attention_mask"], ["last_hidden_state"], seq_axes, 18, dynamo=True)
    torch.manual_seed(4)
    llama_b = LlamaModel(LlamaConfig(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2,
                                     max_position_embeddings=64)).to(torch.bfloat16)
    if want("llama_tiny_bf16"):
        export(HFWrapper(llama_b, ["last_hidden_state"]), [ids, gmask], args.out, "llama_tiny_bf16",
               ["input_ids", "attention_mask"], ["last_hidden_state"], seq_axes, 18, dynamo=True)

    # A mixture of experts as transformers writes it (Mixtral: 4 experts a layer, the top 2) in its
    # batched_mm form (its default, grouped_mm, is a custom op the ONNX exporter cannot translate):
    # each routed token's expert weights gathered with GatherND and multiplied in a batched MatMul.
    if want("mixtral_tiny"):
        from transformers import MixtralConfig, MixtralModel
        export_hidden(drawn_apart(6, lambda: MixtralModel(MixtralConfig(
            vocab_size=100, hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=64,
            experts_implementation="batched_mm"))), "mixtral_tiny")

    # Qwen2-MoE's layer: 4 routed experts (the top 2, not renormalized) and a shared expert twice an
    # expert's width, gated per token by its own sigmoid, in the same batched_mm form.
    if want("qwen2_moe_tiny"):
        from transformers import Qwen2MoeConfig, Qwen2MoeModel
        export_hidden(drawn_apart(7, lambda: Qwen2MoeModel(Qwen2MoeConfig(
            vocab_size=100, hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
            shared_expert_intermediate_size=64, max_position_embeddings=64,
            experts_implementation="batched_mm"))), "qwen2_moe_tiny")

    # GLM-4-MoE's layer, DeepSeek-V3's router over one group of experts: the top 2 of sigmoid scores
    # plus a per-expert correction bias (random here, as training leaves it; zero by default), the
    # chosen experts' scores gathered and renormalized, a shared expert beside them; its first
    # layer dense.
    if want("glm4_moe_tiny"):
        from transformers import Glm4MoeConfig, Glm4MoeModel

        def glm4_moe():
            m = Glm4MoeModel(Glm4MoeConfig(
                vocab_size=100, hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, n_routed_experts=4, num_experts_per_tok=2,
                moe_intermediate_size=32, n_shared_experts=1, first_k_dense_replace=1, n_group=1, topk_group=1,
                max_position_embeddings=64, experts_implementation="batched_mm"))
            return random_correction_bias(m)
        export_hidden(drawn_apart(8, glm4_moe), "glm4_moe_tiny")

    # DeepSeek-V3's layer with its routing limited to groups, as its real config uses it (there 8
    # groups of 32 experts, the best 4): 8 experts in 4 groups, each group's score the sum of its top
    # 2, the best 2 groups kept by a scattered mask, then the top 2 experts; multi-head latent
    # attention; a shared expert; its first layer dense.
    if want("deepseek_v3_tiny"):
        from transformers import DeepseekV3Config, DeepseekV3Model

        def deepseek_v3():
            m = DeepseekV3Model(DeepseekV3Config(
                vocab_size=100, hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=32, qk_rope_head_dim=8, qk_nope_head_dim=8,
                v_head_dim=16, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=16,
                n_shared_experts=1, first_k_dense_replace=1, n_group=4, topk_group=2, max_position_embeddings=64,
                experts_implementation="batched_mm"))
            return random_correction_bias(m)
        export_hidden(drawn_apart(9, deepseek_v3), "deepseek_v3_tiny")

    # DeepSeek-V4: each layer's hyper-connections mix 4 residual streams by a 4 x 4 matrix per token,
    # normalized by 20 Sinkhorn steps (a division by its row sums, then by its column sums).
    if want("deepseek_v4_tiny"):
        from transformers import DeepseekV4Config, DeepseekV4Model
        cfg = DeepseekV4Config(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                               num_key_value_heads=2, head_dim=16, intermediate_size=64, n_routed_experts=4,
                               num_experts_per_tok=2, moe_intermediate_size=32, max_position_embeddings=64,
                               q_lora_rank=32, o_lora_rank=32, o_groups=2, index_n_heads=2, index_head_dim=16,
                               index_topk=8, sliding_window=8, experts_implementation="batched_mm")
        export_hidden(drawn_apart(13, lambda: DeepseekV4Model(cfg)), "deepseek_v4_tiny")

    # Incremental decoding, as a generation loop runs after the prompt: llama_tiny's own weights.
    if want("llama_tiny_dec"):
        export_decode_step(llama, 2, args.out, "llama_tiny_dec", torch.Generator().manual_seed(5))

    # Quantized, as ONNX Runtime's quantizer writes models for int8 deployment (made from the float
    # models above, as they are in --out).
    if want("bert_tiny_qdq"):
        quantize_qdq(args.out, "bert_tiny", "bert_tiny_qdq", per_channel=False)
    if want("cnn_small_qdq"):
        quantize_qdq(args.out, "cnn_small", "cnn_small_qdq", per_channel=True)
    if want("bert_tiny_dyn"):
        quantize_qdq(args.out, "bert_tiny", "bert_tiny_dyn", per_channel=False, how="dynamic")
    if want("cnn_small_qop"):
        quantize_qdq(args.out, "cnn_small", "cnn_small_qop", per_channel=True, how="operator")

    # Optimized by onnxruntime's transformer optimizer (made from the float models above).
    for src, model_type in (("gpt2_tiny", "gpt2"), ("llama_tiny", "gpt2")):
        if want(src + "_ort"):
            ort_optimized(os.path.join(args.out, src), os.path.join(args.out, src + "_ort"), model_type)
    # A BERT of transformers' older form, whose attention and embeddings the optimizer rewrites too;
    # the export itself is not shipped (bert_tiny has the architecture).
    if want("bert_legacy_ort"):
        import tempfile
        torch.manual_seed(11)
        legacy = LegacyBert(vocab=100, hidden=64, heads=4, ffn=128, layers=2, positions=64)
        with tempfile.TemporaryDirectory() as tmp:
            export(LegacyWrapper(legacy), [ids, mask], tmp, "bert_legacy", ["input_ids", "attention_mask"],
                   ["last_hidden_state"], seq_axes, 14)
            ort_optimized(os.path.join(tmp, "bert_legacy"), os.path.join(args.out, "bert_legacy_ort"), "bert")

    # onnxruntime-genai's model builder, the file onnxruntime-genai runs for a Hugging Face decoder.
    if want("qwen3_tiny_genai"):
        from transformers import Qwen3Config, Qwen3ForCausalLM
        cfg = Qwen3Config(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=64)
        genai_model(args.out, "qwen3_tiny_genai", lambda: Qwen3ForCausalLM(cfg))
    if want("gptoss_tiny_genai"):
        from transformers import GptOssConfig, GptOssForCausalLM
        cfg = GptOssConfig(vocab_size=100, hidden_size=64, intermediate_size=32, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
                           num_local_experts=4, num_experts_per_tok=2, sliding_window=8)
        genai_model(args.out, "gptoss_tiny_genai", lambda: GptOssForCausalLM(cfg))


def genai_model(out_dir, name, make):
    """The model `make` returns through onnxruntime-genai's builder (bench/exports/genai_export.py),
    with genai_export.py's four data sets: 0 a prompt of 2 x 32 (an empty cache), 1 a decoding step
    after it, 2 a chunk of 5 after 7 cached, 3 data set 1's step with past and present in one buffer
    of 64 rows (as onnxruntime-genai runs the file on CUDA); PyTorch's logits and caches, or
    onnxruntime's where a layer's cache is window-sized (genai_export.py). The builder's other files
    (tokenizer, genai_config.json) are not shipped."""
    import shutil
    import sys
    import tempfile

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "exports"))
    from genai_export import export_genai

    def save_case(out, names_in, inputs, names_out, outputs, k=0):  # genai_export.py's form
        save_test_data(os.path.dirname(out), os.path.basename(out), inputs, names_in, outputs, names_out, k)

    with tempfile.TemporaryDirectory() as tmp:
        export_genai(make, save_case, tmp)
        d = os.path.join(out_dir, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        # One file: the builder's weights moved inside the model (onnx.load reads model.onnx.data).
        onnx.save(onnx.load(os.path.join(tmp, "model.onnx")), os.path.join(d, "model.onnx"))
        for k in range(4):
            shutil.copytree(os.path.join(tmp, f"test_data_set_{k}"), os.path.join(d, f"test_data_set_{k}"))


if __name__ == "__main__":
    main()
