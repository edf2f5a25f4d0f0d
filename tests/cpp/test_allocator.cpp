// Tests for the caching allocator (reuse, split/merge, statistics, out-of-memory and retry,
// drain before release, thread safety) and for the device registry's counts, checks and state.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "runtime/caching_allocator.h"
#include "runtime/device.h"
#include "runtime/errors.h"

namespace rt = torchneuron::runtime;

namespace {

constexpr size_t kMiB = size_t{1} << 20;

// An allocator with a drain callback that counts its calls and records what the allocator
// had released (segments returned to HBM) at the moment it was called.
struct CountingAllocator {
  explicit CountingAllocator(size_t capacity)
      : allocator(7, capacity, [this] {
          drains += 1;
          device_frees_at_drain.push_back(allocator.stats().num_device_free);
          reserved_at_drain.push_back(allocator.stats().reserved_bytes[rt::kAggregatePool].current);
        }) {}
  int drains = 0;
  std::vector<int64_t> device_frees_at_drain;
  std::vector<int64_t> reserved_at_drain;
  rt::CachingAllocator allocator;  // declared last: its callback uses the members above
};

int64_t reserved(const rt::CachingAllocator& a) {
  return a.stats().reserved_bytes[rt::kAggregatePool].current;
}
int64_t allocated(const rt::CachingAllocator& a) {
  return a.stats().allocated_bytes[rt::kAggregatePool].current;
}

}  // namespace

TEST(CachingAllocator, ZeroBytesGivesNullAndReleaseOfNullIsANoOp) {
  rt::CachingAllocator a(0, 64 * kMiB, [] {});
  void* handle = reinterpret_cast<void*>(1);
  EXPECT_EQ(a.allocate(0, &handle), nullptr);
  EXPECT_EQ(handle, nullptr);
  rt::CachingAllocator::release(nullptr);
  EXPECT_EQ(a.stats().allocation[rt::kAggregatePool].allocated, 0);
  EXPECT_EQ(reserved(a), 0);
}

TEST(CachingAllocator, FreedBlockIsReusedAtTheSameAddress) {
  rt::CachingAllocator a(0, 64 * kMiB, [] {});
  void* h1;
  void* p1 = a.allocate(1000, &h1);
  ASSERT_NE(p1, nullptr);
  EXPECT_TRUE(a.owns(p1));
  EXPECT_TRUE(a.owns(static_cast<char*>(p1) + 999));
  rt::CachingAllocator::release(h1);
  void* h2;
  void* p2 = a.allocate(1000, &h2);
  EXPECT_EQ(p2, p1);
  EXPECT_EQ(a.stats().num_device_alloc, 1);
  rt::CachingAllocator::release(h2);
}

TEST(CachingAllocator, TwoSmallBlocksSplitOneSegmentAndMergeBack) {
  rt::CachingAllocator a(0, 64 * kMiB, [] {});
  void *ha, *hb;
  char* pa = static_cast<char*>(a.allocate(1000, &ha));
  char* pb = static_cast<char*>(a.allocate(1000, &hb));
  EXPECT_EQ(pb, pa + 1024);  // rounded to 512-byte multiples, carved from the same segment
  auto s = a.stats();
  EXPECT_EQ(s.segment[rt::kAggregatePool].current, 1);
  EXPECT_EQ(s.reserved_bytes[rt::kSmallPool].current, int64_t{2} << 20);
  EXPECT_EQ(s.inactive_split[rt::kAggregatePool].current, 1);  // the rest of the segment
  EXPECT_EQ(s.inactive_split_bytes[rt::kAggregatePool].current, (int64_t{2} << 20) - 2048);

  rt::CachingAllocator::release(ha);
  EXPECT_EQ(a.stats().inactive_split[rt::kAggregatePool].current, 2);  // a and the rest
  a.empty_cache();  // the segment is still partly used: nothing to release
  EXPECT_EQ(reserved(a), int64_t{2} << 20);

  rt::CachingAllocator::release(hb);
  s = a.stats();
  EXPECT_EQ(s.inactive_split[rt::kAggregatePool].current, 0);  // whole again
  EXPECT_EQ(s.inactive_split_bytes[rt::kAggregatePool].current, 0);
  a.empty_cache();
  s = a.stats();
  EXPECT_EQ(s.reserved_bytes[rt::kAggregatePool].current, 0);
  EXPECT_EQ(s.segment[rt::kAggregatePool].current, 0);
  EXPECT_EQ(s.num_device_free, 1);
  EXPECT_FALSE(a.owns(pa));
}

