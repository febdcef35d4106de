"""The helpers of export.py: writing a model's test data sets, exporting text, decoder, CNN and
tensor models through PyTorch's exporters, and deriving exports from others (onnxruntime's
transformer optimizer, older opsets, quantized forms). Tooling only."""
import os
import sys

import onnx
import torch
from onnx import numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models"))
# the shipped bert_legacy_ort's model (the tables use it), and tensors to numpy as the shipped models' data
from make_models import LegacyBert, to_numpy  # noqa: E402,F401

BATCH, SEQ = 2, 32
# Further data sets of the text models, at other bindings of the dynamic axes: one sequence of odd
# length, and an odd batch whose sequences are longer than anything a block size divides.
MORE_SHAPES = [(1, 7), (3, 45)]
# Exported only when named on the command line: too large for every run.
NAMED_ONLY = {"bert_base_12l", "bert_base_12l_f16", "llama_wide", "phi3_wide", "gemma2_wide", "olmo_wide",
              "stablelm_wide", "vit_base_2l", "dinov2_base_2l", "gpt2_wide", "gpt_neox_wide", "bloom_wide",
              "opt_wide", "falcon_wide", "qwen3_wide", "ministral3_wide", "nanochat_wide", "jais2_wide"}


def save_case(out, names_in, inputs, names_out, outputs, k=0):
    d = os.path.join(out, f"test_data_set_{k}")
    os.makedirs(d, exist_ok=True)
    for i, (n, t) in enumerate(zip(names_in, inputs)):
        onnx.save_tensor(numpy_helper.from_array(to_numpy(t), n), os.path.join(d, f"input_{i}.pb"))
    for i, (n, t) in enumerate(zip(names_out, outputs)):
        onnx.save_tensor(numpy_helper.from_array(to_numpy(t), n), os.path.join(d, f"output_{i}.pb"))


def text_inputs(vocab, batch=BATCH, seq=SEQ):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    if batch > 1:
        mask[1, max(seq - 5, 1):] = 0  # the second sequence is padded
    return ids, mask


class Wrap(torch.nn.Module):
    """Positional (input_ids, attention_mask) -> the model's tensors, in a fixed order."""

    def __init__(self, m, keys):
        super().__init__()
        self.m, self.keys = m, keys

    def forward(self, input_ids, attention_mask):
        r = self.m(input_ids=input_ids, attention_mask=attention_mask)
        return tuple(r[k] for k in self.keys)


