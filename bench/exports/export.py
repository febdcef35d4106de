#!/usr/bin/env python3
"""Exports transformer and CNN models that are not in models/ to ONNX, each with test data sets of
PyTorch's outputs, to try stitchc as a new user would (docs/fusion-results.md, "Transformer and
CNN exports not in the repo"). Weights are seeded random (no download); transformers at batch 2,
sequence 32 with the axes named batch and sequence (and two more data sets at batch 1, sequence 7
and batch 3, sequence 45), CNNs at 1x3x224x224.

    python3 -m venv venv && venv/bin/pip install torch transformers torchvision onnx onnxscript
    venv/bin/pip install diffusers    # only for the unet2d entries
    venv/bin/python bench/exports/export.py OUT [NAME ...]   # bert_base_12l(_f16) only when named
    bash bench/exports/check.sh OUT [NAME ...]     # compile, run on emu against PyTorch

Tooling only: nothing in the compiler or the runtime imports Python.
"""
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models"))
from make_models import LegacyBert  # noqa: E402  (models/make_models.py: the shipped bert_legacy_ort's)

BATCH, SEQ = 2, 32
# Further data sets of the text models, at other bindings of the dynamic axes: one sequence of odd
# length, and an odd batch whose sequences are longer than anything a block size divides.
MORE_SHAPES = [(1, 7), (3, 45)]
# Exported only when named on the command line: too large for every run.
NAMED_ONLY = {"bert_base_12l", "bert_base_12l_f16", "llama_wide", "phi3_wide", "gemma2_wide", "olmo_wide",
              "stablelm_wide", "vit_base_2l", "dinov2_base_2l", "gpt2_wide", "gpt_neox_wide", "bloom_wide",
              "opt_wide", "falcon_wide", "qwen3_wide"}


def to_numpy(t):
    """numpy has no bfloat16: through ml_dtypes' (onnx's own dependency), which onnx saves as BFLOAT16."""
    if isinstance(t, np.ndarray):
        return t
    t = t.detach()
    if t.dtype == torch.bfloat16:
        import ml_dtypes
        return t.float().numpy().astype(ml_dtypes.bfloat16)  # exact: every bfloat16 is a float
    return t.numpy()


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