TEST(CachingAllocator, StatisticsCountAllocationsBytesAndPeaks) {
  rt::CachingAllocator a(0, 64 * kMiB, [] {});
  void *h1, *h2, *h3;
  a.allocate(100, &h1);      // 512 rounded
  a.allocate(3000, &h2);     // 3072 rounded
  a.allocate(2 * kMiB, &h3); // large pool
  auto s = a.stats();
  EXPECT_EQ(s.allocation[rt::kAggregatePool].current, 3);
  EXPECT_EQ(s.allocation[rt::kAggregatePool].allocated, 3);
  EXPECT_EQ(s.allocation[rt::kSmallPool].current, 2);
  EXPECT_EQ(s.allocation[rt::kLargePool].current, 1);
  EXPECT_EQ(s.allocated_bytes[rt::kAggregatePool].current, int64_t(512 + 3072 + 2 * kMiB));
  EXPECT_EQ(s.requested_bytes[rt::kAggregatePool].current, int64_t(100 + 3000 + 2 * kMiB));
  EXPECT_EQ(s.active[rt::kAggregatePool].current, 3);
  EXPECT_EQ(s.reserved_bytes[rt::kLargePool].current, int64_t{20} << 20);
  EXPECT_EQ(s.reserved_bytes[rt::kAggregatePool].current, int64_t{22} << 20);
  EXPECT_EQ(s.num_device_alloc, 2);

  rt::CachingAllocator::release(h3);
  rt::CachingAllocator::release(h1);
  s = a.stats();
  EXPECT_EQ(s.allocation[rt::kAggregatePool].current, 1);
  EXPECT_EQ(s.allocation[rt::kAggregatePool].freed, 2);
  EXPECT_EQ(s.allocated_bytes[rt::kAggregatePool].current, 3072);
  EXPECT_EQ(s.allocated_bytes[rt::kAggregatePool].peak, int64_t(512 + 3072 + 2 * kMiB));
  EXPECT_EQ(s.requested_bytes[rt::kAggregatePool].current, 3000);

  a.reset_peak_stats();
  EXPECT_EQ(a.stats().allocated_bytes[rt::kAggregatePool].peak, 3072);
  a.reset_accumulated_stats();
  s = a.stats();
  EXPECT_EQ(s.allocation[rt::kAggregatePool].allocated, 0);
  EXPECT_EQ(s.allocation[rt::kAggregatePool].current, 1);  // current values survive
  EXPECT_EQ(s.num_device_alloc, 0);
  rt::CachingAllocator::release(h2);
  EXPECT_EQ(allocated(a), 0);
}

TEST(CachingAllocator, LargeRequestGetsItsOwnSegment) {
  rt::CachingAllocator a(0, 64 * kMiB, [] {});
  void* h;
  a.allocate(11 * kMiB + 1, &h);
  auto s = a.stats();
  EXPECT_EQ(s.reserved_bytes[rt::kLargePool].current, int64_t{12} << 20);  // rounded to 2 MiB
  // The 1 MiB - 512 B remainder is too small to split off, so the whole segment is handed out.
  EXPECT_EQ(s.allocated_bytes[rt::kLargePool].current, int64_t{12} << 20);
  EXPECT_EQ(s.requested_bytes[rt::kLargePool].current, int64_t(11 * kMiB + 1));
  EXPECT_EQ(s.inactive_split[rt::kAggregatePool].current, 0);
  rt::CachingAllocator::release(h);
  a.empty_cache();
  EXPECT_EQ(reserved(a), 0);
}

// A 2 MiB request is served from a shared 20 MiB large-pool segment; once that segment is whole
// again it must be reused rather than a second segment taken from HBM.
TEST(CachingAllocator, FreedMidSizeSegmentIsReused) {
  rt::CachingAllocator a(0, 64 * kMiB, [] {});
  void* h1;
  void* p1 = a.allocate(2 * kMiB, &h1);
  rt::CachingAllocator::release(h1);
  void* h2;
  void* p2 = a.allocate(2 * kMiB, &h2);
  EXPECT_EQ(p2, p1);
  EXPECT_EQ(a.stats().num_device_alloc, 1);
  EXPECT_EQ(reserved(a), int64_t{20} << 20);
  rt::CachingAllocator::release(h2);
}

