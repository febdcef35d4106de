"""The small CNNs of models/ (make_models.py exports them): MobileNet-style blocks, a segmentation
net with a Resize, a GroupNorm UNet, and the helpers that give fresh normalization layers real
statistics, so that the exported models do not hide their BatchNorm and GroupNorm as identities.
Tooling only, like make_models.py."""
import torch

class SqueezeExcite(torch.nn.Module):
    def __init__(self, c, r=4):
        super().__init__()
        self.fc1 = torch.nn.Conv2d(c, c // r, 1)
        self.fc2 = torch.nn.Conv2d(c // r, c, 1)

    def forward(self, x):
        s = torch.nn.functional.adaptive_avg_pool2d(x, 1)
        s = torch.nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(s))))
        return x * s


class Residual(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b1 = torch.nn.BatchNorm2d(c)
        self.c2 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b2 = torch.nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        return torch.relu(x + self.b2(self.c2(y)))


class InvertedResidual(torch.nn.Module):
    def __init__(self, c, e):
        super().__init__()
        self.expand = torch.nn.Sequential(torch.nn.Conv2d(c, e, 1, bias=False), torch.nn.BatchNorm2d(e), torch.nn.Hardswish())
        self.dw = torch.nn.Sequential(torch.nn.Conv2d(e, e, 3, padding=1, groups=e, bias=False), torch.nn.BatchNorm2d(e),
                                      torch.nn.Hardswish())
        self.se = SqueezeExcite(e)
        self.project = torch.nn.Sequential(torch.nn.Conv2d(e, c, 1, bias=False), torch.nn.BatchNorm2d(c))

    def forward(self, x):
        return x + self.project(self.se(self.dw(self.expand(x))))


class SmallCNN(torch.nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False), torch.nn.BatchNorm2d(16),
                                        torch.nn.ReLU(), torch.nn.MaxPool2d(3, stride=2, padding=1))
        self.block1 = Residual(16)
        self.down = torch.nn.Sequential(torch.nn.Conv2d(16, 24, 3, stride=2, padding=1, bias=False), torch.nn.BatchNorm2d(24),
                                        torch.nn.ReLU6())
        self.block2 = InvertedResidual(24, 48)
        self.head = torch.nn.Linear(24, classes)

    def forward(self, x):
        x = self.block2(self.down(self.block1(self.stem(x))))
        x = torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return torch.softmax(self.head(x), dim=-1)


class SegSmall(torch.nn.Module):
    """A small encoder-decoder segmentation net: the four ways models resample feature maps
    (bilinear 2x up, nearest to a size, antialiased bilinear down, bicubic with corners aligned)."""

    def __init__(self, classes=4):
        super().__init__()
        nn = torch.nn
        self.e1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.e2 = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
        self.mid = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.d2 = nn.Sequential(nn.Conv2d(32, 16, 3, padding=1), nn.ReLU())
        self.d1 = nn.Sequential(nn.Conv2d(24, 8, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(8, classes, 1)

    def forward(self, x):
        f = torch.nn.functional
        a = self.e1(x)
        b = self.e2(f.max_pool2d(a, 2))
        c = self.mid(f.avg_pool2d(b, 2))
        c = f.interpolate(c, scale_factor=2, mode="bilinear", align_corners=False)
        d = self.d2(torch.cat([c, b], 1))
        d = f.interpolate(d, size=a.shape[-2:], mode="nearest")
        logits = self.head(self.d1(torch.cat([d, a], 1)))
        coarse = f.interpolate(logits, scale_factor=0.5, mode="bilinear", antialias=True)
        smooth = f.interpolate(coarse, size=logits.shape[-2:], mode="bicubic", align_corners=True)
        return torch.softmax(logits + smooth, dim=1)


class GroupNormBlock(torch.nn.Module):
    """A UNet residual block: GroupNorm, SiLU, 3x3 convolution, twice, plus the input (through a 1x1
    convolution when the channel count changes)."""

    def __init__(self, cin, cout, groups=4):
        super().__init__()
        nn = torch.nn
        self.n1, self.c1 = nn.GroupNorm(groups, cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.n2, self.c2 = nn.GroupNorm(groups, cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x):
        f = torch.nn.functional
        h = self.c1(f.silu(self.n1(x)))
        return self.skip(x) + self.c2(f.silu(self.n2(h)))


class UNetSmall(torch.nn.Module):
    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.conv_in = nn.Conv2d(3, 16, 3, padding=1)
        self.down1 = GroupNormBlock(16, 16)
        self.downsample = nn.Conv2d(16, 16, 3, stride=2, padding=1)
        self.down2 = GroupNormBlock(16, 32)
        self.up = GroupNormBlock(48, 16)
        self.norm_out = nn.GroupNorm(4, 16)
        self.conv_out = nn.Conv2d(16, 3, 3, padding=1)

    def forward(self, x):
        f = torch.nn.functional
        a = self.down1(self.conv_in(x))
        b = self.down2(self.downsample(a))
        u = self.up(torch.cat([f.interpolate(b, scale_factor=2, mode="nearest"), a], 1))
        return self.conv_out(f.silu(self.norm_out(u)))


def randomize_groupnorm(module, gen):
    # Fresh GroupNorm layers scale by 1 and add 0; give them real weights and biases.
    for m in module.modules():
        if isinstance(m, torch.nn.GroupNorm):
            m.weight.data.copy_(torch.rand(m.num_channels, generator=gen) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_channels, generator=gen) * 0.1)


def randomize_batchnorm(module, gen):
    # Fresh BatchNorm layers are identities; give them real statistics.
    for m in module.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
