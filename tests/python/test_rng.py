"""Random numbers on neuron: seeding and reproducibility, distributions, generators, RNG state save/restore."""

import math

import pytest
import torch


def offset_of(state):
    assert state.dtype == torch.uint8 and state.numel() == 16
    return int.from_bytes(bytes(state[8:].tolist()), "little")


def seed_of(state):
    return int.from_bytes(bytes(state[:8].tolist()), "little")


@pytest.mark.parametrize("fn", [torch.randn, torch.rand], ids=["randn", "rand"])
def test_manual_seed_reproduces(fn):
    torch.manual_seed(1234)
    a = fn(1000, device="neuron").cpu()
    b = fn(1000, device="neuron").cpu()
    torch.manual_seed(1234)
    a2 = fn(1000, device="neuron").cpu()
    b2 = fn(1000, device="neuron").cpu()
    assert torch.equal(a, a2) and torch.equal(b, b2)
    assert not torch.equal(a, b)  # the sequence advances
    torch.manual_seed(1235)
    assert not torch.equal(fn(1000, device="neuron").cpu(), a)


def test_manual_seed_reaches_every_device():
    torch.manual_seed(7)
    a0 = torch.randn(64, device="neuron:0").cpu()
    a1 = torch.randn(64, device="neuron:1").cpu()
    torch.manual_seed(7)
    assert torch.equal(torch.randn(64, device="neuron:1").cpu(), a1)
    assert torch.equal(torch.randn(64, device="neuron:0").cpu(), a0)
    assert torch.neuron.initial_seed(0) == 7 and torch.neuron.initial_seed(1) == 7


def test_neuron_manual_seed_only_current_device():
    torch.neuron.manual_seed_all(11)
    torch.neuron.manual_seed(12)
    assert torch.neuron.initial_seed(0) == 12
    assert torch.neuron.initial_seed(1) == 11


@pytest.mark.parametrize("seed", [-1, -(2**63), 0, 2**63, 2**64 - 1])
def test_manual_seed_takes_every_seed_torch_takes(seed):
    # torch.manual_seed seeds every device (ours through autoload); it accepts [-2**63, 2**64)
    # and keeps a negative seed's two's-complement bits: CPU's generator is the reference.
    torch.manual_seed(seed)
    expected = torch.initial_seed()
    assert expected == seed % 2**64
    assert [torch.neuron.initial_seed(i) for i in range(torch.neuron.device_count())] == [expected] * 2
    from_torch = torch.randn(256, device="neuron").cpu()
    torch.neuron.manual_seed_all(seed)
    assert torch.equal(torch.randn(256, device="neuron").cpu(), from_torch)
    torch.neuron.manual_seed(seed)
    assert torch.neuron.initial_seed() == expected


@pytest.mark.parametrize("seed", [2**64, -(2**63) - 1])
def test_manual_seed_out_of_range_raises_as_cpu(seed):
    with pytest.raises(ValueError) as cpu_error:
        torch.Generator().manual_seed(seed)
    with pytest.raises(ValueError) as neuron_error:
        torch.neuron.manual_seed_all(seed)
    assert str(neuron_error.value) == str(cpu_error.value)


def test_normal_statistics():
    torch.manual_seed(0)
    x = torch.randn(100_000, device="neuron").cpu()
    assert x.dtype == torch.float32
    assert abs(x.mean().item()) < 0.02
    assert abs(x.std().item() - 1.0) < 0.02
    assert (x > 3).float().mean().item() < 0.003  # P(z > 3) = 0.00135
    y = torch.empty(100_000, device="neuron").normal_(mean=3.0, std=0.5).cpu()
    assert abs(y.mean().item() - 3.0) < 0.01
    assert abs(y.std().item() - 0.5) < 0.01


def test_rand_range_and_uniformity():
    torch.manual_seed(1)
    x = torch.rand(100_000, device="neuron").cpu()
    assert x.min().item() >= 0.0
    assert x.max().item() < 1.0
    assert abs(x.mean().item() - 0.5) < 0.01
    counts = torch.histc(x, bins=10, min=0.0, max=1.0)
    assert counts.min().item() > 9_500 and counts.max().item() < 10_500