TEST(CachingAllocator, OutOfMemoryRaisesWithRequestedAllocatedReservedAndCapacity) {
  CountingAllocator c(24 * kMiB);
  void* h;
  c.allocator.allocate(4 * kMiB, &h);  // takes a 20 MiB segment
  void* ignored;
  try {
    c.allocator.allocate(32 * kMiB, &ignored);
    FAIL() << "expected OutOfMemoryError";
  } catch (const rt::OutOfMemoryError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("neuron:7 out of memory"), std::string::npos) << message;
    EXPECT_NE(message.find("tried to allocate 32.00 MiB"), std::string::npos) << message;
    EXPECT_NE(message.find("4.00 MiB allocated"), std::string::npos) << message;
    EXPECT_NE(message.find("20.00 MiB reserved"), std::string::npos) << message;
    EXPECT_NE(message.find("24.00 MiB capacity"), std::string::npos) << message;
    EXPECT_NE(message.find("TORCHNEURON_HBM_GB"), std::string::npos) << message;
  }
  EXPECT_EQ(c.drains, 1);
  EXPECT_EQ(c.allocator.stats().num_ooms, 1);
  EXPECT_EQ(c.allocator.stats().num_alloc_retries, 1);
  static_assert(std::is_base_of_v<rt::Error, rt::OutOfMemoryError>);
  rt::CachingAllocator::release(h);
}

TEST(CachingAllocator, RetryAfterDrainingAndFreeingTheCacheSucceeds) {
  CountingAllocator c(40 * kMiB);
  void* h1;
  c.allocator.allocate(20 * kMiB, &h1);
  rt::CachingAllocator::release(h1);  // cached: 20 MiB reserved, nothing allocated
  EXPECT_EQ(reserved(c.allocator), int64_t{20} << 20);
  void* h2;
  void* p2 = c.allocator.allocate(30 * kMiB, &h2);  // fits only once the cache is released
  ASSERT_NE(p2, nullptr);
  ASSERT_EQ(c.drains, 1);
  EXPECT_EQ(c.device_frees_at_drain[0], 0);  // the drain ran before anything was released
  EXPECT_EQ(c.reserved_at_drain[0], int64_t{20} << 20);
  auto s = c.allocator.stats();
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(s.num_device_free, 1);
  EXPECT_EQ(s.reserved_bytes[rt::kAggregatePool].current, int64_t{30} << 20);
  rt::CachingAllocator::release(h2);
}

TEST(CachingAllocator, EmptyCacheDrainsTheDeviceBeforeReleasing) {
  CountingAllocator c(64 * kMiB);
  void* h;
  c.allocator.allocate(1000, &h);
  rt::CachingAllocator::release(h);
  c.allocator.empty_cache();
  ASSERT_EQ(c.drains, 1);
  EXPECT_EQ(c.reserved_at_drain[0], int64_t{2} << 20);
  EXPECT_EQ(c.device_frees_at_drain[0], 0);
  EXPECT_EQ(reserved(c.allocator), 0);
}

TEST(CachingAllocator, ManyThreadsAllocateAndReleaseConcurrently) {
  rt::CachingAllocator a(0, 256 * kMiB, [] {});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&a, t] {
      std::vector<void*> handles;
      for (int i = 0; i < 400; ++i) {
        void* h;
        const size_t bytes = 256 + size_t((i * 7919 + t * 104729) % 3) * (kMiB / 2) + i * 64;
        char* p = static_cast<char*>(a.allocate(bytes, &h));
        p[0] = static_cast<char>(i);
        p[bytes - 1] = static_cast<char>(t);
        handles.push_back(h);
        if (handles.size() > 8) {
          rt::CachingAllocator::release(handles.front());
          handles.erase(handles.begin());
        }
      }
      for (void* h : handles) rt::CachingAllocator::release(h);
    });
  }
  for (auto& thread : threads) thread.join();
  auto s = a.stats();
  EXPECT_EQ(s.allocation[rt::kAggregatePool].current, 0);
  EXPECT_EQ(s.allocation[rt::kAggregatePool].allocated, 1600);
  EXPECT_EQ(s.allocated_bytes[rt::kAggregatePool].current, 0);
  EXPECT_EQ(s.inactive_split[rt::kAggregatePool].current, 0);
  a.empty_cache();
  EXPECT_EQ(reserved(a), 0);
}

