"""The NKI kernel library against its PyTorch references on CPU: forward and gradients, as custom
ops in eager, torch.compile and autograd code, and the SDPA switch."""
import pytest
import torch
import torch.nn.functional as F

from tolerances import assert_close_to_scale
from torchneuron.nki import library as L


def leaf(t):
    """A neuron leaf tensor with the values of t."""
    return t.detach().to("neuron").requires_grad_()


def grads_match(cpu_leaves, neuron_leaves, **tol):
    for c, n in zip(cpu_leaves, neuron_leaves):
        torch.testing.assert_close(n.grad.cpu(), c.grad, **tol)


def rms_norm_reference(x, w, eps=1e-6):
    """CPU PyTorch's RMSNorm, the reference of L.rms_norm."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads,kv_heads,dim", [(2, 2, 64), (4, 2, 128), (4, 1, 64)])
def test_flash_attention_forward_and_backward(nki_mode, causal, heads, kv_heads, dim):
    torch.manual_seed(0)
    q = torch.randn(2, heads, 256, dim, requires_grad=True)
    k = torch.randn(2, kv_heads, 256, dim, requires_grad=True)
    v = torch.randn(2, kv_heads, 256, dim, requires_grad=True)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    grad = torch.randn_like(ref)
    ref.backward(grad)
    nq, nk, nv = leaf(q), leaf(k), leaf(v)
    out = L.flash_attention(nq, nk, nv, causal=causal)
    out.backward(grad.to("neuron"))
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=2e-5)
    grads_match([q, k, v], [nq, nk, nv], rtol=1e-4, atol=1e-4)


def test_flash_attention_bf16_and_scale():
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 2, 128, 64, dtype=torch.bfloat16) for _ in range(3))
    out = L.flash_attention(q.to("neuron"), k.to("neuron"), v.to("neuron"), causal=True, scale=0.3)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True, scale=0.3)
    assert out.dtype == torch.bfloat16
    assert_close_to_scale(out, ref)  # within 2e-2 of the output's largest value


def test_flash_attention_refuses_unsupported_shapes():
    q = torch.randn(1, 2, 100, 64, device="neuron")
    with pytest.raises(ValueError, match="sequence length 100 is not a multiple of 128"):
        L.flash_attention(q, q, q)
    q = torch.randn(1, 3, 128, 64, device="neuron")
    kv = torch.randn(1, 2, 128, 64, device="neuron")
    with pytest.raises(ValueError, match="3 query heads are not a multiple of 2"):
        L.flash_attention(q, kv, kv)


def test_rms_norm(nki_mode):
    torch.manual_seed(2)
    x = torch.randn(3, 70, 96, requires_grad=True)
    w = torch.randn(96, requires_grad=True)
    ref = rms_norm_reference(x, w)
    grad = torch.randn_like(ref)
    ref.backward(grad)
    nx, nw = leaf(x), leaf(w)
    out = L.rms_norm(nx, nw, 1e-6)
    out.backward(grad.to("neuron"))
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    grads_match([x, w], [nx, nw], rtol=1e-4, atol=1e-4)


def test_rope(nki_mode):
    torch.manual_seed(3)
    x = torch.randn(2, 3, 200, 64, requires_grad=True)
    angles = torch.randn(200, 32)
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., :32], x[..., 32:]
    ref = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
    grad = torch.randn_like(ref)
    ref.backward(grad)
    nx = leaf(x)
    out = L.rope(nx, cos.to("neuron"), sin.to("neuron"))
    out.backward(grad.to("neuron"))
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    grads_match([x], [nx], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy(nki_mode, reduction):
    torch.manual_seed(4)
    logits = torch.randn(150, 1100, requires_grad=True)
    target = torch.randint(0, 1100, (150,))
    target[::7] = -100
    ref = F.cross_entropy(logits, target, reduction=reduction)
    grad = torch.randn_like(ref)
    ref.backward(grad)
    nl_ = leaf(logits)
    out = L.cross_entropy(nl_, target.to("neuron"), reduction=reduction)
    out.backward(grad.to("neuron"))
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    grads_match([logits], [nl_], rtol=1e-5, atol=1e-6)


def test_moe_router_topk_and_blockwise_matmul(nki_mode):
    torch.manual_seed(5)
    logits = torch.randn(200, 16)
    weights, indices = L.moe_router_topk(logits.to("neuron"), 2)
    top = logits.softmax(-1).topk(2, -1)
    torch.testing.assert_close(weights.cpu(), top.values / top.values.sum(-1, keepdim=True))
    assert indices.dtype == torch.int32 and torch.equal(indices.cpu().long(), top.indices)
    x, w = torch.randn(3 * 128, 160), torch.randn(4, 160, 96)
    blocks = torch.tensor([3, 0, 3], dtype=torch.int32)
    out = L.moe_blockwise_matmul(x.to("neuron"), w.to("neuron"), blocks.to("neuron"))
    ref = torch.cat([x[i * 128:(i + 1) * 128] @ w[blocks[i]] for i in range(3)])
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-4, atol=1e-4)


def test_a_library_op_is_one_node_in_a_compiled_graph(fresh_compiler):
    graphs = []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        from torchneuron.compiler import neuron_backend
        return neuron_backend(gm, example_inputs)

    def block(x, w):
        return L.rms_norm(x, w) * 2.0 + 1.0

    x, w = torch.randn(4, 32, 64), torch.randn(64)
    compiled = torch.compile(block, backend=counting_backend, fullgraph=True)
    torch.testing.assert_close(compiled(x.to("neuron"), w.to("neuron")).cpu(), rms_norm_reference(x, w) * 2.0 + 1.0)
    targets = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.torchneuron_nki.rms_norm) == 1


def test_compiled_training_step_through_library_ops(fresh_compiler):
    torch.manual_seed(6)
    q = torch.randn(1, 2, 128, 64)
    w = torch.randn(64)

    def loss_fn(q, w):
        return L.flash_attention(L.rms_norm(q, w), q, q, causal=True).square().mean()

    def reference(q, w):  # CPU PyTorch
        return F.scaled_dot_product_attention(rms_norm_reference(q, w), q, q, is_causal=True).square().mean()

    nq, nw = leaf(q), leaf(w)
    loss = torch.compile(loss_fn, backend="neuron", fullgraph=True)(nq, nw)
    loss.backward()
    cq, cw = q.clone().requires_grad_(), w.clone().requires_grad_()
    expected = reference(cq, cw)
    expected.backward()
    torch.testing.assert_close(loss.detach().cpu(), expected.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(nq.grad.cpu(), cq.grad, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(nw.grad.cpu(), cw.grad, rtol=1e-4, atol=1e-6)


def test_sdpa_switch_routes_to_the_nki_kernel():
    original = torch.ops.torchneuron_nki.flash_attention
    q, k, v = (torch.randn(1, 4, 128, 64) for _ in range(3))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    L.use_nki_attention(True)
    try:
        assert L.nki_attention_enabled()
        out = F.scaled_dot_product_attention(q.to("neuron"), k.to("neuron"), v.to("neuron"), is_causal=True)
        graph_ops = []

        def backend(gm, example_inputs):
            graph_ops.extend(n.target for n in gm.graph.nodes if n.op == "call_function")
            return gm.forward

        fn = torch.compile(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True), backend=backend,
                           fullgraph=True)
        compiled = fn(q.to("neuron"), k.to("neuron"), v.to("neuron"))
        masked = F.scaled_dot_product_attention(q.to("neuron"), k.to("neuron"), v.to("neuron"),
                                                attn_mask=torch.ones(128, 128, dtype=torch.bool, device="neuron"))
    finally:
        L.use_nki_attention(False)
    assert not L.nki_attention_enabled()
    assert original in graph_ops
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(compiled.cpu(), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(masked.cpu(), F.scaled_dot_product_attention(q, k, v), rtol=1e-5, atol=1e-5)


def test_library_ops_under_autocast():
    torch.manual_seed(7)
    proj = torch.nn.Linear(64, 64).to("neuron")
    x = torch.randn(1, 2, 128, 64, device="neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        h = proj(x)
        out = L.flash_attention(h, h, h)
    assert h.dtype == torch.bfloat16 and out.dtype == torch.bfloat16
    ref = F.scaled_dot_product_attention(h.float().cpu(), h.float().cpu(), h.float().cpu())
    assert_close_to_scale(out, ref)  # within 2e-2 of the output's largest value


def test_attention_switch_from_the_environment(run_python):
    code = ("import torch, torchneuron, torch.nn.functional as F\n"
            "from torchneuron.nki import library\n"
            "q = torch.randn(1, 2, 128, 64)\n"
            "out = F.scaled_dot_product_attention(q.to('neuron'), q.to('neuron'), q.to('neuron'))\n"
            "ok = torch.allclose(out.cpu(), F.scaled_dot_product_attention(q, q, q), atol=1e-5)\n"
            "print(library.nki_attention_enabled(), ok)\n")
    result = run_python(code, env={"TORCHNEURON_NKI_ATTENTION": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"]