def test_uniform_range():
    torch.manual_seed(2)
    x = torch.empty(50_000, device="neuron").uniform_(-3.0, 5.0).cpu()
    assert x.min().item() >= -3.0
    assert x.max().item() < 5.0
    assert x.min().item() < -2.9 and x.max().item() > 4.9
    assert abs(x.mean().item() - 1.0) < 0.05
    with pytest.raises(RuntimeError, match="from"):
        torch.empty(3, device="neuron").uniform_(2.0, 1.0)


def test_random_into_noncontiguous_view():
    torch.manual_seed(3)
    base = torch.zeros(100, 100, device="neuron")
    base[:, ::2].uniform_(1.0, 2.0)
    host = base.cpu()
    assert torch.equal(host[:, 1::2], torch.zeros(100, 50))
    assert host[:, ::2].min().item() >= 1.0 and host[:, ::2].max().item() < 2.0


def test_generator_object():
    g = torch.Generator(device="neuron")
    assert g.device == torch.device("neuron:0")
    g.manual_seed(5)
    assert g.initial_seed() == 5
    default_state = torch.neuron.get_rng_state()
    a = torch.randn(500, device="neuron", generator=g).cpu()
    g2 = torch.Generator(device="neuron").manual_seed(5)
    b = torch.randn(500, device="neuron", generator=g2).cpu()
    assert torch.equal(a, b)
    # Drawing from a private generator leaves the default one alone.
    assert torch.equal(torch.neuron.get_rng_state(), default_state)
    # Its state can be saved and restored.
    state = g.get_state()
    c = torch.rand(100, device="neuron", generator=g).cpu()
    g.set_state(state)
    assert torch.equal(torch.rand(100, device="neuron", generator=g).cpu(), c)
    g1 = torch.Generator(device="neuron:1").manual_seed(5)
    assert g1.device == torch.device("neuron:1")
    assert torch.equal(torch.randn(500, device="neuron:1", generator=g1).cpu(), a)


def test_get_rng_state_format_and_restore():
    torch.neuron.manual_seed(99)
    state = torch.neuron.get_rng_state()
    assert state.dtype == torch.uint8
    assert state.device.type == "cpu"
    assert state.shape == (16,)
    assert seed_of(state) == 99
    assert offset_of(state) == 0
    a = torch.randn(300, device="neuron").cpu()
    b = torch.rand(7, device="neuron").cpu()
    torch.neuron.set_rng_state(state)
    assert torch.equal(torch.randn(300, device="neuron").cpu(), a)
    assert torch.equal(torch.rand(7, device="neuron").cpu(), b)


def test_rng_state_per_device():
    torch.neuron.manual_seed_all(21)
    states = torch.neuron.get_rng_state_all()
    assert len(states) == torch.neuron.device_count()
    a = torch.randn(10, device="neuron:1").cpu()
    assert offset_of(torch.neuron.get_rng_state("neuron:1")) > 0
    assert offset_of(torch.neuron.get_rng_state(0)) == 0
    torch.neuron.set_rng_state_all(states)
    assert torch.equal(torch.randn(10, device="neuron:1").cpu(), a)


@pytest.mark.parametrize("numel", [1, 3, 4, 5, 100, 1001])
@pytest.mark.parametrize("fn", [torch.randn, torch.rand], ids=["randn", "rand"])
def test_offset_advances_in_multiples_of_four(fn, numel):
    torch.neuron.manual_seed(0)
    before = offset_of(torch.neuron.get_rng_state())
    fn(numel, device="neuron")
    after = offset_of(torch.neuron.get_rng_state())
    assert after > before
    assert after % 4 == 0
    assert after - before >= numel  # at least one 32-bit Philox word per float32 sample
    fn(numel, device="neuron")
    assert offset_of(torch.neuron.get_rng_state()) == after + (after - before)


def test_state_with_offset_not_multiple_of_four_is_rejected():
    state = torch.neuron.get_rng_state().clone()
    state[8] = 6
    with pytest.raises(RuntimeError, match="multiple of 4"):
        torch.neuron.set_rng_state(state)


