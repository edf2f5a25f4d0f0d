"""Caching allocator as torch sees it: allocated/reserved/peak stats, empty_cache, summary, OOM, mem_get_info."""

import gc

import pytest
import torch

MIB = 1 << 20


def rounded(nbytes):
    """The allocator hands out blocks in multiples of 512 bytes."""
    return max(512, (nbytes + 511) // 512 * 512)


@pytest.fixture(autouse=True)
def no_gc_during_test():
    """A garbage collection in the middle of a test could free another test's device tensors."""
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def settle(device=0):
    gc.collect()
    torch.neuron.synchronize(device)


@pytest.mark.parametrize("numel,dtype", [(1, torch.float32), (1000, torch.float32), (1024, torch.float64),
                                         (3, torch.uint8), (300_000, torch.int16)])
def test_allocated_grows_by_rounded_size_and_shrinks_on_del(numel, dtype):
    settle()
    before = torch.neuron.memory_allocated()
    x = torch.empty(numel, dtype=dtype, device="neuron")
    nbytes = numel * x.element_size()
    assert torch.neuron.memory_allocated() == before + rounded(nbytes)
    assert torch.neuron.memory_stats()["requested_bytes.all.current"] >= nbytes
    del x
    assert torch.neuron.memory_allocated() == before


def test_allocation_counts_per_device():
    settle(1)
    before0 = torch.neuron.memory_allocated(0)
    before1 = torch.neuron.memory_allocated(1)
    x = torch.empty(4096, device="neuron:1")
    assert torch.neuron.memory_allocated(1) == before1 + 4096 * 4
    assert torch.neuron.memory_allocated(0) == before0
    assert torch.neuron.memory_allocated("neuron:1") == before1 + 4096 * 4
    del x
    assert torch.neuron.memory_allocated(1) == before1


def test_accelerator_agrees_with_neuron_module():
    keep = [torch.empty(777, device="neuron:0"), torch.empty(5000, device="neuron:1")]
    for index in range(torch.neuron.device_count()):
        assert torch.accelerator.memory_allocated(index) == torch.neuron.memory_allocated(index)
        assert torch.accelerator.memory_reserved(index) == torch.neuron.memory_reserved(index)
        assert torch.accelerator.max_memory_allocated(index) == torch.neuron.max_memory_allocated(index)
        stats = torch.neuron.memory_stats(index)
        assert stats["allocated_bytes.all.current"] == torch.neuron.memory_allocated(index)
        assert stats["reserved_bytes.all.current"] == torch.neuron.memory_reserved(index)
    del keep


def test_peak_and_reset():
    settle()
    torch.neuron.reset_peak_memory_stats()
    base = torch.neuron.memory_allocated()
    assert torch.neuron.max_memory_allocated() == base
    x = torch.empty(3 * MIB, dtype=torch.uint8, device="neuron")
    y = torch.empty(MIB, dtype=torch.uint8, device="neuron")
    del x, y
    assert torch.neuron.memory_allocated() == base
    assert torch.neuron.max_memory_allocated() == base + 4 * MIB
    assert torch.neuron.max_memory_reserved() >= torch.neuron.max_memory_allocated()
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == base


def test_reserved_covers_allocated():
    keep = [torch.empty(n, device="neuron") for n in (1, 100, 10_000, 3_000_000)]
    assert torch.neuron.memory_reserved() >= torch.neuron.memory_allocated()
    assert torch.neuron.memory_allocated() >= sum(rounded(t.nbytes) for t in keep)
    del keep


def test_freed_memory_is_cached_then_released_by_empty_cache():
    settle()
    torch.neuron.empty_cache()
    base_reserved = torch.neuron.memory_reserved()
    base_allocated = torch.neuron.memory_allocated()
    live = torch.empty(30 * MIB, dtype=torch.uint8, device="neuron")
    dead = torch.empty(40 * MIB, dtype=torch.uint8, device="neuron")
    dead.fill_(1)
    assert torch.neuron.memory_reserved() == base_reserved + 70 * MIB
    del dead
    # Freed blocks stay cached ...
    assert torch.neuron.memory_reserved() == base_reserved + 70 * MIB
    assert torch.neuron.memory_allocated() == base_allocated + 30 * MIB
    # ... until empty_cache returns what no live tensor needs.
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved() == base_reserved + 30 * MIB
    assert torch.neuron.memory_reserved() >= torch.neuron.memory_allocated()
    del live
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved() == base_reserved


def test_cached_block_is_reused():
    settle()
    x = torch.empty(64 * 1024, device="neuron")
    ptr = x.data_ptr()
    del x
    reserved = torch.neuron.memory_reserved()
    y = torch.empty(64 * 1024, device="neuron")
    assert y.data_ptr() == ptr
    assert torch.neuron.memory_reserved() == reserved


def test_memory_stats_keys():
    stats = torch.neuron.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
                "active_bytes.all.current", "requested_bytes.all.current", "allocation.all.current",
                "segment.all.current", "allocated_bytes.small_pool.current",
                "allocated_bytes.large_pool.current", "num_ooms", "num_alloc_retries"):
        assert key in stats, key
        assert isinstance(stats[key], int)
    assert stats == dict(torch.accelerator.memory_stats(0))


