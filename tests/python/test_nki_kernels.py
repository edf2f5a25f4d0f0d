"""Whole kernels in the style of the public NKI tutorials (written by us), run unchanged through
`import nki` / `import neuronxcc.nki` after install(); the trace cache; asynchronous launches."""
import numpy as np
import torch

from torchneuron import nki

nki.install()
import nki as nki_module  # noqa: E402  (torchneuron's, registered by install())
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402
import neuronxcc.nki as legacy_nki  # noqa: E402
import neuronxcc.nki.language as legacy_nl  # noqa: E402



def dev(t):
    return t.to("neuron")


@legacy_nki.jit
def tensor_add_2d_grid(a_input, b_input):
    """Legacy surface: nl.arange indices, nl.load / nl.store, a 2-D SPMD grid of 128 x 512 tiles."""
    c_output = legacy_nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=legacy_nl.shared_hbm)
    ix = legacy_nl.program_id(0) * 128 + legacy_nl.arange(128)[:, None]
    iy = legacy_nl.program_id(1) * 512 + legacy_nl.arange(512)[None, :]
    a_tile = legacy_nl.load(a_input[ix, iy])
    b_tile = legacy_nl.load(b_input[ix, iy])
    legacy_nl.store(c_output[ix, iy], value=a_tile + b_tile)
    return c_output


