// Tests for graph capture in the runtime: a capturing stream's commands are recorded, not run,
// and replayed in order as one command; host waits on it raise; graph pools keep their memory;
// captured random draws take the replay's seed and offset.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/caching_allocator.h"
#include "runtime/device.h"
#include "runtime/graph_capture.h"
#include "runtime/hardware_queue.h"
#include "runtime/philox.h"

namespace rt = torchneuron::runtime;

namespace {
constexpr size_t kMiB = size_t{1} << 20;
constexpr rt::StreamId kStream = 5;
}  // namespace

TEST(GraphCapture, CapturedCommandsRunOnlyWhenReplayedInOrder) {
  rt::HardwareQueue queue(0);
  auto graph = std::make_shared<rt::CapturedGraph>();
  std::vector<int> log;
  queue.begin_capture(kStream, graph.get());
  queue.submit(kStream, rt::LaunchInfo::named("first"), [&log] { log.push_back(1); });
  queue.submit(kStream, rt::LaunchInfo::named("second"), [&log] { log.push_back(2); });
  queue.submit(rt::kDefaultStream, rt::LaunchInfo::named("other stream"), [&log] { log.push_back(9); });
  queue.end_capture(kStream);
  queue.synchronize();
  EXPECT_EQ(log, std::vector<int>({9}));  // only the other stream's command ran
  ASSERT_EQ(graph->size(), 2u);
  for (int i = 0; i < 2; ++i) queue.submit(kStream, rt::LaunchInfo::named("replay"), [graph] { graph->run(0, 0); });
  queue.synchronize();
  EXPECT_EQ(log, std::vector<int>({9, 1, 2, 1, 2}));
  EXPECT_NE(graph->describe().find("1 second"), std::string::npos);
}

TEST(GraphCapture, HostWaitsOnACapturingStreamRaiseAndInvalidateTheGraph) {
  rt::HardwareQueue queue(0);
  auto graph = std::make_shared<rt::CapturedGraph>();
  queue.begin_capture(kStream, graph.get());
  EXPECT_THROW(queue.synchronize_stream(kStream), rt::CaptureError);
  EXPECT_THROW(queue.synchronize(), rt::CaptureError);
  EXPECT_THROW(queue.begin_capture(kStream, graph.get()), rt::InvalidArgument);  // one capture per stream
  queue.end_capture(kStream);
  EXPECT_NE(graph->invalidated.find("is capturing a graph"), std::string::npos);
  EXPECT_THROW(graph->run(0, 0), rt::KernelError);
  queue.synchronize();  // capture over: the queue works as before
}

TEST(GraphCapture, AFailingCommandNamesItsOpAndPosition) {
  rt::CapturedGraph graph;
  graph.record(rt::LaunchInfo::named("ok"), [] {});
  graph.record(rt::LaunchInfo::named("aten::index_select"), [] { throw rt::KernelError("index 7 out of range"); });
  try {
    graph.run(0, 0);
    FAIL() << "expected a KernelError";
  } catch (const rt::KernelError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("graph command 1 'aten::index_select' failed: index 7 out of range"), std::string::npos);
    EXPECT_NE(what.find("captured at:"), std::string::npos);
  }
}

TEST(GraphCapture, PoolMemoryServesOnlyItsStreamUntilThePoolIsReleased) {
  rt::CachingAllocator a(0, 64 * kMiB, [] {});
  const rt::StreamId stream = rt::current_stream(0);
  a.retain_pool(3);
  a.begin_allocate_to_pool(3, stream);
  void* h_pool;
  void* p_pool = a.allocate(4096, &h_pool);
  a.end_allocate_to_pool(stream);
  rt::CachingAllocator::release(h_pool);  // freed, but the graph's memory stays the graph's
  void* h_other;
  void* p_other = a.allocate(4096, &h_other);
  EXPECT_NE(p_other, p_pool);
  EXPECT_EQ(a.stats().num_device_alloc, 2);  // a segment of its own
  a.empty_cache();
  EXPECT_EQ(a.stats().num_device_free, 0);  // the pool's segment is kept, the other is in use
  a.begin_allocate_to_pool(3, stream);
  void* h_again;
  EXPECT_EQ(a.allocate(4096, &h_again), p_pool);  // the pool reuses its own block
  a.end_allocate_to_pool(stream);
  rt::CachingAllocator::release(h_again);
  a.release_pool(3);  // the last user: the memory joins pool 0
  EXPECT_EQ(a.pool_users(3), 0);
  rt::CachingAllocator::release(h_other);
  void* h_joined;
  void* p_joined = a.allocate(4096, &h_joined);
  EXPECT_TRUE(p_joined == p_pool || p_joined == p_other);
  rt::CachingAllocator::release(h_joined);
  a.empty_cache();
  EXPECT_EQ(a.stats().num_device_free, 2);
}

TEST(GraphCapture, CapturedRandomDrawsTakeTheReplaysSeedAndOffset) {
  rt::PhiloxGenerator gen(42);
  gen.reserve(8);  // eager draws before the capture
  rt::GraphRngState state;
  gen.begin_capture(&state);
  const rt::PhiloxStream first = gen.reserve(6);
  const rt::PhiloxStream second = gen.reserve(4);
  EXPECT_EQ(gen.end_capture(), 12u);  // 6 rounds up to 8, then 4
  EXPECT_EQ(gen.offset(), 8u);  // the capture did not advance the generator
  const auto [seed, offset] = gen.take_for_replay(12);
  EXPECT_EQ(seed, 42u);
  EXPECT_EQ(offset, 8u);
  EXPECT_EQ(gen.offset(), 20u);
  state = rt::GraphRngState{seed, offset};
  // The same words eager draws would give from that offset.
  rt::PhiloxGenerator eager(42);
  eager.set_offset(8);
  const rt::PhiloxStream e1 = eager.reserve(6), e2 = eager.reserve(4);
  for (uint64_t i = 0; i < 6; ++i) EXPECT_EQ(first.resolved().word(i), e1.word(i));
  for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(second.resolved().word(i), e2.word(i));
}