def test_fork_rng():
    torch.manual_seed(5)
    with torch.random.fork_rng(devices=[0], device_type="neuron"):
        torch.randn(100, device="neuron")
    a = torch.randn(10, device="neuron").cpu()
    torch.manual_seed(5)
    assert torch.equal(torch.randn(10, device="neuron").cpu(), a)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_low_and_double_precision_random(dtype):
    torch.manual_seed(4)
    n = 100_000
    x = torch.rand(n, dtype=dtype, device="neuron")
    assert x.dtype == dtype
    host = x.cpu()
    assert host.min().item() >= 0.0
    assert host.max().item() < 1.0
    assert abs(host.double().mean().item() - 0.5) < 0.01
    y = torch.randn(n, dtype=dtype, device="neuron").cpu()
    assert y.dtype == dtype
    assert abs(y.double().mean().item()) < 0.02
    assert abs(y.double().std().item() - 1.0) < 0.02
    torch.manual_seed(4)
    assert torch.equal(torch.rand(n, dtype=dtype, device="neuron").cpu(), host)
    if dtype == torch.float64:
        # Double samples use the full mantissa, not float32 values widened.
        assert not torch.equal(host, host.float().double())


def test_random_on_integer_tensor_rejected():
    with pytest.raises(RuntimeError):
        torch.empty(4, dtype=torch.int32, device="neuron").normal_()


def test_default_generators_are_the_devices_default_generators():
    """torch.neuron.default_generators holds each device's default generator, as
    torch.cuda.default_generators does: seeding one through it is seeding the device, and a
    sample after either seeding is the same."""
    generators = torch.neuron.default_generators
    assert len(generators) == torch.neuron.device_count()
    assert [g.device for g in generators] == [torch.device("neuron", i) for i in range(len(generators))]
    assert torch.neuron.default_generators is generators
    generators[1].manual_seed(5)
    assert torch.neuron.initial_seed(1) == 5
    torch.neuron.manual_seed_all(7)
    assert [g.initial_seed() for g in generators] == [7] * len(generators)
    generators[0].manual_seed(123)
    through_generator = torch.randn(64, device="neuron").cpu()
    torch.neuron.manual_seed(123)
    assert torch.equal(torch.randn(64, device="neuron").cpu(), through_generator)
    assert not torch.equal(torch.randn(64, device="neuron").cpu(), through_generator)


def ks_distance(samples, cdf):
    """Kolmogorov-Smirnov distance between the samples and a distribution function."""
    x = samples.double().sort().values
    n = x.numel()
    f = cdf(x)
    steps = torch.arange(1, n + 1, dtype=torch.float64) / n
    return max((steps - f).abs().max().item(), (f - (steps - 1.0 / n)).abs().max().item())


def test_exponential_cauchy_log_normal_and_geometric_follow_their_laws(no_fallback):
    # 40,000 draws: a correct sampler stays under a KS distance of 0.012 with probability
    # above 0.999; a wrong parameter or transform is far past it.
    torch.manual_seed(7)
    n = 40000
    cases = [
        (lambda t: t.exponential_(2.5), lambda x: 1 - torch.exp(-2.5 * x)),
        (lambda t: t.cauchy_(1.0, 0.5), lambda x: 0.5 + torch.atan((x - 1.0) / 0.5) / torch.pi),
        (lambda t: t.log_normal_(0.3, 0.7), lambda x: 0.5 * (1 + torch.erf((x.log() - 0.3) / (0.7 * 2 ** 0.5)))),
    ]
    for dtype in (torch.float32, torch.float64):
        for fill, cdf in cases:
            samples = fill(torch.empty(n, dtype=dtype, device="neuron")).cpu()
            assert samples.dtype == dtype and samples.isfinite().all()
            assert ks_distance(samples, cdf) < 0.012
    draws = torch.empty(n, device="neuron").geometric_(0.3).cpu()
    assert draws.min() >= 1 and torch.equal(draws, draws.round())
    for k in range(1, 6):
        expected = 0.3 * 0.7 ** (k - 1)
        assert abs((draws == k).double().mean().item() - expected) < 4 * (expected * (1 - expected) / n) ** 0.5
    torch.manual_seed(3)
    a = torch.empty(100, device="neuron").exponential_().cpu()
    torch.manual_seed(3)
    assert torch.equal(a, torch.empty(100, device="neuron").exponential_().cpu())
    half = torch.empty(1000, dtype=torch.bfloat16, device="neuron").exponential_()
    assert half.dtype == torch.bfloat16 and (half.cpu() >= 0).all()
    with pytest.raises(RuntimeError, match="exponential_ expects lambda > 0.0"):
        torch.empty(3, device="neuron").exponential_(-1.0)
    with pytest.raises(RuntimeError, match=r"geometric_ expects p to be in \(0, 1\)"):
        torch.empty(3, device="neuron").geometric_(1.5)


