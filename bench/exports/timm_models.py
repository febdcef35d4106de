"""export.py's models, third part: timm's image models (tried 2026-12-06: timm 1.0.31, torch 2.15),
as a new user exports them: `timm.create_model(NAME, pretrained=False)` at seeded random weights,
10 classes, through torch.export at opset 18 with the batch dynamic, at 2 x 3 x 64 x 64 (and a
second data set at batch 1, a third at batch 3). Smaller images or fewer blocks where the model
takes them as arguments (noted per entry), so that each runs on the emu backend in seconds.
Tooling only; `pip install timm` for these entries alone."""
import os

import torch

from exporters import save_case

IMG = 64


def export_timm(name, kw, out, img=IMG, dynamo=True, opset=18):
    import timm
    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False, num_classes=10, **kw).eval()
    xs = [torch.randn(b, 3, img, img, generator=torch.Generator().manual_seed(1 + k)) for k, b in enumerate((2, 1, 3))]
    with torch.no_grad():
        ys = [model(x) for x in xs]
    extra = {}
    if dynamo:
        extra = dict(dynamic_shapes={"x": {0: torch.export.Dim("batch", min=1, max=64)}}, external_data=False)
    else:
        extra = dict(dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    torch.onnx.export(model, (xs[0],), os.path.join(out, "model.onnx"), dynamo=dynamo, opset_version=opset,
                      input_names=["input"], output_names=["logits"], **extra)
    for k, (x, y) in enumerate(zip(xs, ys)):
        save_case(out, ["input"], [x], ["logits"], [y], k)


def timm_models(t):
    def m(name, dynamo=True, **kw):
        return lambda o: export_timm(name, kw, o, dynamo=dynamo)

    t.update({
        # Cross-covariance attention: queries and keys L2-normalized over the tokens (a column
        # reduction), a d x d attention per head; local patch interaction (depthwise convolutions
        # around a BatchNorm), then class attention. 2 of its 12 blocks.
        "timm_xcit": m("xcit_nano_12_p16_224", img_size=IMG, depth=2),
        # CaiT: talking heads (a linear map across the heads before and after the softmax), layer
        # scale, class attention over the patches. 2 of its 24 blocks.
        "timm_cait": m("cait_xxs24_224", img_size=IMG, depth=2),
        # EVA-02: 2-D rotary embedding, SwiGLU with a LayerNorm inside. At 56 x 56 (patches of 14).
        "timm_eva02": lambda o: export_timm("eva02_tiny_patch14_224", dict(img_size=56, depth=2), o, img=56),
        # ViT with mixed 2-D rotary frequencies per head.
        "timm_vit_rope": m("vit_small_patch16_rope_224", img_size=IMG, depth=2),
        # MaxViT and CoAtNet: MBConv with squeeze-excitation, then block and grid attention with a
        # relative position bias (partitions as reshapes and transposes).
        # MaxViT through TorchScript: torch.export cannot make its partitions' reshapes batch-dynamic.
        "timm_maxvit": m("maxvit_nano_rw_256", dynamo=False, img_size=IMG),
        "timm_coatnet": m("coatnet_nano_rw_224", img_size=IMG),
        # EfficientFormerV2: 4-D attention with talking heads and a strided-convolution query.
        "timm_efficientformerv2": m("efficientformerv2_s0", img_size=IMG),
        # FastViT (re-parameterizable branches, RepMixer) and MobileCLIP's image tower.
        "timm_fastvit": m("fastvit_t8"),
        "timm_fastvit_mci": m("fastvit_mci0"),
        # GhostNetV2: ghost modules and DFC attention (a sigmoid gate pooled, convolved along each
        # axis, and resized back up).
        "timm_ghostnetv2": m("ghostnetv2_100"),
        # MLP-Mixer, ResMLP (affine normalizations, layer scale), gMLP (spatial gating unit).
        "timm_mixer": m("mixer_s16_224", img_size=IMG),
        "timm_resmlp": m("resmlp_12_224", img_size=IMG),
        "timm_gmlp": m("gmlp_ti16_224", img_size=IMG),
        # VOLO: outlook attention (unfolded 3 x 3 neighbourhoods, an attention per position, folded
        # back).
        "timm_volo": m("volo_d1_224", img_size=IMG),
        # ResNeSt (split attention: a softmax over the radix), Res2Net (hierarchical splits).
        "timm_resnest": m("resnest14d"),
        "timm_res2net": m("res2net50_14w_8s"),
        # NF-ResNet: scaled weight-standardized convolutions (the standardization computed in the
        # graph from the weights), no normalization of activations.
        "timm_nf_resnet": m("nf_resnet26"),
        # EfficientViT (MIT: ReLU linear attention, a division by the keys' sums; MSRA: cascaded
        # group attention).
        "timm_efficientvit_b": m("efficientvit_b0"),
        "timm_efficientvit_m": m("efficientvit_m0", img_size=IMG),
        # MobileNetV4 hybrid: universal inverted bottlenecks and mobile multi-query attention.
        "timm_mobilenetv4_hybrid": m("mobilenetv4_hybrid_medium"),
        # EdgeNeXt: split depthwise transposed attention (cross-covariance over channels).
        "timm_edgenext": m("edgenext_xx_small"),
        # Hiera: unrolled tokens, mask-unit attention, max-pooled queries. Through TorchScript: the
        # ONNX conversion of torch.export's graph fails on its 5-D scaled_dot_product_attention.
        "timm_hiera": m("hiera_tiny_224", dynamo=False, img_size=IMG),
        # GCViT: global query tokens from a feature extractor of convolutions and pooling.
        "timm_gcvit": m("gcvit_xxtiny", img_size=IMG),
        # MambaOut (gated CNN blocks), StarNet (element-wise products of two branches).
        "timm_mambaout": m("mambaout_femto"),
        "timm_starnet": m("starnet_s1"),
        # DaViT: spatial window attention and channel group attention.
        "timm_davit": m("davit_tiny"),
        # ConViT: gated positional self-attention (a sigmoid gate between content and position).
        "timm_convit": m("convit_tiny", img_size=IMG, depth=2),
        # Twins-SVT (locally grouped and global sub-sampled attention), PiT (pooling by depthwise
        # convolution), NesT (nested blocks, aggregation between); Twins and NesT through TorchScript,
        # as Hiera.
        "timm_twins": m("twins_svt_small", dynamo=False, img_size=IMG),
        "timm_pit": m("pit_ti_224", img_size=IMG),
        "timm_nest": m("nest_tiny", dynamo=False, img_size=IMG),
        # BoTNet and LambdaNetworks: self-attention and lambda layers inside a ResNet.
        "timm_botnet": m("botnet26t_256", img_size=IMG),
        "timm_lambda": m("lambda_resnet26t"),
        # HRNet (parallel resolutions, fused by upsampling and strided convolutions), DLA (deep
        # aggregation), TResNet (space-to-depth stem, anti-aliased downsampling), ReXNet, MobileOne,
        # RepViT, InceptionNeXt, DPN (dual paths), LCNet.
        "timm_hrnet": m("hrnet_w18_small"),
        "timm_dla": m("dla34"),
        "timm_tresnet": m("tresnet_m"),
        "timm_rexnet": m("rexnet_100"),
        "timm_mobileone": m("mobileone_s0"),
        "timm_repvit": m("repvit_m0_9"),
        "timm_inception_next": m("inception_next_tiny"),
        "timm_dpn": m("dpn68"),
        "timm_lcnet": m("lcnet_050"),
        # Sequencer: bidirectional LSTMs along the rows and the columns.
        "timm_sequencer": m("sequencer2d_s"),
    })
    return t