TEST(FormatBytes, UsesBinaryUnits) {
  EXPECT_EQ(rt::format_bytes(512), "512 B");
  EXPECT_EQ(rt::format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(rt::format_bytes(int64_t{8} << 30), "8.00 GiB");
}

TEST(DeviceRegistry, CountAndCapacityFollowTheEnvironmentDefaults) {
  if (std::getenv("TORCHNEURON_NUM_DEVICES") == nullptr) {
    EXPECT_EQ(rt::device_count(), 2);
  }
  if (std::getenv("TORCHNEURON_HBM_GB") == nullptr) {
    EXPECT_EQ(rt::hbm_capacity_bytes(), size_t{8} << 30);
  }
  ASSERT_GE(rt::device_count(), 1);
  rt::Device& d = rt::device(0);
  EXPECT_TRUE(rt::is_initialized());
  EXPECT_EQ(d.index(), 0);
  EXPECT_EQ(&rt::device(0), &d);  // started once
  EXPECT_EQ(d.allocator().capacity(), rt::hbm_capacity_bytes());
  EXPECT_EQ(d.allocator().device_index(), 0);
  EXPECT_EQ(d.queue().device_index(), 0);
}

TEST(DeviceRegistry, BadIndexRaisesInvalidArgumentNamingTheRange) {
  const int n = rt::device_count();
  for (int bad : {-1, n, rt::kMaxDevices}) {
    try {
      rt::check_device_index(bad);
      FAIL() << "expected InvalidArgument for " << bad;
    } catch (const rt::InvalidArgument& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("index " + std::to_string(bad) + " is out of range"),
                std::string::npos) << message;
      EXPECT_NE(message.find("0.." + std::to_string(n - 1)), std::string::npos) << message;
      EXPECT_NE(message.find("TORCHNEURON_NUM_DEVICES"), std::string::npos) << message;
    }
  }
  EXPECT_THROW(rt::device(n), rt::InvalidArgument);
  EXPECT_THROW(rt::set_current_device(-1), rt::InvalidArgument);
  EXPECT_THROW(rt::set_current_stream(n, 1), rt::InvalidArgument);
  EXPECT_NO_THROW(rt::check_device_index(n - 1));
}

TEST(DeviceRegistry, CurrentDeviceAndStreamArePerThread) {
  if (rt::device_count() < 2) GTEST_SKIP() << "needs two devices";
  rt::set_current_device(1);
  rt::set_current_stream(1, 5);
  int other_device = -1;
  rt::StreamId other_stream = -1;
  std::thread([&] {
    other_device = rt::current_device();
    other_stream = rt::current_stream(1);
  }).join();
  EXPECT_EQ(other_device, 0);
  EXPECT_EQ(other_stream, rt::kDefaultStream);
  EXPECT_EQ(rt::current_device(), 1);
  EXPECT_EQ(rt::current_stream(1), 5);
  EXPECT_EQ(rt::current_stream(0), rt::kDefaultStream);
  EXPECT_EQ(rt::current_stream(-3), rt::kDefaultStream);
  rt::set_current_stream(1, rt::kDefaultStream);
  rt::set_current_device(0);
}

TEST(DeviceRegistry, StreamsAreDistinctIdsAndPoolStreamsCycle) {
  rt::Device& d = rt::device(0);
  const rt::StreamId a = d.new_stream();
  const rt::StreamId b = d.new_stream();
  EXPECT_NE(a, b);
  EXPECT_GT(a, rt::Device::kPoolSize);
  EXPECT_GT(b, rt::Device::kPoolSize);
  for (int i = 0; i < 2 * rt::Device::kPoolSize; ++i) {
    const rt::StreamId s = d.pool_stream();
    EXPECT_GE(s, 1);
    EXPECT_LE(s, rt::Device::kPoolSize);
  }
}