def test_normal_with_tensor_mean_and_std(no_fallback):
    torch.manual_seed(1)
    mean = torch.linspace(-3, 3, 40000, device="neuron")
    std = torch.linspace(0.5, 2.0, 40000, device="neuron")
    for draws, m, s in ((torch.normal(mean, std), mean, std), (torch.normal(mean, 1.5), mean, torch.full_like(std, 1.5)),
                        (torch.normal(0.5, std), torch.full_like(mean, 0.5), std)):
        z = ((draws - m) / s).cpu()
        assert ks_distance(z, lambda x: 0.5 * (1 + torch.erf(x / 2 ** 0.5))) < 0.012
    assert torch.equal(torch.normal(mean[:5], torch.zeros(5, device="neuron")).cpu(), mean[:5].cpu())
    with pytest.raises(RuntimeError, match="normal expects all elements of std >= 0.0"):
        torch.normal(mean[:3], torch.tensor([1.0, -1.0, 1.0], device="neuron"))


def test_multinomial_with_and_without_replacement(no_fallback):
    torch.manual_seed(11)
    probs = torch.tensor([[1.0, 0.0, 3.0, 6.0], [5.0, 5.0, 0.0, 0.0]], device="neuron")  # unnormalized
    n = 20000
    draws = torch.multinomial(probs, n, replacement=True).cpu()
    assert draws.shape == (2, n) and draws.dtype == torch.int64
    for row, p in zip(draws, probs.cpu() / probs.cpu().sum(1, keepdim=True)):
        freq = torch.bincount(row, minlength=4).double() / n
        assert torch.all((freq - p).abs() <= 4 * (p * (1 - p) / n).sqrt() + 1e-12), (freq, p)
    # Without replacement: distinct categories; the first draw follows p, zero-probability ones
    # come only after every positive one.
    rows = torch.tensor([0.1, 0.0, 0.3, 0.6], device="neuron").expand(n, 4)
    picks = torch.multinomial(rows, 3).cpu()
    assert all(len(set(r.tolist())) == 3 for r in picks[:200])
    assert (picks != 1).all()
    freq = torch.bincount(picks[:, 0], minlength=4).double() / n
    assert torch.allclose(freq, torch.tensor([0.1, 0.0, 0.3, 0.6], dtype=torch.float64), atol=0.015)
    one_d = torch.multinomial(torch.tensor([0.2, 0.8], device="neuron"), 2)
    assert one_d.shape == (2,) and sorted(one_d.cpu().tolist()) == [0, 1]
    assert torch.distributions.Categorical(probs=probs).sample((5,)).shape == (5, 2)
    assert torch.nn.functional.gumbel_softmax(probs.log().clamp(min=-30), tau=0.5).shape == (2, 4)  # exponential_


def test_multinomial_errors():
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist.size\\(-1\\) samples without replacement"):
        torch.multinomial(torch.ones(3, device="neuron"), 4)
    with pytest.raises(RuntimeError, match="cannot sample n_sample <= 0 samples"):
        torch.multinomial(torch.ones(3, device="neuron"), 0)
    torch.neuron.synchronize()
    for probs, replacement, message in (([0.5, -0.1, 0.6], True, "probability tensor contains either `inf`, `nan` or element < 0"),
                                        ([0.0, 0.0], True, r"invalid multinomial distribution \(sum of probabilities <= 0\)"),
                                        ([0.5, 0.0, 0.0], False, "not enough non-negative category to sample")):
        torch.multinomial(torch.tensor(probs, device="neuron"), 2, replacement=replacement)
        with pytest.raises(torch.AcceleratorError, match=message):
            torch.neuron.synchronize()


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32], ids=str)
def test_randperm_is_a_uniform_permutation_and_reproducible(dtype, no_fallback):
    torch.manual_seed(7)
    first = [torch.randperm(6, dtype=dtype, device="neuron").cpu() for _ in range(6000)]
    torch.manual_seed(7)
    assert torch.equal(torch.randperm(6, dtype=dtype, device="neuron").cpu(), first[0])
    for p in first[:50]:
        assert p.dtype == dtype and torch.equal(p.sort().values, torch.arange(6, dtype=dtype))
    # Where element 0 lands: uniform over 6 places (within 4 sigma over 6000 draws).
    places = torch.stack(first).eq(0).float().argmax(dim=1)
    counts = torch.bincount(places, minlength=6).double()
    sigma = (6000 * (1 / 6) * (5 / 6)) ** 0.5
    assert (counts - 1000).abs().max() < 4 * sigma
    big = torch.randperm(100_000, device="neuron", generator=torch.Generator("neuron").manual_seed(3)).cpu()
    assert torch.equal(big.sort().values, torch.arange(100_000))
    assert torch.randperm(0, device="neuron").numel() == 0