@nki_module.jit
def tiled_matmul(lhs_t, rhs):
    """Current surface: dst-first ISA calls, PSUM accumulation over K, 128 x 512 output tiles."""
    k_size, m_size = lhs_t.shape
    _, n_size = rhs.shape
    result = nl.ndarray((m_size, n_size), dtype=lhs_t.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_size // 128):
        for n in nl.affine_range(n_size // 512):
            acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_size // 128):
                lhs_tile = nl.ndarray((128, 128), dtype=lhs_t.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhs_tile, src=lhs_t[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
                nisa.dma_copy(dst=rhs_tile, src=rhs[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                nisa.nc_matmul(dst=acc, stationary=lhs_tile, moving=rhs_tile, accumulate=True)
            out_tile = nl.ndarray((128, 512), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out_tile, src=acc)
            nisa.dma_copy(dst=result[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], src=out_tile)
    return result


@nki_module.jit
def transpose_2d(x):
    """Transposes [rows, cols] through 128 x 128 blocks with the matrix engine's transpose."""
    rows, cols = x.shape
    out = nl.ndarray((cols, rows), x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(rows // 128):
        for j in nl.affine_range(cols // 128):
            block = nl.load(x[nl.ds(i * 128, 128), nl.ds(j * 128, 128)])
            flipped = nl.ndarray((128, 128), x.dtype, buffer=nl.sbuf)
            nisa.nc_transpose(flipped, block)
            nl.store(out[nl.ds(j * 128, 128), nl.ds(i * 128, 128)], flipped)
    return out


@nki_module.jit
def average_pool_2d(in_tensor, pool_size):
    """Average pooling over [channels, height, width] with a square window, channels on partitions."""
    channels, height, width = in_tensor.shape
    out_h, out_w = height // pool_size, width // pool_size
    out = nl.ndarray((channels, out_h, out_w), in_tensor.dtype, buffer=nl.shared_hbm)
    tile = nl.load(in_tensor)
    windows = tile.reshape((channels, out_h, pool_size, out_w, pool_size))
    nl.store(out, nl.mean(windows, axis=(2, 4)))
    return out


@nki_module.jit
def fused_softmax(x):
    """Row softmax of [rows, cols], 128 rows at a time, the last tile masked (legacy mgrid)."""
    rows, cols = x.shape
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range((rows + 127) // 128):
        ix = nl.mgrid[0:128, 0:cols]
        valid = i * 128 + ix.p < rows
        t = nl.load(x[i * 128 + ix.p, ix.x], mask=valid)
        neg_max = nisa.tensor_reduce(np.max, t, axis=1, negate=True, keepdims=True)
        total = nl.ndarray((128, 1), nl.float32)
        e = nisa.activation_reduce(nl.exp, t, reduce_op=np.add, reduce_res=total, bias=neg_max)
        nl.store(out[i * 128 + ix.p, ix.x], nisa.tensor_scalar(e, np.multiply, nisa.reciprocal(total)), mask=valid)
    return out


@nki_module.jit
def layer_norm(x, gamma, beta, eps):
    """LayerNorm with bn_stats / bn_aggr (statistics in two chunks) and an affine transform."""
    rows, hidden = x.shape
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    g = nl.load(gamma.reshape((1, hidden)))
    b = nl.load(beta.reshape((1, hidden)))
    half = hidden // 2
    for i in nl.affine_range(rows // 128):
        t = nl.load(x[nl.ds(i * 128, 128), :])
        stats = nl.ndarray((128, 12), nl.float32)
        nisa.bn_stats(stats[:, 0:6], t[:, 0:half])
        nisa.bn_stats(stats[:, 6:12], t[:, half:hidden])
        mean_var = nisa.bn_aggr(stats)
        rstd = nl.rsqrt(nl.add(mean_var[:, 1:2], eps))
        centred = nisa.tensor_scalar(t, np.subtract, mean_var[:, 0:1], op1=np.multiply, operand1=rstd)
        nl.store(out[nl.ds(i * 128, 128), :], nl.add(nl.multiply(centred, g), b))
    return out


@nki_module.jit
def rms_norm(x, weight, eps):
    """RMSNorm: activation with reduce for the sum of squares, then a fused scale."""
    rows, hidden = x.shape
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    w = nl.load(weight.reshape((1, hidden)))
    for i in nl.affine_range(rows // 128):
        t = nl.load(x[nl.ds(i * 128, 128), :])
        squares = nl.ndarray((128, hidden), nl.float32)
        ss = nl.ndarray((128, 1), nl.float32)
        nisa.activation(squares, nl.square, t, reduce_op=nl.add, reduce_res=ss)
        rstd = nl.rsqrt(nl.add(nl.multiply(ss, 1.0 / hidden), eps))
        nl.store(out[nl.ds(i * 128, 128), :], nisa.scalar_tensor_tensor(data=t, op0=np.multiply, operand0=rstd,
                                                                          op1=np.multiply, operand1=w))
    return out


@nki_module.jit
def mamba_scan(delta, u, a, b, c):
    """Selective scan of one Mamba layer: h = exp(delta a) h + delta b u along time, y = sum_s c h.
    delta, u [channels, time]; a [channels, states]; b, c [states, time]."""
    channels, time = delta.shape
    states = a.shape[1]
    y = nl.ndarray((channels, time), delta.dtype, buffer=nl.shared_hbm)
    d = nl.load(delta)
    du = nl.multiply(d, nl.load(u))
    a_tile = nl.load(a)
    out = nl.zeros((channels, time), nl.float32)
    for s in nl.affine_range(states):
        decay = nisa.activation(nl.exp, d, scale=a_tile[:, nl.ds(s, 1)])
        b_row = nl.load(b[nl.ds(s, 1), :]).broadcast_to((channels, time))
        c_row = nl.load(c[nl.ds(s, 1), :]).broadcast_to((channels, time))
        drive = nl.multiply(du, b_row)
        h = nisa.tensor_tensor_scan(decay, drive, 0.0, np.multiply, np.add)
        nisa.tensor_tensor(out, out, nl.multiply(h, c_row), np.add)
    nl.store(y, out)
    return y


def test_tensor_add_with_a_2d_grid(nki_mode):
    a, b = torch.randn(256, 1024), torch.randn(256, 1024)
    torch.testing.assert_close(tensor_add_2d_grid[2, 2](dev(a), dev(b)).cpu(), a + b)


def test_tiled_matmul(nki_mode):
    lhs_t, rhs = torch.randn(256, 256), torch.randn(256, 1024)
    torch.testing.assert_close(tiled_matmul(dev(lhs_t), dev(rhs)).cpu(), lhs_t.t() @ rhs, rtol=1e-4, atol=1e-4)


def test_tiled_matmul_bf16(nki_mode):
    lhs_t, rhs = torch.randn(128, 128, dtype=torch.bfloat16), torch.randn(128, 512, dtype=torch.bfloat16)
    out = tiled_matmul(dev(lhs_t), dev(rhs)).cpu()
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, (lhs_t.float().t() @ rhs.float()).bfloat16())


def test_transpose(nki_mode):
    x = torch.randn(256, 384)
    assert torch.equal(transpose_2d(dev(x)).cpu(), x.t())


def test_average_pool(nki_mode):
    x = torch.randn(16, 12, 20)
    ref = torch.nn.functional.avg_pool2d(x.unsqueeze(0), 2).squeeze(0)
    torch.testing.assert_close(average_pool_2d(dev(x), 2).cpu(), ref, rtol=1e-5, atol=1e-6)


def test_fused_softmax(nki_mode):
    x = torch.randn(300, 77)
    torch.testing.assert_close(fused_softmax(dev(x)).cpu(), x.softmax(1), rtol=1e-5, atol=1e-6)


def test_layer_norm(nki_mode):
    x, g, b = torch.randn(256, 96), torch.randn(96), torch.randn(96)
    ref = torch.nn.functional.layer_norm(x, (96,), g, b, 1e-5)
    torch.testing.assert_close(layer_norm(dev(x), dev(g), dev(b), 1e-5).cpu(), ref, rtol=1e-4, atol=1e-4)


def test_rms_norm(nki_mode):
    x, w = torch.randn(128, 200), torch.randn(200)
    ref = x * torch.rsqrt(x.pow(2).mean(1, keepdim=True) + 1e-6) * w
    torch.testing.assert_close(rms_norm(dev(x), dev(w), 1e-6).cpu(), ref, rtol=1e-5, atol=1e-5)


def test_mamba_scan(nki_mode):
    channels, time, states = 32, 40, 4
    delta = torch.rand(channels, time) * 0.1
    u, a = torch.randn(channels, time), -torch.rand(channels, states)
    b, c = torch.randn(states, time), torch.randn(states, time)
    ref = torch.zeros(channels, time)
    for s in range(states):
        h = torch.zeros(channels)
        for t in range(time):
            h = torch.exp(delta[:, t] * a[:, s]) * h + delta[:, t] * u[:, t] * b[s, t]
            ref[:, t] += h * c[s, t]
    out = mamba_scan(dev(delta), dev(u), dev(a), dev(b), dev(c)).cpu()
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)


def test_simulate_kernel_takes_and_returns_numpy():
    x = torch.randn(300, 77)
    interpreted = nki_module.simulate_kernel(fused_softmax, x.numpy())
    assert isinstance(interpreted, np.ndarray)
    np.testing.assert_allclose(interpreted, x.softmax(1).numpy(), rtol=1e-5, atol=1e-6)


def test_traced_once_per_key_and_again_for_a_new_shape(monkeypatch):
    monkeypatch.setenv("TORCHNEURON_NKI_INTERPRET", "0")

    @nki.jit
    def scale(x, factor):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.multiply(nl.load(x), factor))
        return out
    x = torch.randn(64, 8, device="neuron")
    for _ in range(3):
        scale(x, 2.0)
    assert scale.traces == 1
    scale(torch.randn(64, 8, device="neuron"), 2.0)  # same key, new data
    assert scale.traces == 1
    scale(torch.randn(32, 8, device="neuron"), 2.0)  # new shape
    scale(x, 3.0)  # new constant
    scale(x.bfloat16(), 2.0)  # new dtype
    assert scale.traces == 4
    scale[2](x, 2.0)  # new grid
    assert scale.traces == 5


def test_artifact_comes_from_the_disk_cache_in_a_new_process(run_python, tmp_path):
    code = (
        "import torch, torchneuron\n"
        "from torchneuron import nki\n"
        "import torchneuron.nki.language as nl\n"
        "@nki.jit\n"
        "def k(x):\n"
        "    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)\n"
        "    nl.store(out, nl.exp(nl.load(x)))\n"
        "    return out\n"
        "k(torch.ones(4, 4, device='neuron')).cpu()\n"
        "s = torchneuron.compile_stats()\n"
        "print(s['artifacts_built'], s['disk_cache_hits'])\n"
    )
    env = {"TORCHNEURON_CACHE_DIR": str(tmp_path)}
    first = run_python(code, env=env)
    second = run_python(code, env=env)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert first.stdout.split() == ["1", "0"] and second.stdout.split() == ["0", "1"]


def test_launch_is_asynchronous_and_ordered_on_the_queue(monkeypatch):
    monkeypatch.setenv("TORCHNEURON_NKI_INTERPRET", "0")

    @nki.jit
    def add_one(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(x), 1.0))
        return out
    x = torch.zeros(128, 512, device="neuron")
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        x = add_one(x) * 1.0  # NKI kernels and native ops interleave in queue order
    end.record()
    end.synchronize()
    assert torch.equal(x.cpu(), torch.full((128, 512), 20.0))
    assert start.elapsed_time(end) >= 0


def test_install_never_shadows_a_real_installation(run_python, tmp_path):
    fake = tmp_path / "nki"
    fake.mkdir()
    (fake / "__init__.py").write_text("jit = 'the real one'\n")
    code = (
        "import sys, warnings\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "import torchneuron.nki as tn\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    names = tn.install()\n"
        "import nki, neuronxcc.nki\n"
        "print(nki.jit, 'nki' in names, neuronxcc.nki is tn, any('real' in str(w.message) for w in caught))\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["the", "real", "one", "False", "True", "True"]


def test_modules_at_import_with_the_environment_variable(run_python):
    code = ("import torchneuron, nki, nki.isa, nki.language as nl, neuronxcc.nki.isa as nisa\n"
            "print(nl.sbuf, nisa.nc_matmul.__module__)\n")
    result = run_python(code, env={"TORCHNEURON_NKI_MODULES": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["nl.sbuf", "torchneuron.nki.isa"]
    assert run_python("import torchneuron, nki").returncode != 0  # not without it
