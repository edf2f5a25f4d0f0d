"""torch.fft on neuron against CPU PyTorch (pocketfft): complex, real-to-complex and
complex-to-real transforms of lengths with small factors and with large prime factors
(Bluestein's transform), over one and several dims, every norm mode, float and double; STFT,
and the gradient of a spectral loss."""

import pytest
import torch

from test_nn_ops import sample


def complex_sample(shape, dtype=torch.complex64, seed=0):
    real = sample(shape, seed=seed).double()
    imag = sample(shape, seed=seed + 100).double()
    return torch.complex(real, imag).to(dtype)


def assert_spectrum_close(actual, expected):
    """Compares against CPU within float rounding of the transform's magnitudes."""
    actual = actual.cpu()
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    single = expected.dtype in (torch.float32, torch.complex64)
    scale = max(1.0, expected.abs().max().item()) if expected.numel() else 1.0
    tol = (2e-5 if single else 1e-11) * scale
    torch.testing.assert_close(actual, expected, atol=tol, rtol=0)


LENGTHS = [1, 2, 7, 8, 12, 30, 64, 97, 100, 210, 1031]  # 97 and 1031: prime, Bluestein's transform


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
@pytest.mark.parametrize("n", LENGTHS)
def test_fft_and_ifft(n, dtype, no_fallback):
    x = complex_sample((3, n), dtype)
    for norm in (None, "ortho", "forward"):
        assert_spectrum_close(torch.fft.fft(x.to("neuron"), norm=norm), torch.fft.fft(x, norm=norm))
        assert_spectrum_close(torch.fft.ifft(x.to("neuron"), norm=norm), torch.fft.ifft(x, norm=norm))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("n", [1, 2, 7, 8, 30, 97, 100])
def test_rfft_and_irfft(n, dtype, no_fallback):
    x = sample((2, 3, n)).to(dtype)
    for norm in (None, "ortho"):
        spectrum = torch.fft.rfft(x.to("neuron"), norm=norm)
        assert_spectrum_close(spectrum, torch.fft.rfft(x, norm=norm))
        cpu_spectrum = torch.fft.rfft(x, norm=norm)
        # irfft to the original length and to padded / cut lengths
        for length in {n, 2 * n, max(1, n - 1)}:
            assert_spectrum_close(torch.fft.irfft(cpu_spectrum.to("neuron"), n=length, norm=norm),
                                  torch.fft.irfft(cpu_spectrum, n=length, norm=norm))


def test_transforms_over_several_dims(no_fallback):
    x, z = sample((4, 6, 10, 9)), complex_sample((4, 6, 10, 9))
    dx, dz = x.to("neuron"), z.to("neuron")
    assert_spectrum_close(torch.fft.fft2(dz), torch.fft.fft2(z))
    assert_spectrum_close(torch.fft.fftn(dz, dim=(0, 2)), torch.fft.fftn(z, dim=(0, 2)))
    assert_spectrum_close(torch.fft.ifftn(dz, norm="ortho"), torch.fft.ifftn(z, norm="ortho"))
    assert_spectrum_close(torch.fft.rfft2(dx), torch.fft.rfft2(x))
    assert_spectrum_close(torch.fft.rfftn(dx, dim=(1, 3)), torch.fft.rfftn(x, dim=(1, 3)))
    half = torch.fft.rfftn(x, dim=(1, 2, 3))
    assert_spectrum_close(torch.fft.irfftn(half.to("neuron"), s=(6, 10, 9)), torch.fft.irfftn(half, s=(6, 10, 9)))
    assert_spectrum_close(torch.fft.irfft2(half.to("neuron"), s=(10, 8)), torch.fft.irfft2(half, s=(10, 8)))
    # a transposed (non-contiguous) input
    assert_spectrum_close(torch.fft.fft(dz.transpose(1, 3), dim=1), torch.fft.fft(z.transpose(1, 3), dim=1))
    # round trip
    assert_spectrum_close(torch.fft.irfftn(torch.fft.rfftn(dx), s=x.shape), x)


def test_stft_matches_cpu(no_fallback):
    signal = sample((2, 4000))
    window = torch.hann_window(400)
    expected = torch.stft(signal, 512, hop_length=160, win_length=400, window=window, return_complex=True)
    actual = torch.stft(signal.to("neuron"), 512, hop_length=160, win_length=400, window=window.to("neuron"),
                        return_complex=True)
    assert_spectrum_close(actual, expected)


def test_spectral_loss_gradient():
    """A multi-resolution-STFT-style loss: magnitudes of rfft, their gradient through the transform."""
    x = sample((3, 256))
    grads = []
    for device in ("cpu", "neuron"):
        leaf = x.to(device).detach().requires_grad_()
        spectrum = torch.fft.rfft(leaf * torch.hann_window(256, device=device))
        loss = torch.view_as_real(spectrum).pow(2).sum(-1).add(1e-6).sqrt().log().mean()
        loss.backward()
        grads.append(leaf.grad)
    torch.testing.assert_close(grads[1].cpu(), grads[0], atol=1e-5, rtol=1e-4)


def test_fft_rejects_bad_input():
    z = torch.zeros(4, 5, dtype=torch.complex64, device="neuron")
    with pytest.raises(RuntimeError, match="Invalid number of data points"):
        torch.fft.irfft(z, n=0)
    with pytest.raises(IndexError):
        torch.fft.fft(z, dim=3)