def models():
    import transformers as tf
    import torchvision.models as tv
    bert_base = dict(hidden_size=768, num_hidden_layers=2, num_attention_heads=12, intermediate_size=3072)
    bert_small = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512)
    gpt2 = dict(n_embd=128, n_layer=2, n_head=4)
    llama = dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                 intermediate_size=688, vocab_size=1000)
    def text(name, make, keys=("last_hidden_state",), vocab=1000, dynamo=True, opset=18):
        return lambda o: export_text(name, make, list(keys), vocab, dynamo, opset, o)

    t = {
        "bert_base_2l": text("bert_base_2l", lambda: tf.BertModel(tf.BertConfig(**bert_base)),
                             ("last_hidden_state", "pooler_output"), 30522, False, 16),
        # 12 layers: the planning and compile-time targets' size; named only (440 MB of weights)
        "bert_base_12l": text("bert_base_12l",
                              lambda: tf.BertModel(tf.BertConfig(**{**bert_base, "num_hidden_layers": 12})),
                              ("last_hidden_state", "pooler_output"), 30522, False, 16),
        "bert_dynamo": text("bert_dynamo", lambda: tf.BertModel(tf.BertConfig(**bert_small)), vocab=30522),
        # A token classifier with its cross-entropy loss in the graph (SoftmaxCrossEntropyLoss with
        # ignore_index -100), through both exporters.
        "bert_token_loss": lambda o: export_text_loss(
            None, lambda: tf.BertForTokenClassification(tf.BertConfig(**bert_small, num_labels=5)), 5, True, 18, o),
        "bert_token_loss_ts": lambda o: export_text_loss(
            None, lambda: tf.BertForTokenClassification(tf.BertConfig(**bert_small, num_labels=5)), 5, False, 17, o),
        "gpt2_dynamo": text("gpt2_dynamo", lambda: tf.GPT2Model(tf.GPT2Config(**gpt2)), vocab=50257),
        "llama_2l": text("llama_2l", lambda: tf.LlamaModel(tf.LlamaConfig(**llama))),
        "llama_ts": text("llama_ts", lambda: tf.LlamaModel(tf.LlamaConfig(**llama)), dynamo=False, opset=17),
    }
    # More architectures, each small (hidden 128, 4 heads, 2 layers, vocabulary 1000), through
    # torch.export unless said: post-norm encoders (DistilBERT through TorchScript, RoBERTa with
    # its position ids from a CumSum of the mask), parallel attention and MLP with partial rotary
    # (GPT-NeoX, Phi), grouped-query decoders (Mistral with a sliding window, Qwen2 with Q/K/V
    # biases), ALiBi (BLOOM, whose Q/K/V are Gathers of one view), T5's encoder (relative position
    # buckets, RMSNorm without a mean, through TorchScript).
    small = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512,
                 vocab_size=1000)

    def random_expert_biases(model):
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if ".experts." in name and name.endswith("_bias"):
                    p.copy_(torch.randn(p.shape, generator=g) * 0.5)
        return model

    def hf(name, cfg, model, **extra):
        return text(name, lambda: model(cfg(**{**small, **extra})))

    distil = dict(dim=128, n_layers=2, n_heads=4, hidden_dim=512, vocab_size=1000)
    bloom = dict(hidden_size=128, n_layer=2, n_head=4, vocab_size=1000)
    t5 = dict(d_model=128, d_kv=32, d_ff=512, num_layers=2, num_heads=4, vocab_size=1000)
    t.update({
        "distilbert": text("distilbert", lambda: tf.DistilBertModel(tf.DistilBertConfig(**distil)),
                           dynamo=False, opset=17),
        "roberta_dynamo": hf("roberta_dynamo", tf.RobertaConfig, tf.RobertaModel),
        "gpt_neox": hf("gpt_neox", tf.GPTNeoXConfig, tf.GPTNeoXModel, rotary_pct=0.25),
        "phi": hf("phi", tf.PhiConfig, tf.PhiModel, partial_rotary_factor=0.5),
        "mistral": hf("mistral", tf.MistralConfig, tf.MistralModel, num_key_value_heads=2, sliding_window=16),
        "qwen2": hf("qwen2", tf.Qwen2Config, tf.Qwen2Model, num_key_value_heads=2),
        "bloom": text("bloom", lambda: tf.BloomModel(tf.BloomConfig(**bloom))),
        "t5_enc": text("t5_enc", lambda: tf.T5EncoderModel(tf.T5Config(**t5)), dynamo=False, opset=17),
    })
    # And more, tried 2026-11-24 (same sizes): OPT (ReLU, learned positions from a CumSum, also
    # through TorchScript), Falcon (parallel attention and MLP off one norm, one K/V head picked
    # with GatherND), GPT-J, ALBERT and ELECTRA (embeddings projected up), DeBERTa-v2, MPNet
    # (relative position bias), Gemma (one K/V head), Phi-3 (fused Q/K/V and gate/up weights),
    # StableLM (LayerNorm with a SiLU gate), MobileBERT (bottlenecks, four FFNs per layer, NoNorm),
    # XLM-RoBERTa through TorchScript.
    opt = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, ffn_dim=512,
               word_embed_proj_dim=128, vocab_size=1000)
    mobilebert = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512,
                      embedding_size=64, intra_bottleneck_size=64, vocab_size=1000)
    t.update({
        "opt": text("opt", lambda: tf.OPTModel(tf.OPTConfig(**opt))),
        "opt_ts": text("opt_ts", lambda: tf.OPTModel(tf.OPTConfig(**opt)), dynamo=False, opset=17),
        "falcon": text("falcon", lambda: tf.FalconModel(tf.FalconConfig(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, vocab_size=1000))),
        "gptj": text("gptj", lambda: tf.GPTJModel(tf.GPTJConfig(n_embd=128, n_layer=2, n_head=4, rotary_dim=16,
                                                                  vocab_size=1000))),
        "albert": hf("albert", tf.AlbertConfig, tf.AlbertModel, embedding_size=64),
        "electra": hf("electra", tf.ElectraConfig, tf.ElectraModel, embedding_size=64),
        "deberta_v2": hf("deberta_v2", tf.DebertaV2Config, tf.DebertaV2Model),
        "mpnet": hf("mpnet", tf.MPNetConfig, tf.MPNetModel),
        "gemma": hf("gemma", tf.GemmaConfig, tf.GemmaModel, num_key_value_heads=1, head_dim=32),
        "phi3": hf("phi3", tf.Phi3Config, tf.Phi3Model, num_key_value_heads=2, pad_token_id=0),
        "stablelm": hf("stablelm", tf.StableLmConfig, tf.StableLmModel, num_key_value_heads=2),
        "mobilebert": text("mobilebert", lambda: tf.MobileBertModel(tf.MobileBertConfig(**mobilebert))),
        "xlm_roberta_ts": text("xlm_roberta_ts", lambda: tf.XLMRobertaModel(tf.XLMRobertaConfig(**small)),
                               dynamo=False, opset=17),
    })
    # Half precision, as models are deployed on the GPU (tried 2026-11-24): the same small configs
    # with their weights and compute in float16 or bfloat16 (PyTorch's CPU kernels compute the
    # reference in that type, rounding each op's output).
    half, bf16 = torch.float16, torch.bfloat16
    t.update({
        "bert_f16": text("bert_f16", lambda: tf.BertModel(tf.BertConfig(**small)).to(half)),
        "gpt2_f16": text("gpt2_f16", lambda: tf.GPT2Model(tf.GPT2Config(**gpt2, vocab_size=1000)).to(half)),
        "llama_f16": text("llama_f16", lambda: tf.LlamaModel(tf.LlamaConfig(**llama)).to(half)),
        "llama_bf16": text("llama_bf16", lambda: tf.LlamaModel(tf.LlamaConfig(**llama)).to(bf16)),
        "bert_bf16": text("bert_bf16", lambda: tf.BertModel(tf.BertConfig(**small)).to(bf16)),
        # 12 layers in float16: whether the float16 tolerance holds through a full-depth model
        "bert_base_12l_f16": text("bert_base_12l_f16",
                                  lambda: tf.BertModel(tf.BertConfig(**{**bert_base, "num_hidden_layers": 12})).to(half),
                                  ("last_hidden_state", "pooler_output"), 30522),
    })
    # Vision and speech transformers (tried 2026-11-24): ViT and Whisper's encoder (patch or
    # convolution stems, erf GELU) through torch.export, Swin (windows shifted by Slices and
    # Concats, patch merging) through TorchScript (torch.export cannot take its view).
    vit = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512, image_size=64,
               patch_size=8)
    whisper = dict(d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                   decoder_attention_heads=4, encoder_ffn_dim=512, decoder_ffn_dim=512, num_mel_bins=80,
                   max_source_positions=64, vocab_size=1000, pad_token_id=0, decoder_start_token_id=1,
                   bos_token_id=1, eos_token_id=2)
    swin = dict(image_size=64, patch_size=4, embed_dim=32, depths=[2, 2], num_heads=[2, 4], window_size=4)
    tensor = lambda make, shape, dynamo=True, opset=18: (
        lambda o: export_tensor(None, make, "last_hidden_state", shape, dynamo, opset, o))
    t.update({
        "vit": tensor(lambda: tf.ViTModel(tf.ViTConfig(**vit)), (2, 3, 64, 64)),
        "whisper_enc": tensor(lambda: tf.WhisperModel(tf.WhisperConfig(**whisper)).get_encoder(), (2, 80, 128)),
        "swin": tensor(lambda: tf.SwinModel(tf.SwinConfig(**swin)), (2, 3, 64, 64), dynamo=False, opset=17),
    })
    # One decoding step with a KV cache, as a generation loop runs it after the prompt (tried
    # 2026-11-24): the cache concatenated with the new token's keys and values, attention of one
    # query over past + 1 keys. torch.export names the mask's length `past + 1`.
    dec = lambda make, dynamo=True, opset=18: (lambda o: export_decoder(None, make, 2, dynamo, opset, o))
    t.update({
        "gpt2_dec": dec(lambda: tf.GPT2Model(tf.GPT2Config(**gpt2, vocab_size=1000))),
        "llama_dec": dec(lambda: tf.LlamaModel(tf.LlamaConfig(**llama))),
        "llama_dec_ts": dec(lambda: tf.LlamaModel(tf.LlamaConfig(**llama)), dynamo=False, opset=17),
        "mistral_dec": dec(lambda: tf.MistralModel(tf.MistralConfig(**small, num_key_value_heads=2))),
        "qwen2_dec": dec(lambda: tf.Qwen2Model(tf.Qwen2Config(**small, num_key_value_heads=2))),
    })
    # More architectures (tried 2026-11-24, same small sizes): Gemma2 (logits soft-capped by tanh,
    # norms after attention and MLP too), GPT-BigCode (one K/V head fused with Q), StarCoder2, OLMo
    # (LayerNorm without weights), Cohere (LayerNorm without bias, parallel attention and MLP), CLIP's
    # text encoder (causal, quick GELU), BART whole (encoder, decoder, cross-attention), wav2vec2 (a
    # convolution stem with GroupNorm, a grouped positional convolution), SegFormer (attention over a
    # strided convolution of its keys, depthwise convolutions in the MLP), DINOv2 (layer scale).
    t.update({
        "gemma2": hf("gemma2", tf.Gemma2Config, tf.Gemma2Model, num_key_value_heads=2, head_dim=32,
                     sliding_window=16),
        "gpt_bigcode": text("gpt_bigcode", lambda: tf.GPTBigCodeModel(tf.GPTBigCodeConfig(
            n_embd=128, n_layer=2, n_head=4, vocab_size=1000, multi_query=True))),
        "starcoder2": hf("starcoder2", tf.Starcoder2Config, tf.Starcoder2Model, num_key_value_heads=2),
        "olmo": hf("olmo", tf.OlmoConfig, tf.OlmoModel),
        "cohere": hf("cohere", tf.CohereConfig, tf.CohereModel, num_key_value_heads=2),
        "clip_text": text("clip_text", lambda: tf.CLIPTextModel(tf.CLIPTextConfig(
            hidden_size=128, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, vocab_size=1000,
            max_position_embeddings=64)), ("last_hidden_state", "pooler_output")),
        "bart": text("bart", lambda: tf.BartModel(tf.BartConfig(
            d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=512, decoder_ffn_dim=512, vocab_size=1000, max_position_embeddings=64)),
            ("last_hidden_state", "encoder_last_hidden_state")),
        "wav2vec2": tensor(lambda: tf.Wav2Vec2Model(tf.Wav2Vec2Config(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512,
            conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=4)), (2, 4000)),
        "segformer": tensor(lambda: tf.SegformerModel(tf.SegformerConfig(
            num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[32, 64], patch_sizes=[7, 3],
            strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[4, 4])), (2, 3, 64, 64)),
        "dinov2": tensor(lambda: tf.Dinov2Model(tf.Dinov2Config(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512, image_size=64,
            patch_size=8)), (2, 3, 64, 64)),
    })
    # More architectures (tried 2026-11-25, same small sizes): Qwen3 and OLMo2 (RMSNorm on Q and K
    # per head, or over all heads after the projection), ModernBERT (GeGLU, no biases, local and
    # global attention), MPT (ALiBi without biases), GPT-Neo (local attention, unscaled scores),
    # CodeGen (Q/K/V split from one interleaved projection), Nemotron (squared ReLU, LayerNorm with
    # weight + 1, partial rotary), Granite (embedding, residual and logit multipliers), XGLM
    # (sinusoidal positions), Persimmon (LayerNorm on Q and K), BEiT (relative position bias,
    # layer scale), Mixtral (a mixture of experts: top-2 routing).
    t.update({
        "qwen3": hf("qwen3", tf.Qwen3Config, tf.Qwen3Model, num_key_value_heads=2, head_dim=32),
        "olmo2": hf("olmo2", tf.Olmo2Config, tf.Olmo2Model),
        "modernbert": text("modernbert", lambda: tf.ModernBertModel(tf.ModernBertConfig(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256, vocab_size=1000,
            local_attention=16, global_attn_every_n_layers=2, pad_token_id=0, bos_token_id=1, eos_token_id=2,
            cls_token_id=1, sep_token_id=2))),
        "mpt": text("mpt", lambda: tf.MptModel(tf.MptConfig(d_model=128, n_heads=4, n_layers=2, vocab_size=1000))),
        "gpt_neo": text("gpt_neo", lambda: tf.GPTNeoModel(tf.GPTNeoConfig(
            hidden_size=128, num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]], window_size=16,
            vocab_size=1000))),
        "codegen": text("codegen", lambda: tf.CodeGenModel(tf.CodeGenConfig(
            n_embd=128, n_layer=2, n_head=4, rotary_dim=16, vocab_size=1000))),
        "nemotron": hf("nemotron", tf.NemotronConfig, tf.NemotronModel, num_key_value_heads=2),
        "granite": hf("granite", tf.GraniteConfig, tf.GraniteModel, num_key_value_heads=2, embedding_multiplier=2.0,
                      residual_multiplier=0.5, attention_multiplier=0.1),
        "xglm": text("xglm", lambda: tf.XGLMModel(tf.XGLMConfig(
            d_model=128, num_layers=2, attention_heads=4, ffn_dim=512, vocab_size=1000))),
        "persimmon": hf("persimmon", tf.PersimmonConfig, tf.PersimmonModel, qk_layernorm=True),
        "beit": tensor(lambda: tf.BeitModel(tf.BeitConfig(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512, image_size=64,
            patch_size=8, use_relative_position_bias=True, layer_scale_init_value=0.1)), (2, 3, 64, 64), dynamo=False,
            opset=17),
        # Mixtral exports with neither exporter in transformers' default expert form (2026-11-25); with
        # the batched_mm form (as the mixtures of experts below) it does, through torch.export
        "mixtral": text("mixtral", lambda: tf.MixtralModel(tf.MixtralConfig(
            **small, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
            experts_implementation="batched_mm"))),
    })
    # And (tried 2026-11-25, same small sizes) encoders whose attention is written with Einsum:
    # XLNet (two-stream relative attention, an EyeLike; TorchScript: torch.export cannot decompose
    # it) and Funnel (pooled queries; torch.export fixes its sequence at 32, so only the first data
    # set binds), and RemBERT, RoFormer and SqueezeBERT (grouped 1x1 convolutions as its Linears).
    t.update({
        "xlnet": text("xlnet", lambda: tf.XLNetModel(tf.XLNetConfig(d_model=128, n_layer=2, n_head=4, d_inner=512,
                                                                       vocab_size=1000)), dynamo=False, opset=17),
        "funnel": text("funnel", lambda: tf.FunnelModel(tf.FunnelConfig(d_model=128, n_head=4, d_head=32, d_inner=512,
                                                                          block_sizes=[1, 1], vocab_size=1000))),
        "rembert": hf("rembert", tf.RemBertConfig, tf.RemBertModel, input_embedding_size=64, output_embedding_size=64),
        "roformer": hf("roformer", tf.RoFormerConfig, tf.RoFormerModel),
        "squeezebert": hf("squeezebert", tf.SqueezeBertConfig, tf.SqueezeBertModel, embedding_size=128),
    })
    # And more (tried 2026-11-26, same sizes, configs as below): Gemma 3 (norms before and after
    # each block, Q/K norms), GLM (Q/K/V biases, interleaved partial rotary) and GLM-4 (norms after
    # each block too), OLMo 3 and EXAONE 4 (norms after each block, Q/K norms), BitNet (norms
    # inside attention and the MLP, before their output GEMMs), DiffLlama (differential
    # attention), HunYuan dense (Q/K norms), Apertus, Arcee, Cohere 2, ERNIE 4.5, BioGPT, Seed-OSS,
    # Helium, SmolLM3 and EuroBERT.
    gqa = dict(num_key_value_heads=2)
    t.update({
        "gemma3_text": hf("gemma3_text", tf.Gemma3TextConfig, tf.Gemma3TextModel, num_key_value_heads=1, head_dim=32,
                          sliding_window=16),
        "glm": hf("glm", tf.GlmConfig, tf.GlmModel, **gqa, pad_token_id=0),
        "glm4": hf("glm4", tf.Glm4Config, tf.Glm4Model, **gqa, pad_token_id=0),
        "olmo3": hf("olmo3", tf.Olmo3Config, tf.Olmo3Model, **gqa, sliding_window=16),
        "exaone4": hf("exaone4", tf.Exaone4Config, tf.Exaone4Model, **gqa, sliding_window=16),
        "bitnet": hf("bitnet", tf.BitNetConfig, tf.BitNetModel, **gqa),
        "diffllama": hf("diffllama", tf.DiffLlamaConfig, tf.DiffLlamaModel, **gqa),
        "hunyuan": hf("hunyuan", tf.HunYuanDenseV1Config, tf.HunYuanDenseV1Model, **gqa, head_dim=32),
        "apertus": hf("apertus", tf.ApertusConfig, tf.ApertusModel, **gqa),
        "arcee": hf("arcee", tf.ArceeConfig, tf.ArceeModel, **gqa),
        "cohere2": hf("cohere2", tf.Cohere2Config, tf.Cohere2Model, **gqa, sliding_window=16),
        "ernie4_5": hf("ernie4_5", tf.Ernie4_5Config, tf.Ernie4_5Model, **gqa),
        "biogpt": hf("biogpt", tf.BioGptConfig, tf.BioGptModel),
        "seed_oss": hf("seed_oss", tf.SeedOssConfig, tf.SeedOssModel, **gqa, head_dim=32),
        "helium": hf("helium", tf.HeliumConfig, tf.HeliumModel, **gqa, head_dim=32),
        "smollm3": hf("smollm3", tf.SmolLM3Config, tf.SmolLM3Model, **gqa, pad_token_id=0),
        "eurobert": hf("eurobert", tf.EuroBertConfig, tf.EuroBertModel, **gqa, pad_token_id=0),
    })
    # At the widths of the models they stand for (hidden 1024 with 16 heads, or ViT-B/16 at 224),
    # 2 layers, named only (60 to 110 MB): where the small configs keep projections as loops in
    # kernels, these show the per-layer kernels at the sizes models are deployed at (compiled at
    # batch 8, sequence 128, as docs/fusion-results.md says).
    wide = dict(hidden_size=1024, num_hidden_layers=2, num_attention_heads=16, intermediate_size=2816,
                vocab_size=1000)
    vit_b = dict(hidden_size=768, num_hidden_layers=2, num_attention_heads=12, intermediate_size=3072,
                 image_size=224, patch_size=16)
    hf_wide = lambda name, cfg, model, **extra: text(name, lambda: model(cfg(**{**wide, **extra})))
    t.update({
        "llama_wide": hf_wide("llama_wide", tf.LlamaConfig, tf.LlamaModel, num_key_value_heads=4),
        "phi3_wide": hf_wide("phi3_wide", tf.Phi3Config, tf.Phi3Model, num_key_value_heads=4, pad_token_id=0),
        "gemma2_wide": hf_wide("gemma2_wide", tf.Gemma2Config, tf.Gemma2Model, num_key_value_heads=4, head_dim=64,
                               sliding_window=16),
        "olmo_wide": hf_wide("olmo_wide", tf.OlmoConfig, tf.OlmoModel),
        "stablelm_wide": hf_wide("stablelm_wide", tf.StableLmConfig, tf.StableLmModel, num_key_value_heads=4),
        "vit_base_2l": tensor(lambda: tf.ViTModel(tf.ViTConfig(**vit_b)), (2, 3, 224, 224)),
        "dinov2_base_2l": tensor(lambda: tf.Dinov2Model(tf.Dinov2Config(**vit_b)), (2, 3, 224, 224)),
        "gpt2_wide": text("gpt2_wide", lambda: tf.GPT2Model(tf.GPT2Config(n_embd=768, n_layer=2, n_head=12,
                                                                          vocab_size=1000))),
        "gpt_neox_wide": hf_wide("gpt_neox_wide", tf.GPTNeoXConfig, tf.GPTNeoXModel),
        "bloom_wide": text("bloom_wide", lambda: tf.BloomModel(tf.BloomConfig(hidden_size=1024, n_layer=2, n_head=16,
                                                                              vocab_size=1000))),
        "opt_wide": text("opt_wide", lambda: tf.OPTModel(tf.OPTConfig(
            hidden_size=1024, num_hidden_layers=2, num_attention_heads=16, ffn_dim=4096, word_embed_proj_dim=1024,
            vocab_size=1000))),
        "falcon_wide": text("falcon_wide", lambda: tf.FalconModel(tf.FalconConfig(
            hidden_size=1024, num_hidden_layers=2, num_attention_heads=16, vocab_size=1000))),
        "qwen3_wide": hf_wide("qwen3_wide", tf.Qwen3Config, tf.Qwen3Model, num_key_value_heads=4, head_dim=64),
    })
    # And more (tried 2026-11-26, later; same small sizes): mixtures of experts through torch.export
    # (DeepSeek-V3 with latent attention and a dense first layer, Qwen2-MoE with a gated shared expert,
    # Qwen3-MoE, OLMoE, GPT-OSS with attention sinks), Megatron-BERT (pre-norm BERT), ConvBERT
    # (span-based dynamic convolution), LFM2 (short gated convolutions between attention layers).
    # The experts as batched GEMMs over each token's chosen experts' weights: transformers' default
    # (grouped_mm) is a custom op the ONNX exporter cannot translate.
    moe = dict(num_experts_per_tok=2, experts_implementation="batched_mm")
    t.update({
        "deepseek_v3": hf("deepseek_v3", tf.DeepseekV3Config, tf.DeepseekV3Model, **moe, kv_lora_rank=32,
                          q_lora_rank=64, qk_rope_head_dim=16, qk_nope_head_dim=16, v_head_dim=32, n_routed_experts=4,
                          first_k_dense_replace=1, moe_intermediate_size=128, n_group=1, topk_group=1),
        # DeepSeek-V3's routing limited to groups as its real config uses it (there 8 groups of 32
        # experts, the best 4 groups): 8 experts in 4 groups, the top 2 of each group summed to its
        # score, the best 2 groups kept by a scattered mask, then the top 2 experts
        "deepseek_v3_groups": hf("deepseek_v3_groups", tf.DeepseekV3Config, tf.DeepseekV3Model, **moe,
                                 kv_lora_rank=32, q_lora_rank=64, qk_rope_head_dim=16, qk_nope_head_dim=16,
                                 v_head_dim=32, n_routed_experts=8, first_k_dense_replace=1,
                                 moe_intermediate_size=128, n_group=4, topk_group=2),
        "qwen2_moe": hf("qwen2_moe", tf.Qwen2MoeConfig, tf.Qwen2MoeModel, **moe, **gqa, num_experts=4,
                        moe_intermediate_size=128, shared_expert_intermediate_size=256),
        "qwen3_moe": hf("qwen3_moe", tf.Qwen3MoeConfig, tf.Qwen3MoeModel, **moe, **gqa, num_experts=4,
                        moe_intermediate_size=128, head_dim=32),
        "olmoe": hf("olmoe", tf.OlmoeConfig, tf.OlmoeModel, **moe, **gqa, num_experts=4),
        "gpt_oss": hf("gpt_oss", tf.GptOssConfig, tf.GptOssModel, **moe, **gqa, num_local_experts=4, head_dim=32,
                      sliding_window=16),
        # gpt-oss with its experts' biases drawn at random (transformers starts them at zero, which
        # would leave the biases' path through the rewrites unchecked).
        "gpt_oss_biased": text("gpt_oss_biased", lambda: random_expert_biases(tf.GptOssModel(tf.GptOssConfig(
            **{**small, **moe, **gqa, "num_local_experts": 4, "head_dim": 32, "sliding_window": 16})))),
        "megatron_bert": hf("megatron_bert", tf.MegatronBertConfig, tf.MegatronBertModel),
        "convbert": hf("convbert", tf.ConvBertConfig, tf.ConvBertModel, embedding_size=128),
        "lfm2": hf("lfm2", tf.Lfm2Config, tf.Lfm2Model, **gqa, layer_types=["conv", "full_attention"]),
    })
    # Vision and audio (tried 2026-11-26, later): DeiT (a distillation token), SigLIP's and CLIP's
    # vision towers (pooled: an attention-pooling head, a post-norm of the class token), ConvNeXt V2
    # (global response norm), MobileViT (unfolded patches between convolutions), LeViT (attention
    # biases, Hardswish, BatchNorm after each Linear), PoolFormer (average pooling as the token mixer),
    # FocalNet (focal modulation), Swin V2 (cosine attention, a log-spaced position MLP; TorchScript),
    # WavLM (gated relative position bias) and AST (a spectrogram's patches).
    img = (2, 3, 64, 64)
    vis = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512, image_size=64,
               patch_size=8)
    t.update({
        "deit": tensor(lambda: tf.DeiTModel(tf.DeiTConfig(**vis)), img),
        "siglip_vision": (lambda o: export_tensor(None, lambda: tf.SiglipVisionModel(tf.SiglipVisionConfig(**vis)),
                                                  "pooler_output", img, True, 18, o)),
        "clip_vision": (lambda o: export_tensor(None, lambda: tf.CLIPVisionModel(tf.CLIPVisionConfig(**vis)),
                                                "pooler_output", img, True, 18, o)),
        "convnextv2": tensor(lambda: tf.ConvNextV2Model(tf.ConvNextV2Config(
            num_stages=2, hidden_sizes=[32, 64], depths=[1, 1], image_size=64)), img),
        "mobilevit": tensor(lambda: tf.MobileViTModel(tf.MobileViTConfig(image_size=64)), img),
        "levit": tensor(lambda: tf.LevitModel(tf.LevitConfig(image_size=64)), img),
        "poolformer": tensor(lambda: tf.PoolFormerModel(tf.PoolFormerConfig(
            hidden_sizes=[32, 64, 96, 128], depths=[1, 1, 1, 1])), img),
        "focalnet": tensor(lambda: tf.FocalNetModel(tf.FocalNetConfig(
            image_size=64, embed_dim=32, depths=[1, 1], hidden_sizes=[32, 64])), img),
        "swinv2": tensor(lambda: tf.Swinv2Model(tf.Swinv2Config(**swin)), img, dynamo=False, opset=17),
        "wavlm": tensor(lambda: tf.WavLMModel(tf.WavLMConfig(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512,
            conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=4, num_buckets=32, max_bucket_distance=64)), (2, 4000)),
        "ast": tensor(lambda: tf.ASTModel(tf.ASTConfig(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512, num_mel_bins=64,
            max_length=128)), (2, 128, 64)),
    })
    # And a second round the same day: ESM (a rotary encoder), XLM-RoBERTa-XL (pre-norm), mBART
    # (encoder and decoder), GraniteMoE and PhiMoE (mixtures of experts), Mamba and
    # RecurrentGemma (recurrences written out over the sequence), DINOv2 with registers, PVTv2, CvT
    # (convolutional projections with BatchNorm), HF's ResNet and ConvNeXt through torch.export,
    # MobileViTV2 (separable self-attention), SwiftFormer (additive attention), ViTDet (windows and
    # relative positions), HuBERT and SEW (a squeezed sequence).
    wav = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512,
               conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
               num_conv_pos_embedding_groups=4)
    t.update({
        "esm": hf("esm", tf.EsmConfig, tf.EsmModel, position_embedding_type="rotary", pad_token_id=1,
                  mask_token_id=2),
        "xlm_roberta_xl": hf("xlm_roberta_xl", tf.XLMRobertaXLConfig, tf.XLMRobertaXLModel),
        "mbart": text("mbart", lambda: tf.MBartModel(tf.MBartConfig(
            d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=512, decoder_ffn_dim=512, vocab_size=1000, max_position_embeddings=64)),
            ("last_hidden_state", "encoder_last_hidden_state")),
        "granitemoe": hf("granitemoe", tf.GraniteMoeConfig, tf.GraniteMoeModel, **moe, **gqa, num_local_experts=4),
        "phimoe": hf("phimoe", tf.PhimoeConfig, tf.PhimoeModel, **moe, **gqa, num_local_experts=4),
        # Routers over 16 experts: more than the short maxima take (2 to 8), as real MoE models have.
        "phimoe16": hf("phimoe16", tf.PhimoeConfig, tf.PhimoeModel, **moe, **gqa, num_local_experts=16),
        "ernie4_5_moe": hf("ernie4_5_moe", tf.Ernie4_5_MoeConfig, tf.Ernie4_5_MoeModel, **moe, **gqa,
                           moe_num_experts=4, moe_intermediate_size=128),
        "dots1": hf("dots1", tf.Dots1Config, tf.Dots1Model, **moe, **gqa, n_routed_experts=4, n_shared_experts=1,
                    moe_intermediate_size=128, first_k_dense_replace=1, n_group=1, topk_group=1, head_dim=32),
        "dots1_16": hf("dots1_16", tf.Dots1Config, tf.Dots1Model, **moe, **gqa, n_routed_experts=16,
                       n_shared_experts=1, moe_intermediate_size=64, first_k_dense_replace=1, n_group=1,
                       topk_group=1, head_dim=32),
        "flex_olmo": hf("flex_olmo", tf.FlexOlmoConfig, tf.FlexOlmoModel, **moe, **gqa, num_experts=4,
                        pad_token_id=0, eos_token_id=1, bos_token_id=None),
        "mamba": text("mamba", lambda: tf.MambaModel(tf.MambaConfig(hidden_size=128, num_hidden_layers=2,
                                                                       vocab_size=1000, state_size=16))),
        "recurrent_gemma": text("recurrent_gemma", lambda: tf.RecurrentGemmaModel(tf.RecurrentGemmaConfig(
            hidden_size=128, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=1, intermediate_size=256,
            vocab_size=1000, attention_window_size=16, lru_width=128,
            block_types=("recurrent", "recurrent", "attention")))),
        "dinov2_reg": tensor(lambda: tf.Dinov2WithRegistersModel(tf.Dinov2WithRegistersConfig(
            **vis, num_register_tokens=4)), img),
        "pvt_v2": tensor(lambda: tf.PvtV2Model(tf.PvtV2Config(
            num_encoder_blocks=2, hidden_sizes=[32, 64], depths=[1, 1], num_attention_heads=[1, 2], sr_ratios=[2, 1],
            patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[4, 4], image_size=64)), img),
        # CvT's stage s indexes its drop-path rates, one per layer of that stage: depth[s] > s
        "cvt": tensor(lambda: tf.CvtModel(tf.CvtConfig(embed_dim=[32, 64, 128], num_heads=[1, 2, 4],
                                                       depth=[1, 2, 3])), img),
        "resnet_hf": tensor(lambda: tf.ResNetModel(tf.ResNetConfig(
            embedding_size=32, hidden_sizes=[32, 64], depths=[1, 1], layer_type="basic")), img),
        "convnext_hf": tensor(lambda: tf.ConvNextModel(tf.ConvNextConfig(
            num_stages=2, hidden_sizes=[32, 64], depths=[1, 1])), img),
        "mobilevitv2": tensor(lambda: tf.MobileViTV2Model(tf.MobileViTV2Config(image_size=64)), img),
        "swiftformer": tensor(lambda: tf.SwiftFormerModel(tf.SwiftFormerConfig(
            depths=[1, 1, 1, 1], embed_dims=[16, 32, 48, 64])), img),
        "vitdet": tensor(lambda: tf.VitDetModel(tf.VitDetConfig(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, image_size=64, patch_size=8, window_size=4,
            window_block_indices=[0], residual_block_indices=[1], use_relative_position_embeddings=True)), img),
        "hubert": tensor(lambda: tf.HubertModel(tf.HubertConfig(**wav)), (2, 4000)),
        "sew": tensor(lambda: tf.SEWModel(tf.SEWConfig(**wav, squeeze_factor=2)), (2, 4000)),
    })
    # And a third round: T5, Pegasus and Marian whole (encoder and decoder, the sequence fed to both:
    # Seq2Seq), BigBird and Longformer (sparse and sliding-window attention at these lengths).
    seq2seq = dict(d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                   decoder_attention_heads=4, encoder_ffn_dim=512, decoder_ffn_dim=512, vocab_size=1000,
                   max_position_embeddings=64, pad_token_id=0, decoder_start_token_id=0)
    both = ("last_hidden_state", "encoder_last_hidden_state")
    t.update({
        # T5 and Longformer through TorchScript: torch.export cannot take T5's attention view or
        # Longformer's chunked windows
        "t5": text("t5", lambda: Seq2Seq(tf.T5Model(tf.T5Config(**t5))), both, dynamo=False, opset=17),
        "pegasus": text("pegasus", lambda: Seq2Seq(tf.PegasusModel(tf.PegasusConfig(**seq2seq))), both),
        "marian": text("marian", lambda: Seq2Seq(tf.MarianModel(tf.MarianConfig(**seq2seq))), both),
        "bigbird": hf("bigbird", tf.BigBirdConfig, tf.BigBirdModel, attention_type="block_sparse", block_size=4,
                      num_random_blocks=2),
        "longformer": text("longformer", lambda: tf.LongformerModel(tf.LongformerConfig(**small, attention_window=8)),
                           dynamo=False, opset=17),
    })
    # The torchvision CNNs; the second line tried 2026-11-26, later: squeeze-excitation (RegNetY,
    # MnasNet), dense concatenation (DenseNet), fire modules (SqueezeNet), inception branches
    # (GoogLeNet), fused MBConv (EfficientNetV2), inverted residuals (MobileNetV2), grouped
    # convolutions (ResNeXt).
    for n in ["resnet18", "mobilenet_v3_small", "efficientnet_b0", "shufflenet_v2_x0_5", "convnext_tiny",
              "regnet_y_400mf", "mnasnet0_5", "densenet121", "squeezenet1_0", "googlenet", "efficientnet_v2_s",
              "mobilenet_v2", "resnext50_32x4d"]:
        t[n] = (lambda ctor: lambda o: export_cnn(None, ctor, o))(getattr(tv, n))
    # GroupNorm (tried 2026-11-26): exported as a Reshape into groups, an InstanceNormalization and
    # a Reshape back before the channel weight and bias. ResNet-18 with GroupNorm(8) in place of
    # BatchNorm (TorchScript, as the CNNs above), and BiT (ResNetV2: GroupNorm, weight-standardized
    # convolutions, pre-activation) through torch.export.
    t["resnet18_gn"] = lambda o: export_cnn(
        None, lambda weights: tv.resnet18(weights=weights, norm_layer=lambda c: torch.nn.GroupNorm(8, c)), o)
    t["whisper_logmel"] = lambda o: export_tensor(None, lambda: AsDict(WhisperLogMel(), "log_mel"), "log_mel",
                                                  (2, 16000), False, 17, o)
    # Models of the opsets the ONNX model zoo's classics were written in (tried 2026-11-27): nodes in
    # their old forms (Slice's and Pad's bounds and Clip's as attributes, Upsample), read by
    # ir/legacy_forms.h.
    t["resnet18_opset9"] = lambda o: export_cnn(None, tv.resnet18, o, opset=9)
    t["mobilenet_v2_opset10"] = lambda o: export_cnn(None, tv.mobilenet_v2, o, opset=10)
    # Older still (tried 2026-11-27, later): ResNet-18 written down to opsets 3 and 1 by ONNX's version
    # converter (consumed_inputs, Gemm's broadcast attribute), as Caffe2's conversions of opset 3 are.
    t["resnet18_opset3"] = converted(t["resnet18_opset9"], 3)
    t["resnet18_opset1"] = converted(t["resnet18_opset9"], 1)
    t["bert_opset10"] = text("bert_opset10", lambda: tf.BertModel(tf.BertConfig(**bert_small,
                                                                               attn_implementation="eager")),
                             vocab=30522, dynamo=False, opset=10)
    t["bit"] = tensor(lambda: tf.BitModel(tf.BitConfig(
        embedding_size=32, hidden_sizes=[64, 128], depths=[1, 1], num_groups=8)), (2, 3, 64, 64))
    # Diffusion UNets from diffusers (tried 2026-11-26): GroupNorm + SiLU residual blocks with the
    # timestep embedding added, self-attention blocks, and (conditional) cross-attention to text states.
    t["unet2d"] = lambda o: export_diffusers_unet(False, o)
    t["unet2d_cond"] = lambda o: export_diffusers_unet(True, o)
    # Opset 23 (tried 2026-11-26): PyTorch writes scaled_dot_product_attention as the Attention op
    # and nn.RMSNorm (LLaMA's and Qwen3's norms) as RMSNormalization there.
    t.update({
        "llama_op23": text("llama_op23", lambda: tf.LlamaModel(tf.LlamaConfig(**llama)), opset=23),
        "qwen3_op23": text("qwen3_op23", lambda: tf.Qwen3Model(tf.Qwen3Config(
            **small, num_key_value_heads=2, head_dim=32)), opset=23),
        "bert_op23": text("bert_op23", lambda: tf.BertModel(tf.BertConfig(**bert_small)), vocab=30522, opset=23),
        "vit_op23": tensor(lambda: tf.ViTModel(tf.ViTConfig(**vit)), (2, 3, 64, 64), opset=23),
        "llama_dec_op23": dec(lambda: tf.LlamaModel(tf.LlamaConfig(**llama)), opset=23),
        "llama_f16_op23": text("llama_f16_op23", lambda: tf.LlamaModel(tf.LlamaConfig(**llama)).to(half),
                               opset=23),
        # Opsets 24 and 25 (tried 2026-11-26): the same ops as at 23 (the exporter's highest opsets
        # that its version converter reaches; at 26 and above it leaves the model unconverted).
        "llama_op25": text("llama_op25", lambda: tf.LlamaModel(tf.LlamaConfig(**llama)), opset=25),
        "llama_dec_op25": dec(lambda: tf.LlamaModel(tf.LlamaConfig(**llama)), opset=25),
        "qwen3_op24": text("qwen3_op24", lambda: tf.Qwen3Model(tf.Qwen3Config(
            **small, num_key_value_heads=2, head_dim=32)), opset=24),
    })
    # A fourth round (tried 2026-11-27, same small sizes): state-space models and hybrids (Mamba-2's
    # chunked scan, Falcon-Mamba, Jamba, Zamba2, Bamba, Falcon-H1), linear attention (Qwen3-Next's
    # gated delta rule, MiniMax's lightning attention, RWKV), JetMoE (a mixture of attention heads),
    # GLM-4-MoE, Gemma 3n (AltUp, LAuReL, per-layer embeddings), Doge, VaultGemma, FNet (a Fourier
    # transform for attention), CANINE (characters downsampled by a strided convolution), X-MOD
    # (language adapters), SpeechT5's HiFi-GAN vocoder (transposed convolutions), Swin2SR
    # (PixelShuffle: DepthToSpace).
    ssm = dict(mamba_d_state=16, mamba_chunk_size=16)
    t.update({
        "mamba2": text("mamba2", lambda: tf.Mamba2Model(tf.Mamba2Config(
            hidden_size=128, num_hidden_layers=2, vocab_size=1000, state_size=16, num_heads=8, head_dim=32, n_groups=1,
            chunk_size=16))),
        "falcon_mamba": text("falcon_mamba", lambda: tf.FalconMambaModel(tf.FalconMambaConfig(
            hidden_size=128, num_hidden_layers=2, vocab_size=1000, state_size=16))),
        "jamba": hf("jamba", tf.JambaConfig, tf.JambaModel, **gqa, num_experts=4, **moe,
                    expert_layer_period=2, expert_layer_offset=1, attn_layer_period=2, attn_layer_offset=1,
                    mamba_d_state=16),
        "zamba2": text("zamba2", lambda: tf.Zamba2Model(tf.Zamba2Config(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, intermediate_size=256,
            vocab_size=1000, mamba_d_state=16, mamba_headdim=32, n_mamba_heads=8, layers_block_type=["mamba", "hybrid"],
            chunk_size=16, use_mem_rope=True))),
        "bamba": hf("bamba", tf.BambaConfig, tf.BambaModel, **gqa, **ssm, mamba_n_heads=8, mamba_d_head=32,
                    attn_layer_indices=[1]),
        "falcon_h1": hf("falcon_h1", tf.FalconH1Config, tf.FalconH1Model, **gqa, **ssm, mamba_d_ssm=256,
                        mamba_n_heads=8, mamba_d_head=32),
        "qwen3_next": hf("qwen3_next", tf.Qwen3NextConfig, tf.Qwen3NextModel, **gqa, head_dim=32,
                         linear_num_value_heads=4, linear_num_key_heads=2, linear_key_head_dim=32,
                         linear_value_head_dim=32, num_experts=4, **moe, moe_intermediate_size=128,
                         shared_expert_intermediate_size=128, layer_types=["linear_attention", "full_attention"]),
        "minimax": hf("minimax", tf.MiniMaxConfig, tf.MiniMaxModel, **gqa, head_dim=32, num_local_experts=4,
                      **moe, layer_types=["linear_attention", "full_attention"], block_size=16),
        "rwkv": text("rwkv", lambda: tf.RwkvModel(tf.RwkvConfig(
            hidden_size=128, num_hidden_layers=2, vocab_size=1000, attention_hidden_size=128, intermediate_size=512,
            context_length=64))),
        "jetmoe": text("jetmoe", lambda: tf.JetMoeModel(tf.JetMoeConfig(
            hidden_size=128, num_hidden_layers=2, num_key_value_heads=4, kv_channels=32, intermediate_size=256,
            num_local_experts=4, vocab_size=1000, **moe))),
        "glm4_moe": hf("glm4_moe", tf.Glm4MoeConfig, tf.Glm4MoeModel, **gqa, head_dim=32, n_routed_experts=4,
                       **moe, moe_intermediate_size=128, first_k_dense_replace=1, n_group=1,
                       topk_group=1),
        "gemma3n": hf("gemma3n", tf.Gemma3nTextConfig, tf.Gemma3nTextModel, **gqa, head_dim=32,
                      vocab_size_per_layer_input=1000, hidden_size_per_layer_input=32, laurel_rank=16,
                      altup_num_inputs=4, num_kv_shared_layers=0, sliding_window=16,
                      layer_types=["sliding_attention", "full_attention"], activation_sparsity_pattern=[0.0, 0.0]),
        # Doge through TorchScript: torch.export cannot view its attention output back into rows
        "doge": text("doge", lambda: tf.DogeModel(tf.DogeConfig(**small, **gqa)), dynamo=False, opset=17),
        "vaultgemma": hf("vaultgemma", tf.VaultGemmaConfig, tf.VaultGemmaModel, **gqa, head_dim=32,
                         sliding_window=16),
        "fnet": text("fnet", lambda: tf.FNetModel(tf.FNetConfig(
            hidden_size=128, num_hidden_layers=2, intermediate_size=512, vocab_size=1000,
            use_tpu_fourier_optimizations=False))),
        "canine": text("canine", lambda: tf.CanineModel(tf.CanineConfig(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512, downsampling_rate=4))),
        "xmod": hf("xmod", tf.XmodConfig, tf.XmodModel, default_language="en_XX", languages=["en_XX"]),
        # SpeechT5's HiFi-GAN vocoder: a mel spectrogram [batch, frames, 80] upsampled 16x to a
        # waveform by two ConvTranspose1d (stride 4, kernel 8) and dilated residual convolutions
        "hifigan": tensor(lambda: AsDict(tf.SpeechT5HifiGan(tf.SpeechT5HifiGanConfig(
            model_in_dim=80, upsample_initial_channel=32, upsample_rates=[4, 4], upsample_kernel_sizes=[8, 8],
            resblock_kernel_sizes=[3], resblock_dilation_sizes=[[1, 3]], normalize_before=False)),
            "last_hidden_state"), (2, 16, 80)),
        # Swin2SR's super-resolution: Swin layers, then a convolution and PixelShuffle (DepthToSpace)
        # doubling the image; through TorchScript, as Swin
        "swin2sr": tensor(lambda: AsDict(tf.Swin2SRForImageSuperResolution(tf.Swin2SRConfig(
            image_size=16, patch_size=1, embed_dim=32, depths=[2], num_heads=[2], window_size=4, upscale=2,
            upsampler="pixelshuffle", mlp_ratio=2.0)), "last_hidden_state", "reconstruction"), (1, 3, 16, 16),
            dynamo=False, opset=17),
    })
    # A fifth round (tried 2026-11-27, later): dense prediction and detection (DPT and Depth
    # Anything's reassembly and fusion necks with align-corners upsampling, GLPN, DETR with a
    # ResNet backbone, its sine positions from a CumSum of the pixel mask, YOLOS's detection tokens,
    # UperNet's pyramid pooling over a ConvNeXt), SAM's image encoder (windows padded, decomposed
    # relative positions; TorchScript), video (VideoMAE's tubelets: Conv3d; TimeSformer's divided space-time
    # attention), Perceiver (cross-attention to latents), XLNet (two-stream relative attention;
    # TorchScript), Funnel (the sequence pooled between blocks; torch.export fixes the sequence
    # length, and TorchScript's trace is right only at its own), the Conformer (a depthwise
    # convolution module), PatchTST (a time series scaled by its own mean and deviation), and
    # Encodec's encoder (an LSTM; TorchScript, as SAM: torch.export cannot take either).
    dino = dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=4, intermediate_size=128, image_size=56,
                patch_size=14, out_features=["stage1", "stage2", "stage3", "stage4"],
                reshape_hidden_states=False)
    t.update({
        "dpt": tensor(lambda: AsDict(tf.DPTForDepthEstimation(tf.DPTConfig(
            hidden_size=128, num_hidden_layers=4, num_attention_heads=4, intermediate_size=256, image_size=64,
            patch_size=16, backbone_out_indices=[0, 1, 2, 3], neck_hidden_sizes=[16, 32, 64, 128],
            fusion_hidden_size=32, head_in_index=-1)), "last_hidden_state", "predicted_depth"), (1, 3, 64, 64)),
        "depth_anything": tensor(lambda: AsDict(tf.DepthAnythingForDepthEstimation(tf.DepthAnythingConfig(
            backbone_config=tf.Dinov2Config(**dino), reassemble_hidden_size=64, patch_size=14,
            neck_hidden_sizes=[16, 32, 64, 64], fusion_hidden_size=32, head_hidden_size=16)),
            "last_hidden_state", "predicted_depth"), (1, 3, 56, 56)),
        "glpn": tensor(lambda: AsDict(tf.GLPNForDepthEstimation(tf.GLPNConfig(
            num_encoder_blocks=2, depths=[1, 1], sr_ratios=[4, 2], hidden_sizes=[16, 32], patch_sizes=[7, 3],
            strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], decoder_hidden_size=16)),
            "last_hidden_state", "predicted_depth"), (1, 3, 64, 64)),
        "detr": tensor(lambda: tf.DetrModel(tf.DetrConfig(
            use_timm_backbone=False, use_pretrained_backbone=False, backbone=None,
            backbone_config=tf.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                                            out_features=["stage4"]),
            d_model=64, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=128, decoder_ffn_dim=128, num_queries=10)), (1, 3, 64, 64)),
        # Multi-scale deformable attention: each query's sampling points read the feature maps through
        # GridSample (bilinear, zeros padding). RT-DETR through torch.export (opset 18).
        "deformable_detr": tensor(lambda: AsDict(tf.DeformableDetrModel(tf.DeformableDetrConfig(
            use_timm_backbone=False, use_pretrained_backbone=False, backbone=None,
            backbone_config=tf.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                                            out_features=["stage2", "stage3", "stage4"]),
            d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=10, num_feature_levels=3, encoder_n_points=2,
            decoder_n_points=2)), "last_hidden_state", "last_hidden_state"), (1, 3, 64, 64), dynamo=False, opset=17),
        "rt_detr": tensor(lambda: AsDict(tf.RTDetrModel(tf.RTDetrConfig(
            backbone_config=tf.RTDetrResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 64, 128],
                                                  depths=[1, 1, 1, 1], out_features=["stage2", "stage3", "stage4"]),
            encoder_hidden_dim=32, encoder_in_channels=[32, 64, 128], feat_strides=[8, 16, 32], encoder_layers=1,
            encoder_ffn_dim=64, encoder_attention_heads=4, d_model=32, num_queries=20, decoder_layers=1,
            decoder_ffn_dim=64, decoder_attention_heads=4, decoder_n_points=4, num_feature_levels=3,
            num_denoising=0, anchor_image_size=None, decoder_in_channels=[32, 32, 32])),
            "last_hidden_state", "last_hidden_state"), (1, 3, 64, 64)),
        "yolos": tensor(lambda: tf.YolosModel(tf.YolosConfig(**{**vis, "image_size": [64, 64]},
                                                             num_detection_tokens=10), add_pooling_layer=False),
                        (1, 3, 64, 64)),
        "upernet": tensor(lambda: AsDict(tf.UperNetForSemanticSegmentation(tf.UperNetConfig(
            backbone_config=tf.ConvNextConfig(num_stages=4, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                                              out_features=["stage1", "stage2", "stage3", "stage4"]),
            hidden_size=32, pool_scales=[1, 2, 3, 6], use_auxiliary_head=False, num_labels=5)),
            "last_hidden_state", "logits"), (1, 3, 192, 192)),
        "sam_vision": tensor(lambda: tf.SamVisionModel(tf.SamVisionConfig(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, mlp_dim=256, image_size=80, patch_size=8,
            window_size=4, global_attn_indexes=[1], output_channels=64)), (1, 3, 80, 80), dynamo=False, opset=17),
        "videomae": tensor(lambda: tf.VideoMAEModel(tf.VideoMAEConfig(
            **{**vis, "image_size": 32}, num_frames=4, tubelet_size=2)), (1, 4, 3, 32, 32)),
        "timesformer": tensor(lambda: tf.TimesformerModel(tf.TimesformerConfig(
            **{**vis, "image_size": 32}, num_frames=4)), (1, 4, 3, 32, 32)),
        "perceiver": tensor(lambda: tf.PerceiverModel(tf.PerceiverConfig(
            num_latents=16, d_latents=64, d_model=32, num_blocks=1, num_self_attends_per_block=2,
            num_self_attention_heads=4, num_cross_attention_heads=1)), (2, 20, 32)),
        "xlnet": text("xlnet", lambda: tf.XLNetModel(tf.XLNetConfig(
            d_model=128, n_layer=2, n_head=4, d_inner=512, vocab_size=1000)), dynamo=False, opset=17),
        "funnel": text("funnel", lambda: tf.FunnelBaseModel(tf.FunnelConfig(
            d_model=128, n_head=4, d_head=32, d_inner=512, block_sizes=[1, 1], vocab_size=1000))),
        "wav2vec2_conformer": tensor(lambda: tf.Wav2Vec2ConformerModel(tf.Wav2Vec2ConformerConfig(
            **wav, position_embeddings_type="rotary", conv_depthwise_kernel_size=15)), (2, 4000)),
        "patchtst": tensor(lambda: tf.PatchTSTModel(tf.PatchTSTConfig(
            num_input_channels=3, context_length=64, patch_length=8, patch_stride=8, d_model=64,
            num_attention_heads=4, num_hidden_layers=2, ffn_dim=128)), (2, 64, 3)),
        "encodec": tensor(lambda: AsDict(tf.EncodecModel(tf.EncodecConfig(
            hidden_size=32, num_filters=8, num_residual_layers=1, upsampling_ratios=[4, 2], codebook_size=64,
            codebook_dim=32, num_lstm_layers=1)).encoder, "last_hidden_state"), (2, 1, 800), dynamo=False, opset=17),
    })

    # Recurrent text models (tried 2026-11-27, later), through both exporters: a tagger (an
    # embedding, a 2-layer bidirectional LSTM, batch first, and a linear head) and a GRU encoder.
    class Tagger(torch.nn.Module):
        def __init__(self, rnn):
            super().__init__()
            self.emb, self.rnn, self.head = torch.nn.Embedding(1000, 64), rnn, torch.nn.Linear(2 * 48, 16)

        def forward(self, input_ids, attention_mask):  # padding zeroed, as a tagger's embeddings are
            y, _ = self.rnn(self.emb(input_ids) * attention_mask.unsqueeze(-1).to(torch.float32))
            return {"last_hidden_state": self.head(y)}

    lstm = lambda: Tagger(torch.nn.LSTM(64, 48, num_layers=2, batch_first=True, bidirectional=True))
    gru = lambda: Tagger(torch.nn.GRU(64, 48, batch_first=True, bidirectional=True))
    t.update({
        "lstm_tagger": text("lstm_tagger", lstm),
        "lstm_tagger_ts": text("lstm_tagger_ts", lstm, dynamo=False, opset=17),
        "gru_tagger": text("gru_tagger", gru),
        "gru_tagger_ts": text("gru_tagger_ts", gru, dynamo=False, opset=17),
    })

    # Quantized (tried 2026-11-27): ONNX Runtime's quantize_dynamic on two BERT exports (int8
    # weights, DynamicQuantizeLinear and MatMulInteger) and its static quantizer's operator format
    # (QLinearMatMul), and its MatMulNBits quantizer (int4 weights), onnxruntime's outputs as expected.
    t.update({
        "bert_dyn": quantized(t["bert_dynamo"], "dynamic"),
        "bert_base_2l_dyn": quantized(t["bert_base_2l"], "dynamic"),
        "bert_qop": quantized(t["bert_dynamo"], "operator"),
        "bert_int4": quantized(t["bert_dynamo"], "int4"),
        "llama_int4": quantized(t["llama_ts"], "int4"),
    })

    # onnxruntime-genai's model builder (tried 2026-11-28, bench/exports/genai_export.py): a LLaMA
    # decoder as genai runs it, GroupQueryAttention with its KV cache; PyTorch's logits and caches.
    def genai(make, precision="fp32", provider="cpu", expect="pytorch"):
        def run(out):
            from genai_export import export_genai
            export_genai(make, save_case, out, precision, provider, expect)
        return run
    t.update({
        "llama_genai": genai(lambda: tf.LlamaForCausalLM(tf.LlamaConfig(**llama))),
        "llama_genai_int4": genai(lambda: tf.LlamaForCausalLM(tf.LlamaConfig(**llama)), "int4"),
        "llama_genai_f16": genai(lambda: tf.LlamaForCausalLM(tf.LlamaConfig(**llama)), "fp16"),
        "llama_genai_cuda_f16": genai(lambda: tf.LlamaForCausalLM(tf.LlamaConfig(**llama)), "fp16", "cuda"),
        # Qwen2's Q, K and V biases; Qwen3's per-head Q and K norms (written before the op); Phi-3;
        # Gemma's scaled embeddings and (1 + w) norms.
        "qwen2_genai": genai(lambda: tf.Qwen2ForCausalLM(tf.Qwen2Config(**small, num_key_value_heads=2))),
        "qwen3_genai": genai(lambda: tf.Qwen3ForCausalLM(tf.Qwen3Config(**small, num_key_value_heads=2,
                                                                           head_dim=32))),
        "phi3_genai": genai(lambda: tf.Phi3ForCausalLM(tf.Phi3Config(**small, num_key_value_heads=2,
                                                                        pad_token_id=0))),
        "gemma_genai": genai(lambda: tf.GemmaForCausalLM(tf.GemmaConfig(**small, num_key_value_heads=2,
                                                                           head_dim=32))),
        # Gemma 2: its sliding layer's cache is a window-sized buffer (sliding_window_cache=1), the
        # expected outputs onnxruntime's (genai_export.py); softcaps on scores and logits.
        "gemma2_genai": genai(lambda: tf.Gemma2ForCausalLM(tf.Gemma2Config(**small, num_key_value_heads=2,
                                                                              head_dim=32, sliding_window=16))),
        "gemma2_genai_cuda_f16": genai(lambda: tf.Gemma2ForCausalLM(tf.Gemma2Config(
            **small, num_key_value_heads=2, head_dim=32, sliding_window=16)), "fp16", "cuda"),
        # (tried 2026-11-28) Phi-2 (partial rotary, LayerNormalization, attention and MLP in
        # parallel) and Nemotron (relu^2, (1 + w) LayerNorm) at the epsilon the builder writes;
        # OLMo, whose LayerNorm the builder writes as an RMSNorm, against onnxruntime
        # (genai_export.py). Granite's multipliers, SmolLM3, Mistral, ERNIE 4.5 (head_dim 128 of
        # hidden 128), LFM2's attention layers (Q/K norms). Not here: Gemma 3 (the builder reads a
        # flat rope_parameters, transformers 5 writes one per layer type).
        "phi_genai": genai(lambda: tf.PhiForCausalLM(tf.PhiConfig(**small, num_key_value_heads=2,
                                                                    partial_rotary_factor=0.5, layer_norm_eps=1e-6))),
        "nemotron_genai": genai(lambda: tf.NemotronForCausalLM(tf.NemotronConfig(**small, num_key_value_heads=2,
                                                                                    norm_eps=1e-6))),
        "olmo_genai": genai(lambda: tf.OlmoForCausalLM(tf.OlmoConfig(**small, num_key_value_heads=2)),
                            expect="onnxruntime"),
        "granite_genai": genai(lambda: tf.GraniteForCausalLM(tf.GraniteConfig(**small, num_key_value_heads=2))),
        "smollm3_genai": genai(lambda: tf.SmolLM3ForCausalLM(tf.SmolLM3Config(**small, num_key_value_heads=2,
                                                                                pad_token_id=0))),
        "mistral_genai": genai(lambda: tf.MistralForCausalLM(tf.MistralConfig(**small, num_key_value_heads=2))),
        "ernie_genai": genai(lambda: tf.Ernie4_5ForCausalLM(tf.Ernie4_5Config(**small, num_key_value_heads=2))),
        "lfm2_genai": genai(lambda: tf.Lfm2ForCausalLM(tf.Lfm2Config(**small, num_key_value_heads=2))),
        # (tried 2026-11-28) gpt-oss: its experts one com.microsoft::MoE per layer (8 of them, the top
        # 2, clamped swiglu), head sinks in GroupQueryAttention, a window-sized cache in its sliding
        # layers; onnxruntime's outputs (genai_export.py).
        # (tried 2026-11-28) LFM2 with a convolution layer first (com.microsoft::CausalConvWithState,
        # its carry state an input and an output of the file) and an attention layer.
        "lfm2_conv_genai": genai(lambda: tf.Lfm2ForCausalLM(tf.Lfm2Config(**small, num_key_value_heads=2,
                                                                          layer_types=["conv", "full_attention"]))),
        "gptoss_genai": genai(lambda: tf.GptOssForCausalLM(tf.GptOssConfig(
            **small, num_key_value_heads=2, head_dim=32, num_local_experts=8, num_experts_per_tok=2,
            sliding_window=16))),
        "gptoss_genai_cuda_f16": genai(lambda: tf.GptOssForCausalLM(tf.GptOssConfig(
            **small, num_key_value_heads=2, head_dim=32, num_local_experts=8, num_experts_per_tok=2,
            sliding_window=16)), "fp16", "cuda"),
    })

    # Optimized by onnxruntime's transformer optimizer (tried 2026-11-27): its contrib ops
    # (SkipLayerNormalization, BiasGelu, FastGelu, SkipSimplifiedLayerNormalization, Attention,
    # EmbedLayerNormalization), PyTorch's outputs as expected.
    t.update({
        "bert_legacy": text("bert_legacy", LegacyBert, dynamo=False, opset=14),
        "bert_legacy_ort": ort_optimized(text("bert_legacy", LegacyBert, dynamo=False, opset=14), "bert", 4, 128),
        "bert_base_2l_ort": ort_optimized(t["bert_base_2l"], "bert", 12, 768),
        "bert_ort": ort_optimized(t["bert_dynamo"], "bert", 4, 128),
        "gpt2_ort": ort_optimized(text("gpt2_ts", lambda: tf.GPT2Model(tf.GPT2Config(**gpt2)), dynamo=False,
                                       opset=17), "gpt2", 4, 128),
        "llama_ort": ort_optimized(t["llama_ts"], "gpt2", 8, 256),
        "t5_enc_ort": ort_optimized(t["t5_enc"], "t5", 4, 128),
        "vit_ort": ort_optimized(t["vit"], "vit", 4, 128),
        # with onnxruntime's graph optimizations: level 1 wraps each projection's Gemm in Reshapes,
        # level 2 writes LLaMA's SiLU as QuickGelu
        "vit_ort1": ort_optimized(t["vit"], "vit", 4, 128, opt_level=1),
        "vit_ort2": ort_optimized(t["vit"], "vit", 4, 128, opt_level=2),
        "llama_ort2": ort_optimized(t["llama_ts"], "gpt2", 8, 256, opt_level=2),
        "bert_legacy_ort1": ort_optimized(text("bert_legacy", LegacyBert, dynamo=False, opset=14), "bert", 4, 128,
                                          opt_level=1),
        # attention as MultiHeadAttention (the optimizer's use_multi_head_attention)
        "bert_legacy_mha": ort_optimized(text("bert_legacy", LegacyBert, dynamo=False, opset=14), "bert", 4, 128,
                                         multi_head_attention=True),
    })
    # A sweep: 30 more exports through the optimizer, its model type per architecture and its heads
    # and width detected (0, 0). phi, modernbert, gpt2_dec and gpt2_f16 stop inside the optimizer (a
    # Python error).
    sweep = {"distilbert": "bert", "albert": "bert", "electra": "bert", "deberta_v2": "bert", "mpnet": "bert",
             "roberta_dynamo": "bert", "xlm_roberta_ts": "bert", "mobilebert": "bert", "megatron_bert": "bert",
             "convbert": "bert", "gpt_neox": "gpt_neox", "opt_ts": "gpt2", "gptj": "gpt2", "bloom": "gpt2",
             "gpt_bigcode": "gpt2", "bart": "bart", "t5": "t5", "whisper_enc": "bart", "clip_text": "clip",
             "clip_vision": "clip", "siglip_vision": "clip", "swin": "swin", "deit": "vit",
             # decoding steps, half types (the contrib ops in float16), opset 23's own ops
             "llama_dec": "gpt2", "mistral_dec": "gpt2", "qwen2_dec": "gpt2", "bert_f16": "bert",
             "llama_bf16": "gpt2", "bert_op23": "bert", "llama_op23": "gpt2"}
    t.update({n + "_ort": ort_optimized(t[n], model_type, 0, 0) for n, model_type in sweep.items()})
    return t


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


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    table = models()
    names = sys.argv[2:] or [n for n in table if n not in NAMED_ONLY]
    for n in names:
        if n not in table:
            sys.exit(f"unknown model '{n}'; known: {', '.join(table)}")
        d = os.path.join(out, n)
        os.makedirs(d, exist_ok=True)
        print(f"exporting {n} -> {d}", flush=True)
        table[n](d)


if __name__ == "__main__":
    main()