def test_randperm_errors_like_cpu():
    with pytest.raises(RuntimeError, match="n must be non-negative"):
        torch.ops.aten.randperm.generator_out(-1, generator=None, out=torch.empty(0, dtype=torch.long, device="neuron"))
    with pytest.raises(RuntimeError, match="n cannot be greater than 2049 for Half type"):
        torch.randperm(3000, dtype=torch.half, device="neuron")
    with pytest.raises(RuntimeError, match="without overflow"):
        torch.randperm(300, dtype=torch.uint8, device="neuron")


def two_sample_ks_distance(a, b):
    a, b = a.double().sort().values, b.double().sort().values
    points = torch.cat([a, b])
    return (torch.searchsorted(a, points, right=True) / a.numel() - torch.searchsorted(b, points, right=True) / b.numel()).abs().max().item()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_standard_gamma_follows_its_law(dtype, no_fallback):
    # The gamma distribution function is the regularized incomplete gamma function. 40,000 draws:
    # a correct sampler stays under a KS distance of 0.012 with probability above 0.999.
    torch.manual_seed(5)
    n = 40000
    for alpha in (0.1, 0.5, 1.0, 2.5, 30.0, 1e4):  # from 0.05 down, over 1% of draws sit at the floor below
        samples = torch._standard_gamma(torch.full((n,), alpha, dtype=dtype, device="neuron")).cpu()
        assert samples.dtype == dtype and (samples > 0).all()
        assert ks_distance(samples, lambda x: torch.special.gammainc(torch.full_like(x, alpha), x)) < 0.012, alpha
    # Below the smallest normal number (tiny alpha, alpha <= 0, NaN) CPU PyTorch returns that
    # number, so that logs of samples stay finite; an infinite alpha gives infinity.
    edge = torch.tensor([1e-30, 0.0, -1.0, float("nan"), float("inf")], dtype=dtype)
    got = torch._standard_gamma(edge.to("neuron")).cpu()
    assert torch.equal(got, torch._standard_gamma(edge))
    assert torch._standard_gamma(torch.empty(0, 3, device="neuron")).shape == (0, 3)
    with pytest.raises(RuntimeError, match="\"_standard_gamma\" not implemented for 'Long'"):
        torch._standard_gamma(torch.ones(3, dtype=torch.long, device="neuron"))


def test_dirichlet_rows_follow_their_law_and_sum_to_one(no_fallback):
    torch.manual_seed(6)
    n = 20000
    alpha = torch.tensor([0.5, 2.0, 3.0])
    got = torch._sample_dirichlet(alpha.to("neuron").expand(n, 3)).cpu()
    assert torch.allclose(got.sum(1), torch.ones(n), atol=1e-6)
    reference = torch._sample_dirichlet(alpha.expand(n, 3))
    for j in range(3):  # each component is a Beta(alpha_j, sum - alpha_j) variable; 0.0195: p = 0.001
        assert two_sample_ks_distance(got[:, j], reference[:, j]) < 0.0195, j
    edge = torch.tensor([[0.0, 0.0, 0.0], [1e-30, 1e-30, 1e-30]])
    assert torch.allclose(torch._sample_dirichlet(edge.to("neuron")).cpu(), torch._sample_dirichlet(edge))
    assert torch._sample_dirichlet(torch.tensor(2.0, device="neuron")).item() == 1.0