class Seq2Seq(torch.nn.Module):
    """An encoder-decoder run on one sequence: the tokens go to the encoder and, as decoder inputs,
    to the decoder (whose causal self-attention and cross-attention to the encoder both run)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=input_ids)


def export_text(name, make_model, keys, vocab, dynamo, opset, out):
    torch.manual_seed(0)  # before the model is built: its weights are the seed's, whatever ran before
    model = make_model().eval()
    w = Wrap(model, keys).eval()
    ids, mask = text_inputs(vocab)
    with torch.no_grad():
        ref = w(ids, mask)
    path = os.path.join(out, "model.onnx")
    if dynamo:
        b, s = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("sequence", min=2, max=1024)
        torch.onnx.export(w, (ids, mask), path, dynamo=True, opset_version=opset,
                          input_names=["input_ids", "attention_mask"], output_names=list(keys),
                          dynamic_shapes={"input_ids": {0: b, 1: s}, "attention_mask": {0: b, 1: s}},
                          external_data=False)
    else:
        axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
        torch.onnx.export(w, (ids, mask), path, dynamo=False, opset_version=opset,
                          input_names=["input_ids", "attention_mask"], output_names=list(keys),
                          dynamic_axes=axes)
    save_case(out, ["input_ids", "attention_mask"], [ids, mask], list(keys), ref)
    for k, (batch, seq) in enumerate(MORE_SHAPES, start=1):
        ids, mask = text_inputs(vocab, batch, seq)
        with torch.no_grad():
            ref = w(ids, mask)
        save_case(out, ["input_ids", "attention_mask"], [ids, mask], list(keys), ref, k)


class WithLoss(torch.nn.Module):
    """(input_ids, attention_mask, labels) -> (loss, logits): a token classifier trained or
    evaluated with its loss in the graph (PyTorch's cross-entropy, padding labelled -100)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask, labels):
        r = self.m(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        return r.loss, r.logits


def export_text_loss(name, make_model, labels, dynamo, opset, out):
    torch.manual_seed(0)
    w = WithLoss(make_model().eval()).eval()
    names, keys = ["input_ids", "attention_mask", "labels"], ["loss", "logits"]

    def case(batch, seq):
        ids, mask = text_inputs(100, batch, seq)
        return ids, mask, torch.where(mask == 1, ids % labels, torch.full_like(ids, -100))

    inputs = case(BATCH, SEQ)
    with torch.no_grad():
        ref = w(*inputs)
    path = os.path.join(out, "model.onnx")
    if dynamo:
        b, s = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("sequence", min=2, max=1024)
        torch.onnx.export(w, inputs, path, dynamo=True, opset_version=opset, input_names=names, output_names=keys,
                          dynamic_shapes={k: {0: b, 1: s} for k in names}, external_data=False)
    else:
        torch.onnx.export(w, inputs, path, dynamo=False, opset_version=opset, input_names=names, output_names=keys,
                          dynamic_axes={k: {0: "batch", 1: "sequence"} for k in names})
    save_case(out, names, list(inputs), keys, ref)
    for k, (batch, seq) in enumerate(MORE_SHAPES, start=1):
        inputs = case(batch, seq)
        with torch.no_grad():
            ref = w(*inputs)
        save_case(out, names, list(inputs), keys, ref, k)


def export_decoder(name, make_model, layers, dynamo, opset, out):
    """One step of incremental decoding: the next token's input_ids [batch, 1], the attention mask
    [batch, past + 1] and each layer's cached keys and values [batch, kv_heads, past, head_dim] ->
    the last hidden state and each layer's present keys and values, past + 1 long. The cache is the
    model's own, from a prefill of `past` random tokens (the second sequence's first 3 padded)."""
    from transformers import DynamicCache
    torch.manual_seed(0)
    model = make_model().eval()
    kv = [f"{k}_{i}" for i in range(layers) for k in ("key", "value")]

    class Step(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, *cache):
            c = DynamicCache()
            for i in range(layers):
                c.update(cache[2 * i], cache[2 * i + 1], i)
            r = self.m(input_ids=input_ids, attention_mask=attention_mask, past_key_values=c, use_cache=True)
            present = r.past_key_values.layers
            return (r.last_hidden_state, *[t for i in range(layers) for t in (present[i].keys, present[i].values)])

    w = Step(model).eval()

    def case(batch, past):
        g = torch.Generator().manual_seed(1)
        prefix = torch.randint(0, model.config.vocab_size, (batch, past), generator=g)
        mask = torch.ones(batch, past + 1, dtype=torch.int64)
        if batch > 1:
            mask[1, :min(3, past)] = 0
        with torch.no_grad():
            pre = model(input_ids=prefix, attention_mask=mask[:, :past], use_cache=True).past_key_values
        cache = [t for i in range(layers) for t in (pre.layers[i].keys, pre.layers[i].values)]
        ids = torch.randint(0, model.config.vocab_size, (batch, 1), generator=g)
        with torch.no_grad():
            ref = w(ids, mask, *cache)
        return [ids, mask, *cache], ref

    names_in = ["input_ids", "attention_mask"] + [f"past_{n}" for n in kv]
    names_out = ["last_hidden_state"] + [f"present_{n}" for n in kv]
    inputs, ref = case(BATCH, SEQ)
    path = os.path.join(out, "model.onnx")
    if dynamo:
        b, p = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("past", min=1, max=1024)
        shapes = ({0: b}, {0: b, 1: p + 1}, tuple({0: b, 2: p} for _ in range(2 * layers)))  # *cache: one tuple
        torch.onnx.export(w, tuple(inputs), path, dynamo=True, opset_version=opset, input_names=names_in,
                          output_names=names_out, dynamic_shapes=shapes, external_data=False)
    else:
        axes = {"input_ids": {0: "batch"}, "attention_mask": {0: "batch", 1: "past_and_1"}}
        axes.update({n: {0: "batch", 2: "past"} for n in names_in[2:]})
        torch.onnx.export(w, tuple(inputs), path, dynamo=False, opset_version=opset, input_names=names_in,
                          output_names=names_out, dynamic_axes=axes)
    save_case(out, names_in, inputs, names_out, ref)
    for k, (batch, past) in enumerate(MORE_SHAPES, start=1):
        inputs, ref = case(batch, past)
        save_case(out, names_in, inputs, names_out, ref, k)


def export_cnn(name, ctor, out, opset=17):
    torch.manual_seed(0)
    model = ctor(weights=None).eval()
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        y = model(x)
    torch.onnx.export(model, (x,), os.path.join(out, "model.onnx"), dynamo=False, opset_version=opset,
                      input_names=["input"], output_names=["output"])
    save_case(out, ["input"], [x], ["output"], [y])


def export_tensor(name, make_model, key, shape, dynamo, opset, out):
    """A model of one float tensor (an image, a spectrogram) -> its output `key`, at a fixed shape."""
    torch.manual_seed(0)
    model = make_model().eval()

    class One(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x)[key]

    w = One(model).eval()
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        y = w(x)
    torch.onnx.export(w, (x,), os.path.join(out, "model.onnx"), dynamo=dynamo, opset_version=opset,
                      input_names=["input"], output_names=[key], **({"external_data": False} if dynamo else {}))
    save_case(out, ["input"], [x], [key], [y])


class AsDict(torch.nn.Module):
    """A model's one tensor (or its field `field`), as {key: tensor} for export_tensor."""

    def __init__(self, m, key, field=None):
        super().__init__()
        self.m, self.key, self.field = m, key, field

    def forward(self, x):
        y = self.m(x)
        return {self.key: y if self.field is None else getattr(y, self.field)}


class WhisperLogMel(torch.nn.Module):
    """Whisper's feature extractor as a graph (tried 2026-11-27): a centered, reflect-padded
    torch.stft of 400-sample frames every 160 samples with a Hann window, the power spectrum, the
    80 Slaney mel filters of transformers' mel_filter_bank, log10 clamped 8 below the maximum,
    scaled. Exported with TorchScript at opset 17 as an STFT of a [batch, samples] signal."""

    def __init__(self, n_fft=400, hop=160, mels=80):
        super().__init__()
        from transformers.audio_utils import mel_filter_bank
        self.n_fft, self.hop = n_fft, hop
        bank = mel_filter_bank(num_frequency_bins=n_fft // 2 + 1, num_mel_filters=mels, min_frequency=0.0,
                               max_frequency=8000.0, sampling_rate=16000, norm="slaney", mel_scale="slaney")
        self.register_buffer("filters", torch.tensor(bank.T, dtype=torch.float32))

    def forward(self, audio):
        st = torch.stft(audio, self.n_fft, self.hop, window=torch.hann_window(self.n_fft), center=True,
                        pad_mode="reflect", return_complex=False)
        power = (st[..., :-1, :] ** 2).sum(-1)
        log = torch.clamp(self.filters @ power, min=1e-10).log10()
        log = torch.maximum(log, log.amax(dim=(-2, -1), keepdim=True) - 8.0)
        return (log + 4.0) / 4.0


def export_diffusers_unet(conditional, out):
    """A diffusers UNet (tiny config, seeded random weights): a noisy sample and two timesteps (and,
    conditional, 7 tokens of text states for cross-attention) -> the predicted noise, through
    torch.export at opset 18."""
    import diffusers
    torch.manual_seed(0)
    common = dict(sample_size=16, layers_per_block=1, block_out_channels=(32, 64), norm_num_groups=8)
    if conditional:
        unet = diffusers.UNet2DConditionModel(
            in_channels=4, out_channels=4, cross_attention_dim=32, attention_head_dim=8,
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), **common)
    else:
        unet = diffusers.UNet2DModel(in_channels=3, out_channels=3, down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                                     up_block_types=("AttnUpBlock2D", "UpBlock2D"), **common)

    class Noise(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, *args):
            return self.m(*args).sample

    w = Noise(unet.eval()).eval()
    x = torch.randn(2, 4 if conditional else 3, 16, 16, generator=torch.Generator().manual_seed(1))
    args, names = [x, torch.tensor([10, 500])], ["sample", "timestep"]
    if conditional:
        args.append(torch.randn(2, 7, 32, generator=torch.Generator().manual_seed(2)))
        names.append("encoder_hidden_states")
    with torch.no_grad():
        y = w(*args)
    torch.onnx.export(w, tuple(args), os.path.join(out, "model.onnx"), dynamo=True, opset_version=18,
                      input_names=names, output_names=["noise"], external_data=False)
    save_case(out, names, args, ["noise"], [y])


def ort_optimized(export, model_type, heads, hidden, opt_level=0, multi_head_attention=False):
    """An entry that writes `export`'s model and test data and rewrites the model with onnxruntime's
    transformer optimizer (onnxruntime.transformers.optimizer.optimize_model: its fusions only at
    opt_level 0; with onnxruntime's own graph optimizations of level 1 or 2 saved too), as
    optimum-cli export onnx --optimize writes its files; the model's own data sets stay the
    expected outputs. `multi_head_attention`: the optimizer's option of that name (attention as
    MultiHeadAttention of projected Q, K and V, not Attention of packed weights)."""
    def run(out):
        from onnxruntime.transformers.fusion_options import FusionOptions
        from onnxruntime.transformers.optimizer import optimize_model
        export(out)
        path = os.path.join(out, "model.onnx")
        options = FusionOptions(model_type)
        options.use_multi_head_attention = multi_head_attention
        optimize_model(path, model_type=model_type, num_heads=heads, hidden_size=hidden, opt_level=opt_level,
                       optimization_options=options).save_model_to_file(path)
    return run


def converted(export, opset):
    """An entry that writes `export`'s model and test data and converts the model to `opset` with
    ONNX's version converter (the test data stay as they are)."""
    def run(out):
        from onnx import version_converter
        export(out)
        path = os.path.join(out, "model.onnx")
        onnx.save(version_converter.convert_version(onnx.load(path), opset), path)
    return run


def quantized(export, how):
    """An entry that writes `export`'s model into OUT/float and quantizes it with ONNX Runtime's
    quantizer into OUT/model.onnx: `how` "dynamic" (quantize_dynamic: int8 weights,
    DynamicQuantizeLinear and MatMulInteger) or "operator" (quantize_static in the operator format,
    calibrated on the first data set: QLinearMatMul for each MatMul, uint8 activations) or "int4"
    (MatMulNBitsQuantizer: each MatMul of a constant weight a MatMulNBits of 4-bit weights in blocks
    of 32 with zero points, as onnxruntime-genai's int4 files store them). Each data
    set gets the outputs of onnxruntime with its graph optimizations off, which runs each node as
    written (its optimized session fuses the quantization into integer kernels that round
    elsewhere)."""
    def run(out):
        import glob
        import shutil

        import onnxruntime as ort
        from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                              quantize_static)

        src = os.path.join(out, "float")
        os.makedirs(src, exist_ok=True)
        export(src)
        path, model = os.path.join(out, "model.onnx"), os.path.join(src, "model.onnx")
        names = [i.name for i in ort.InferenceSession(model, providers=["CPUExecutionProvider"]).get_inputs()]

        def feed_of(d):
            files = sorted(glob.glob(os.path.join(d, "input_*.pb")))
            return {n: numpy_helper.to_array(onnx.load_tensor(f)) for n, f in zip(names, files)}

        if how == "dynamic":
            quantize_dynamic(model, path, weight_type=QuantType.QInt8)
        elif how == "int4":
            from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
            quantizer = MatMulNBitsQuantizer(onnx.load(model), block_size=32, is_symmetric=False)
            quantizer.process()
            quantizer.model.save_model_to_file(path)
        else:
            class Once(CalibrationDataReader):
                def __init__(self):
                    self.left = [feed_of(os.path.join(src, "test_data_set_0"))]

                def get_next(self):
                    return self.left.pop() if self.left else None

            quantize_static(model, path, Once(), quant_format=QuantFormat.QOperator, op_types_to_quantize=["MatMul"],
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        for d in sorted(glob.glob(os.path.join(src, "test_data_set_*"))):
            feed = feed_of(d)
            outs = sess.run(None, feed)
            save_case(out, names, [feed[n] for n in names], [o.name for o in sess.get_outputs()], outs,
                      int(d.rsplit("_", 1)[1]))
        shutil.rmtree(src)
    return run