def test_accumulated_stats_reset():
    torch.neuron.reset_accumulated_memory_stats()
    x = torch.empty(1024, device="neuron")
    del x
    stats = torch.neuron.memory_stats()
    assert stats["allocation.all.allocated"] == 1
    assert stats["allocation.all.freed"] == 1
    torch.neuron.reset_accumulated_memory_stats()
    assert torch.neuron.memory_stats()["allocation.all.allocated"] == 0


def test_memory_summary():
    keep = torch.empty(1000, device="neuron")
    summary = torch.neuron.memory_summary()
    assert isinstance(summary, str)
    assert "neuron:0" in summary
    assert "Allocated memory" in summary and "Reserved memory" in summary
    assert "OOMs" in summary
    assert len(summary.splitlines()) > 8
    short = torch.neuron.memory_summary(device=1, abbreviated=True)
    assert "neuron:1" in short and len(short) < len(summary)
    del keep


def test_mem_get_info():
    settle()
    free, total = torch.neuron.mem_get_info()
    assert total == torch.neuron.get_device_properties(0).total_memory
    assert free == total - torch.neuron.memory_reserved()
    x = torch.empty(24 * MIB, dtype=torch.uint8, device="neuron")
    free_after, total_after = torch.neuron.mem_get_info()
    assert total_after == total
    assert free_after <= free - 24 * MIB
    del x
    assert torch.neuron.mem_get_info("neuron:0") == torch.accelerator.get_memory_info(0)


def test_out_of_memory():
    settle()
    capacity = torch.neuron.get_device_properties(0).total_memory
    ooms_before = torch.neuron.memory_stats()["num_ooms"]
    allocated_before = torch.neuron.memory_allocated()
    size = capacity + (1 << 30)  # 9 GiB with the default 8 GiB of HBM
    with pytest.raises(torch.OutOfMemoryError) as info:
        torch.empty(size, dtype=torch.uint8, device="neuron")
    assert isinstance(info.value, RuntimeError)
    message = str(info.value)
    for word in ("tried to allocate", "allocated", "reserved", "capacity", "neuron:0"):
        assert word in message, (word, message)
    assert "GiB" in message
    assert torch.neuron.memory_stats()["num_ooms"] == ooms_before + 1
    assert torch.neuron.memory_allocated() == allocated_before
    # The device still works after the OOM.
    x = torch.arange(10.0).to("neuron")
    assert torch.equal(x.cpu(), torch.arange(10.0))
    assert torch.neuron.memory_allocated() == allocated_before + 512


def test_out_of_memory_counts_on_its_own_device():
    capacity = torch.neuron.get_device_properties(1).total_memory
    ooms0 = torch.neuron.memory_stats(0)["num_ooms"]
    ooms1 = torch.neuron.memory_stats(1)["num_ooms"]
    with pytest.raises(torch.OutOfMemoryError, match="neuron:1"):
        torch.empty(capacity + 1, dtype=torch.uint8, device="neuron:1")
    assert torch.neuron.memory_stats(1)["num_ooms"] == ooms1 + 1
    assert torch.neuron.memory_stats(0)["num_ooms"] == ooms0


def test_nested_stats_and_deprecated_aliases():
    """memory_stats_as_nested_dict holds the same numbers as memory_stats; the deprecated
    torch.cuda names warn and give the numbers of their replacements."""
    keep = torch.empty(1 << 20, device="neuron")
    flat = torch.neuron.memory_stats()
    nested = torch.neuron.memory_stats_as_nested_dict()
    for key, value in flat.items():
        level = nested
        for part in key.split("."):
            level = level[part]
        assert level == value
    assert nested["allocated_bytes"]["all"]["current"] >= keep.nbytes
    with pytest.warns(FutureWarning):
        assert torch.neuron.memory_cached() == torch.neuron.memory_reserved()
    with pytest.warns(FutureWarning):
        assert torch.neuron.max_memory_cached() == torch.neuron.max_memory_reserved()
    del keep
    with pytest.warns(FutureWarning):
        torch.neuron.reset_max_memory_allocated()
    assert torch.neuron.max_memory_allocated() == torch.neuron.memory_allocated()