def test_poisson_and_binomial_match_their_probability_mass_functions(no_fallback):
    torch.manual_seed(8)
    n = 40000

    def check_counts(draws, log_pmf):
        assert torch.equal(draws, draws.round()) and (draws >= 0).all()
        values, counts = torch.unique(draws, return_counts=True)
        p = log_pmf(values).exp()
        freq = counts.double() / n
        assert torch.all((freq - p).abs() <= 5 * (p * (1 - p) / n).sqrt() + 2e-4), (values, freq, p)

    for rate in (0.3, 4.0, 9.99, 10.0, 55.0, 3000.0):  # both methods, either side of 10
        draws = torch.poisson(torch.full((n,), rate, device="neuron")).cpu()
        check_counts(draws, lambda k: k * math.log(rate) - rate - torch.lgamma(k + 1))
    for count, prob in ((10.0, 0.3), (10.0, 0.9), (100.0, 0.05), (100.0, 0.5), (1000.0, 0.7), (1e5, 0.2)):
        draws = torch.binomial(torch.full((n,), count, device="neuron"), torch.full((n,), prob, device="neuron")).cpu()
        check_counts(draws, torch.distributions.Binomial(count, torch.tensor(prob, dtype=torch.float64)).log_prob)
    # CPU PyTorch's edge cases: rate 0; prob clamped to [0, 1]; a count <= 0; a NaN prob; broadcasting.
    assert torch.equal(torch.poisson(torch.zeros(5, device="neuron")).cpu(), torch.zeros(5))
    counts = torch.tensor([10.0, 10.0, -3.0, 0.0, 7.0])
    probs = torch.tensor([-0.5, 1.5, 0.5, 0.5, float("nan")])
    got = torch.binomial(counts.to("neuron"), probs.to("neuron")).cpu()
    assert torch.equal(got.isnan(), torch.binomial(counts, probs).isnan())
    assert got[:4].tolist() == [0.0, 10.0, 0.0, 0.0]
    assert torch.binomial(torch.tensor([5.0], device="neuron"), torch.full((2, 3), 0.5, device="neuron")).shape == (2, 3)


def test_samplers_reproduce_from_seeds_and_generators(no_fallback):
    alpha = torch.linspace(0.1, 20, 1000, device="neuron")
    draws = {
        "gamma": lambda g=None: torch._standard_gamma(alpha, generator=g),
        "dirichlet": lambda g=None: torch._sample_dirichlet(alpha.view(100, 10), generator=g),
        "poisson": lambda g=None: torch.poisson(alpha, generator=g),
        "binomial": lambda g=None: torch.binomial(alpha.round() * 3, alpha / 20, generator=g),
    }
    for name, draw in draws.items():
        torch.manual_seed(21)
        first, second = draw().cpu(), draw().cpu()
        torch.manual_seed(21)
        assert torch.equal(draw().cpu(), first), name
        assert not torch.equal(first, second), name
        generator = torch.Generator("neuron").manual_seed(4)
        from_generator = draw(generator).cpu()
        assert torch.equal(draw(torch.Generator("neuron").manual_seed(4)).cpu(), from_generator), name


def test_sampler_errors_like_cpu():
    torch.poisson(torch.tensor([1.0, -1.0], device="neuron"))
    with pytest.raises(torch.AcceleratorError, match="invalid Poisson rate, expected rate to be non-negative"):
        torch.neuron.synchronize()
    with pytest.raises(RuntimeError, match="binomial only supports floating-point dtypes for count, got: Long"):
        torch.binomial(torch.ones(2, dtype=torch.long, device="neuron"), torch.ones(2, device="neuron"))
    with pytest.raises(RuntimeError, match="Found dtype Float but expected Double"):
        torch.binomial(torch.ones(2, dtype=torch.float64, device="neuron"), torch.ones(2, device="neuron"))


def test_distributions_sample_on_the_device(no_fallback):
    # torch.distributions draws these through _standard_gamma, _sample_dirichlet, poisson and binomial.
    torch.manual_seed(2)
    c = lambda *v: torch.tensor(v, device="neuron")
    for dist in (torch.distributions.Gamma(c(2.0, 0.5), c(1.0, 3.0)), torch.distributions.Beta(c(2.0), c(5.0)),
                 torch.distributions.Dirichlet(c(1.0, 2.0, 3.0)), torch.distributions.Poisson(c(3.0, 30.0)),
                 torch.distributions.Binomial(10, c(0.3, 0.7)), torch.distributions.StudentT(c(3.0)),
                 torch.distributions.Chi2(c(4.0)), torch.distributions.NegativeBinomial(5, c(0.3))):
        sample = dist.sample((2000,))
        assert sample.device.type == "neuron"
        expected = dist.mean.cpu()
        spread = (dist.variance.cpu() / 2000).sqrt()
        assert ((sample.cpu().mean(0) - expected).abs() <= 6 * spread + 1e-6).all(), type(dist).__name__


def test_gamma_sample_gradient_against_differenced_incomplete_gamma(no_fallback):
    # d x / d alpha at a fixed quantile: -(d/d alpha P(alpha, x)) / density, the reference
    # differenced from torch.special.gammainc / gammaincc on the CPU in float64.
    torch.manual_seed(9)
    alpha = torch.tensor([0.05, 0.5, 1.0, 3.0, 50.0, 1000.0], dtype=torch.float64).repeat_interleave(50)
    x = torch._standard_gamma(alpha)
    h = 1e-5 * torch.where(alpha < 1, alpha, alpha.sqrt())
    upper = x >= alpha + 1
    lower_slope = (torch.special.gammainc(alpha + h, x) - torch.special.gammainc(alpha - h, x)) / (2 * h)
    upper_slope = -(torch.special.gammaincc(alpha + h, x) - torch.special.gammaincc(alpha - h, x)) / (2 * h)
    density = torch.exp((alpha - 1) * x.log() - x - torch.lgamma(alpha))
    expected = -torch.where(upper, upper_slope, lower_slope) / density
    got = torch._standard_gamma_grad(alpha.to("neuron"), x.to("neuron")).cpu()
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-30)
    # CPU PyTorch's own gradient is an approximation good to about 1e-3 in float32.
    a32, x32 = alpha.float(), x.float().clamp(min=torch.finfo(torch.float32).tiny)
    torch.testing.assert_close(torch._standard_gamma_grad(a32.to("neuron"), x32.to("neuron")).cpu(),
                               torch._standard_gamma_grad(a32, x32), rtol=3e-3, atol=1e-30)
    edge = torch._standard_gamma_grad(torch.tensor([2.0, 0.0, -1.0], device="neuron"), torch.tensor([0.0, 1.0, 1.0], device="neuron"))
    assert edge[0].item() == 0.0 and edge[1:].isnan().all()


def test_dirichlet_gradient_matches_cpu(no_fallback):
    torch.manual_seed(10)
    alpha = torch.rand(400, dtype=torch.float64) * 5 + 0.05
    total = alpha + torch.rand(400, dtype=torch.float64) * 5 + 0.05
    x = torch.distributions.Beta(alpha, total - alpha).sample()
    got = torch._dirichlet_grad(x.to("neuron"), alpha.to("neuron"), total.to("neuron")).cpu()
    torch.testing.assert_close(got, torch._dirichlet_grad(x, alpha, total), rtol=2e-3, atol=1e-12)
    # The ends, where float samples land: 0 gives 0, 1 the limit (CPU's values).
    ends = [torch.tensor(v, dtype=torch.float64) for v in ([0.0, 1.0, 1.0], [1.0, 2.0, 0.5], [2.0, 3.0, 4.0])]
    torch.testing.assert_close(torch._dirichlet_grad(*[t.to("neuron") for t in ends]).cpu(), torch._dirichlet_grad(*ends))


def test_reparameterized_gamma_beta_and_dirichlet_gradients_on_the_device(no_fallback):
    # The mean's derivative, estimated from the pathwise gradients of many samples, against
    # the closed form: d E[Gamma(a)] / da = 1; d E[Beta(a, b)] / da = b / (a + b)^2.
    torch.manual_seed(12)
    n = 40000
    a = torch.tensor(2.5, device="neuron", requires_grad=True)
    torch.distributions.Gamma(a.expand(n), torch.ones(n, device="neuron")).rsample().mean().backward()
    assert abs(a.grad.item() - 1.0) < 0.03
    a = torch.tensor(2.0, device="neuron", requires_grad=True)
    torch.distributions.Beta(a.expand(n), torch.full((n,), 3.0, device="neuron")).rsample().mean().backward()
    assert abs(a.grad.item() - 3.0 / 25.0) < 0.005
    concentration = torch.tensor([1.0, 2.0, 3.0], device="neuron", requires_grad=True)
    torch.distributions.Dirichlet(concentration).rsample((n,))[:, 0].mean().backward()
    expected = torch.tensor([5.0, -1.0, -1.0]) / 36.0  # d (a1 / sum a) / d a
    assert (concentration.grad.cpu() - expected).abs().max() < 0.01
